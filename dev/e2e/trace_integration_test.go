//go:build integration

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/testcluster"
)

// The OTLP receiver of these tests is the OpenTelemetry Collector's own
// (go.opentelemetry.io/collector/receiver/otlpreceiver) in a small
// program, hack/otlpsink, a tools module outside go.work (the collector
// needs a newer grpc and SDK than the product's graph): $KHOOK_OTLPSINK
// (make otlpsink builds it), else built here once.
var (
	sinkOnce sync.Once
	sinkBin  string
	sinkErr  error
)

func otlpSinkBinary(t *testing.T) string {
	t.Helper()
	sinkOnce.Do(func() {
		if p := os.Getenv("KHOOK_OTLPSINK"); p != "" {
			sinkBin = p
			_, sinkErr = os.Stat(p)
			return
		}
		dir, err := os.MkdirTemp("", "otlpsink")
		if err != nil {
			sinkErr = err
			return
		}
		sinkBin = filepath.Join(dir, "otlpsink")
		cmd := exec.Command("go", "build", "-o", sinkBin, ".")
		cmd.Dir = filepath.Join(root(t), "hack", "otlpsink")
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
		if out, err := cmd.CombinedOutput(); err != nil {
			sinkErr = fmt.Errorf("build hack/otlpsink: %w\n%s", err, out)
		}
	})
	if sinkErr != nil {
		t.Fatal(sinkErr)
	}
	return sinkBin
}

// freePort is a loopback port nothing listens on (now).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// otlpReceiver starts the collector's OTLP receiver on loopback; it
// writes what it receives to the file it returns, one request a line.
func otlpReceiver(t *testing.T) (grpcAddr, httpAddr, out string) {
	t.Helper()
	bin := otlpSinkBinary(t)
	grpcAddr, httpAddr = freePort(t), freePort(t)
	out = filepath.Join(t.TempDir(), "received.jsonl")
	cmd := exec.Command(bin, "-grpc", grpcAddr, "-http", httpAddr, "-out", out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("otlpsink did not start: %s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("otlpsink not ready after 30 s: %s", stderr.String())
	}
	return grpcAddr, httpAddr, out
}

// otlpSpan is a span as the collector's OTLP JSON writes it.
type otlpSpan struct {
	TraceID      string     `json:"traceId"`
	SpanID       string     `json:"spanId"`
	ParentSpanID string     `json:"parentSpanId"`
	Name         string     `json:"name"`
	Attributes   []otlpAttr `json:"attributes"`
	Events       []struct {
		Name       string     `json:"name"`
		Attributes []otlpAttr `json:"attributes"`
	} `json:"events"`
	Status struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
}

type otlpAttr struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string `json:"stringValue"`
		IntValue    any     `json:"intValue"`
		BoolValue   *bool   `json:"boolValue"`
	} `json:"value"`
}

func (a otlpAttr) text() string {
	switch {
	case a.Value.StringValue != nil:
		return *a.Value.StringValue
	case a.Value.IntValue != nil:
		return fmt.Sprint(a.Value.IntValue)
	case a.Value.BoolValue != nil:
		return fmt.Sprint(*a.Value.BoolValue)
	}
	return ""
}

func (s otlpSpan) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.text()
		}
	}
	return ""
}

func (s otlpSpan) isError() bool {
	return fmt.Sprint(s.Status.Code) == "2" || s.Status.Code == "STATUS_CODE_ERROR"
}

func (s otlpSpan) hasEvent(name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// received reads the spans the receiver wrote, and the raw text.
func received(t *testing.T, file string) ([]otlpSpan, string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var spans []otlpSpan
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		var req struct {
			ResourceSpans []struct {
				ScopeSpans []struct{ Spans []otlpSpan } `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			t.Fatalf("receiver's line: %v\n%s", err, line)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
	}
	return spans, string(raw)
}

// tracedSpec is the 10-chart spec of bench/charts.sh with a state record,
// a step whose Pods crash (retried once, then failed: its container's log
// quotes the planted secret) and a step after it that never runs.
func tracedSpec(ns string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: traced}\nstate: {namespace: %s}\nsteps:\n", ns)
	for i := range 10 {
		fmt.Fprintf(&b, "  - name: r%d\n    helm: {chart: %s, namespace: %s, wait: true, values: {color: c%d}}\n", i, chartrepo.ChartDir("cmdeploy"), ns, i)
	}
	fmt.Fprintf(&b, `  - name: broken
    needs: [r0]
    timeout: 7s
    retries: 1
    retryDelay: 1s
    onError: continue
    apply:
      namespace: %[1]s
      waitFor: condition=Available
      manifests:
        - inline: |
            apiVersion: apps/v1
            kind: Deployment
            metadata: {name: broken}
            spec:
              replicas: 1
              selector: {matchLabels: {app: broken}}
              template:
                metadata:
                  labels: {app: broken}
                  annotations: {kwok.khook.io/pod: crash-loop, kwok.khook.io/exit-code: "3"}
                spec:
                  containers: [{name: app, image: registry.example/web:1, env: [{name: TOKEN, value: "${TOKEN}"}]}]
  - name: after-broken
    needs: [broken]
    wait: {for: condition=Available, on: deployment/r1, namespace: %[1]s}
`, ns)
	return b.String()
}

// TestTraceToACollector runs the 10-chart spec with a failing, retried
// step through the built plugin, its trace sent by OTLP/gRPC to the
// collector's receiver as a child of a given TRACEPARENT: the span tree
// (the run, its lock and record, a span per step and attempt, the phases
// under them), the attributes, the error status of the failed step and
// attempts, the stuck cause as an event, the trace id in -o json, on
// standard error and in the state record, and the planted secret in no
// span. A no-op re-run sends a new trace by OTLP/HTTP.
func TestTraceToACollector(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "traced")
	dir := t.TempDir()
	logFile := filepath.Join(dir, "pod.log")
	if err := os.WriteFile(logFile, []byte("2026-11-22T05:00:00Z stdout F starting\n2026-11-22T05:00:01Z stderr F fatal: token "+planted+" rejected\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serveLogs(t, ns, logFile)
	spec := writeSpec(t, tracedSpec(ns))
	grpcAddr, httpAddr, out := otlpReceiver(t)
	const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	env := kubeEnv(t, "KHOOK_SECRET_TOKEN="+planted,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+grpcAddr, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"TRACEPARENT=00-"+callerTrace+"-"+callerSpan+"-01")
	traceFile := filepath.Join(dir, "trace.jsonl")
	applySVG, statusHTML := filepath.Join(dir, "apply.svg"), filepath.Join(dir, "status.html")
	res := run(t, bins.Kubectl, env, "", "apply", "-f", spec, "-o", "json", "--trace-file", traceFile, "--timeline", applySVG)
	if res.Code != 1 {
		t.Fatalf("exit %d, want 1 (a step failed)\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	var rep struct {
		TraceID string `json:"traceId"`
		Steps   []struct{ Name, Status string }
	}
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.TraceID != callerTrace {
		t.Errorf("-o json traceId %q, want the caller's %s", rep.TraceID, callerTrace)
	}
	if !strings.Contains(res.Stderr, "Trace "+callerTrace+": sent by OTLP/gRPC, written to "+traceFile) {
		t.Errorf("standard error does not name the trace:\n%s", res.Stderr)
	}
	st := run(t, bins.Kubectl, kubeEnv(t, "KHOOK_SECRET_TOKEN="+planted), "", "status", "-f", spec, "-o", "json", "--timeline", statusHTML)
	if !strings.Contains(st.Stdout, `"traceId": "`+callerTrace+`"`) {
		t.Errorf("the state record does not keep the trace id:\n%s", st.Stdout)
	}
	// the timeline of apply --timeline (from the run's events) and of
	// status --timeline (from the record): a bar per step and attempt
	for _, f := range []string{applySVG, statusHTML} {
		pic, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if n := strings.Count(string(pic), fmt.Sprintf(`class="bar" data-step="r%d" data-attempt="1" data-status="ok"`, i)); n != 1 {
				t.Errorf("%s: %d bars of r%d", filepath.Base(f), n, i)
			}
		}
		for _, want := range []string{`data-step="broken" data-attempt="1" data-status="retried"`, `data-step="broken" data-attempt="2" data-status="failed"`, `class="wait" data-step="broken"`, `class="mark" data-step="after-broken"`, callerTrace} {
			if !strings.Contains(string(pic), want) {
				t.Errorf("%s lacks %s", filepath.Base(f), want)
			}
		}
		if strings.Contains(string(pic), planted) {
			t.Errorf("%s holds the planted secret", f)
		}
	}

	spans, raw := received(t, out)
	for _, f := range plantedForms() {
		if strings.Contains(raw, f) {
			t.Errorf("the collector received the planted secret (%q)", f)
		}
	}
	if !strings.Contains(raw, "***") {
		t.Errorf("no masked text reached the collector: the test plants nothing where spans are")
	}
	byID := map[string]otlpSpan{}
	byName := map[string][]otlpSpan{}
	for _, s := range spans {
		if s.TraceID != callerTrace {
			t.Errorf("span %q is in trace %s, not the caller's", s.Name, s.TraceID)
		}
		byID[s.SpanID] = s
		byName[s.Name] = append(byName[s.Name], s)
	}
	one := func(name string) otlpSpan {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans %q, want 1; spans: %v", len(byName[name]), name, keys(byName))
		}
		return byName[name][0]
	}
	parent := func(s otlpSpan) string { return byID[s.ParentSpanID].Name }
	root := one("khook apply")
	if root.ParentSpanID != callerSpan {
		t.Errorf("the run's span's parent is %q, want TRACEPARENT's span %s", root.ParentSpanID, callerSpan)
	}
	for k, v := range map[string]string{"khook.command": "apply", "khook.spec": "traced", "process.exit.code": "1", "khook.run.status": "failed"} {
		if got := root.attr(k); got != v {
			t.Errorf("run span %s = %q, want %q", k, got, v)
		}
	}
	if root.attr("khook.version") == "" || root.attr("khook.context") == "" {
		t.Errorf("run span without khook.version or khook.context: %v", root.Attributes)
	}
	for _, name := range []string{"lock", "record"} {
		for _, s := range byName[name] {
			if parent(s) != "khook apply" {
				t.Errorf("%s span under %q", name, parent(s))
			}
		}
		if len(byName[name]) == 0 {
			t.Errorf("no %s span", name)
		}
	}
	for i := range 10 {
		s := one(fmt.Sprintf("helm r%d", i))
		if parent(s) != "khook apply" || s.attr("khook.step.kind") != "helm" || s.attr("khook.step.outcome") != "ok" || s.attr("khook.step.fate") != "run" || !strings.Contains(s.attr("khook.step.target"), "cmdeploy") || s.isError() {
			t.Errorf("step span r%d: under %q, attributes %v, status %v", i, parent(s), s.Attributes, s.Status)
		}
	}
	// a helm step's attempt and its phases
	var r0attempt otlpSpan
	for _, s := range byName["attempt 1"] {
		if parent(s) == "helm r0" {
			r0attempt = s
		}
	}
	phases := map[string]bool{}
	for _, s := range spans {
		if s.ParentSpanID == r0attempt.SpanID || (byID[s.ParentSpanID].ParentSpanID == r0attempt.SpanID && r0attempt.SpanID != "") {
			phases[s.Name] = true
		}
	}
	for _, p := range []string{"fetch", "install", "wait"} {
		if !phases[p] {
			t.Errorf("r0's attempt has no %s phase: %v", p, phases)
		}
	}
	broken := one("apply broken")
	if !broken.isError() || broken.attr("khook.step.outcome") != "failed" || broken.attr("khook.step.attempts") != "2" || !broken.hasEvent("khook.cause") {
		t.Errorf("failed step span: status %v, attributes %v, events %v", broken.Status, broken.Attributes, broken.Events)
	}
	if !strings.Contains(broken.Status.Message, "CrashLoopBackOff") {
		t.Errorf("failed step's status message lacks the cause: %q", broken.Status.Message)
	}
	attempts, causes := 0, 0
	for _, s := range spans {
		if parent(s) == "apply broken" && strings.HasPrefix(s.Name, "attempt ") {
			attempts++
			if !s.isError() || !s.hasEvent("exception") {
				t.Errorf("%s of the failed step: status %v, events %v", s.Name, s.Status, s.Events)
			}
		}
		if s.Name == "wait" && byID[s.ParentSpanID].Name != "" && parent(byID[s.ParentSpanID]) == "apply broken" && s.hasEvent("khook.cause") {
			causes++
		}
	}
	if attempts != 2 || causes == 0 {
		t.Errorf("the failed step has %d attempt spans (want 2), %d waits with a cause event", attempts, causes)
	}
	after := one("wait after-broken")
	if after.attr("khook.step.outcome") != "skipped" || !strings.Contains(after.attr("khook.step.skip_reason"), "broken") {
		t.Errorf("the step after the failed one: %v", after.Attributes)
	}
	// the file of OTLP JSON holds the same trace
	fileRaw, err := os.ReadFile(traceFile)
	if err != nil || !strings.Contains(string(fileRaw), `"traceId":"`+callerTrace+`"`) || strings.Contains(string(fileRaw), planted) {
		t.Errorf("--trace-file: %v\n%.400s", err, fileRaw)
	}

	// a no-op re-run (the charts resume), traced over OTLP/HTTP, no
	// caller: a trace of its own, the run's span a root
	env2 := kubeEnv(t, "KHOOK_SECRET_TOKEN="+planted, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+httpAddr, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
	res2 := run(t, bins.Kubectl, env2, "", "apply", "-f", spec, "-o", "json", "--steps", "r*")
	var rep2 struct{ TraceID string }
	if err := json.Unmarshal([]byte(res2.Stdout), &rep2); err != nil || res2.Code != 0 || len(rep2.TraceID) != 32 || rep2.TraceID == callerTrace {
		t.Fatalf("re-run: exit %d, trace %q, %v\n%s", res2.Code, rep2.TraceID, err, res2.Stderr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans, _ = received(t, out)
		var roots []otlpSpan
		for _, s := range spans {
			if s.TraceID == rep2.TraceID && s.Name == "khook apply" {
				roots = append(roots, s)
			}
		}
		if len(roots) == 1 {
			if roots[0].ParentSpanID != "" {
				t.Errorf("the re-run's span has a parent %q", roots[0].ParentSpanID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the re-run's trace %s did not reach the receiver over OTLP/HTTP", rep2.TraceID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func keys(m map[string][]otlpSpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestFleetTrace: a fleet run is one trace, with a span per cluster under
// the run's, each cluster's record and steps under its own, and the trace
// id at the top of -o json.
func TestFleetTrace(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "tracefleet")
	kubeconfig, _ := oneClusterTwice(t)
	spec := writeSpec(t, fmt.Sprintf(oneClusterSpec, ns, "rec-${KHOOK_CONTEXT}"))
	grpcAddr, _, out := otlpReceiver(t)
	env := []string{"KUBECONFIG=" + kubeconfig, "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + grpcAddr, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}
	res := run(t, bins.Kubectl, env, "", "apply", "-f", spec, "--contexts", "one-a,one-b", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	var rep struct {
		TraceID  string
		Clusters []struct{ Context string }
	}
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil || len(rep.TraceID) != 32 || len(rep.Clusters) != 2 {
		t.Fatalf("-o json: %v %+v\n%s", err, rep, res.Stdout)
	}
	spans, _ := received(t, out)
	byID := map[string]otlpSpan{}
	for _, s := range spans {
		byID[s.SpanID] = s
		if s.TraceID != rep.TraceID {
			t.Errorf("span %q in trace %s, not the fleet's %s", s.Name, s.TraceID, rep.TraceID)
		}
	}
	clusters := map[string]string{} // span id -> context
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "cluster ") {
			if byID[s.ParentSpanID].Name != "khook apply" {
				t.Errorf("%s is under %q", s.Name, byID[s.ParentSpanID].Name)
			}
			clusters[s.SpanID] = s.attr("khook.context")
		}
	}
	steps := map[string]bool{}
	for _, s := range spans {
		if s.Name == "apply config" || s.Name == "record" || s.Name == "lock" {
			ctx, ok := clusters[s.ParentSpanID]
			if !ok {
				t.Errorf("%s is under %q, not a cluster's span", s.Name, byID[s.ParentSpanID].Name)
			}
			if s.Name == "apply config" {
				steps[ctx] = true
			}
		}
	}
	if len(clusters) != 2 || !steps["one-a"] || !steps["one-b"] {
		t.Errorf("cluster spans %v, steps under them %v", clusters, steps)
	}
}
