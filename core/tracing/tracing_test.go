package tracing

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"khook.io/core/event"
	"khook.io/core/redact"
)

// recorder is a span exporter that keeps what it is given (the SDK's
// in-memory exporter forgets it on Shutdown).
type recorder struct {
	mu    sync.Mutex
	spans tracetest.SpanStubs
}

func (r *recorder) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, tracetest.SpanStubsFromReadOnlySpans(spans)...)
	return nil
}

func (r *recorder) Shutdown(context.Context) error { return nil }

// newTestTrace is Start with the recorder as the exporter.
func newTestTrace(t *testing.T, env map[string]string, red *redact.Redactor) (*Trace, *recorder) {
	t.Helper()
	rec := &recorder{}
	tr := &Trace{red: red, stderr: io.Discard}
	tr.start(context.Background(), Options{Command: "apply", Redactor: red}, func(k string) string { return env[k] }, []sdktrace.SpanExporter{rec})
	return tr, rec
}

const planted = "s3cr3t-planted-value"

// at is a time of the fake run: n milliseconds after its start.
var base = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

// fakeRun emits the events of a run on one cluster: the lock, the
// record, step "web" failing twice (its wait stuck on a crashing
// container, the cause quoting a secret), step "db" resumed, step "app"
// ok.
func fakeRun(s event.Sink) {
	step := func(k event.Kind, name, typ string, attempt, ms int, mut ...func(*event.Event)) {
		e := event.Event{Kind: k, Step: name, Type: typ, Attempt: attempt, Time: at(ms)}
		for _, m := range mut {
			m(&e)
		}
		s.Emit(e)
	}
	phase := func(k event.Kind, name string, attempt, ms int, ph, detail, msg string) {
		step(k, name, "helm", attempt, ms, func(e *event.Event) { e.Phase, e.Detail, e.Message = ph, detail, msg })
	}
	s.Emit(event.Event{Kind: event.PhaseStarted, Time: at(0), Phase: event.PhaseLock, Detail: "run lock of state record default/x"})
	s.Emit(event.Event{Kind: event.PhaseEnded, Time: at(20), Phase: event.PhaseLock, Detail: "run lock of state record default/x"})
	s.Emit(event.Event{Kind: event.PhaseStarted, Time: at(20), Phase: event.PhaseRecord, Detail: "read"})
	s.Emit(event.Event{Kind: event.PhaseEnded, Time: at(30), Phase: event.PhaseRecord, Detail: "read"})
	s.Emit(event.Event{Kind: event.RunStarted, Time: at(40)})
	step(event.StepSkipped, "db", "apply", 0, 41, func(e *event.Event) { e.Message = "unchanged since it succeeded in a previous run (state record)" })
	for n, off := range []int{50, 1100} {
		a := n + 1
		step(event.StepStarted, "web", "helm", a, off)
		phase(event.PhaseStarted, "web", a, off+1, event.PhaseFetch, "chart web", "")
		phase(event.PhaseEnded, "web", a, off+10, event.PhaseFetch, "chart web", "")
		phase(event.PhaseStarted, "web", a, off+10, event.PhaseInstall, "chart web as release web", "")
		phase(event.PhaseStarted, "web", a, off+30, event.PhaseWait, "readiness", "")
		step(event.StepProgress, "web", "helm", a, off+500, func(e *event.Event) { e.Message = "stuck: container app: CrashLoopBackOff" })
		step(event.StepCause, "web", "helm", a, off+500, func(e *event.Event) {
			e.Message = "container app: CrashLoopBackOff: token=" + planted + " (Pod ns/web-1)"
		})
		phase(event.PhaseEnded, "web", a, off+1000, event.PhaseWait, "readiness", "timed out; token="+planted)
		phase(event.PhaseEnded, "web", a, off+1001, event.PhaseInstall, "chart web as release web", "install failed: token="+planted)
		if a == 1 {
			step(event.StepRetrying, "web", "helm", a, off+1002, func(e *event.Event) {
				e.Message, e.Delay = "release web: install failed; cause: container app ("+planted+")", 50*time.Millisecond
			})
		}
	}
	step(event.StepFailed, "web", "helm", 2, 2110, func(e *event.Event) {
		e.Message, e.Elapsed = "release web: install failed; cause: Pod ns/web-1: container app: CrashLoopBackOff: token="+planted, 2060*time.Millisecond
	})
	step(event.StepStarted, "app", "apply", 1, 60)
	step(event.PhaseStarted, "app", "apply", 1, 61, func(e *event.Event) { e.Phase, e.Detail = event.PhaseApply, "3 objects" })
	step(event.PhaseEnded, "app", "apply", 1, 90, func(e *event.Event) { e.Phase, e.Detail = event.PhaseApply, "3 objects" })
	step(event.StepSucceeded, "app", "apply", 1, 95, func(e *event.Event) { e.Message, e.Elapsed = "3 objects created", 35*time.Millisecond })
	s.Emit(event.Event{Kind: event.RunFinished, Time: at(2120), Message: "failed", Elapsed: 2080 * time.Millisecond})
	s.Emit(event.Event{Kind: event.PhaseStarted, Time: at(2120), Phase: event.PhaseRecord, Detail: "finish"})
	s.Emit(event.Event{Kind: event.PhaseEnded, Time: at(2130), Phase: event.PhaseRecord, Detail: "finish"})
}

// TestTraceOfARun: the spans of a run drawn from its events: the run's
// span a child of TRACEPARENT's, the lock and the record under it, a span
// per step with its attempts and their phases under it, the failed step
// and attempts with an error status and the cause as an event, every
// attribute redacted.
func TestTraceOfARun(t *testing.T) {
	red := redact.New()
	red.Add(planted)
	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tr, rec := newTestTrace(t, map[string]string{"TRACEPARENT": "00-" + parentTrace + "-" + parentSpan + "-01"}, red)
	if tr.ID() != parentTrace {
		t.Fatalf("trace id %s, want the caller's %s", tr.ID(), parentTrace)
	}
	tr.SetSpec("bootstrap")
	sink := tr.Cluster("", false)
	tr.SetContext("kind-prod")
	sink.Steps([]StepInfo{{Name: "web", Target: "chart web 1.0 as release web in ns", Fate: "run"}, {Name: "db", Fate: "resume"}, {Name: "app", Fate: "run"}})
	fakeRun(sink)
	sink.End("failed", nil)
	tr.End(1, nil)

	spans := map[string]tracetest.SpanStub{}
	byID := map[string]tracetest.SpanStub{}
	for _, s := range rec.spans {
		if s.SpanContext.TraceID().String() != parentTrace {
			t.Errorf("span %q is in trace %s, not the caller's", s.Name, s.SpanContext.TraceID())
		}
		spans[s.Name] = s
		byID[s.SpanContext.SpanID().String()] = s
	}
	parentOf := func(s tracetest.SpanStub) string {
		if p, ok := byID[s.Parent.SpanID().String()]; ok {
			return p.Name
		}
		return s.Parent.SpanID().String()
	}
	attrs := func(s tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		return m
	}
	root := spans["khook apply"]
	if parentOf(root) != parentSpan {
		t.Errorf("the run's span's parent is %s, want TRACEPARENT's span %s", parentOf(root), parentSpan)
	}
	want := map[string]string{"khook.command": "apply", "khook.spec": "bootstrap", "khook.context": "kind-prod", "process.exit.code": "1", "khook.run.status": "failed"}
	for k, v := range want {
		if got := attrs(root)[k]; got != v {
			t.Errorf("run span %s = %q, want %q", k, got, v)
		}
	}
	if attrs(root)["khook.version"] == "" || root.Status.Code != codes.Error {
		t.Errorf("run span: version %q, status %v", attrs(root)["khook.version"], root.Status)
	}
	// the tree: child → parent
	tree := map[string]string{
		"lock": "khook apply", "record": "khook apply",
		"helm web": "khook apply", "apply db": "khook apply", "apply app": "khook apply",
		"apply": "attempt 1", "fetch": "attempt 2", "install": "attempt 2", "wait": "install",
	}
	for child, parent := range tree {
		s, ok := spans[child]
		if !ok {
			t.Errorf("no span %q; spans: %v", child, names(rec.spans))
			continue
		}
		if got := parentOf(s); got != parent && !(child == "apply" && got == "attempt 1") {
			t.Errorf("span %q is under %q, want %q", child, got, parent)
		}
	}
	var attempts []tracetest.SpanStub
	for _, s := range rec.spans {
		if strings.HasPrefix(s.Name, "attempt ") && parentOf(s) == "helm web" {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempts of web, want 2", len(attempts))
	}
	for _, a := range attempts {
		if a.Status.Code != codes.Error || !hasEvent(a, "exception") {
			t.Errorf("%s of the failed step: status %v, events %v: want an error and an exception event", a.Name, a.Status, a.Events)
		}
	}
	web := spans["helm web"]
	wa := attrs(web)
	for k, v := range map[string]string{"khook.step.name": "web", "khook.step.kind": "helm", "khook.step.target": "chart web 1.0 as release web in ns", "khook.step.fate": "run", "khook.step.outcome": "failed", "khook.step.attempts": "2"} {
		if wa[k] != v {
			t.Errorf("step span %s = %q, want %q", k, wa[k], v)
		}
	}
	if web.Status.Code != codes.Error || !strings.Contains(web.Status.Description, "CrashLoopBackOff") {
		t.Errorf("failed step's status: %+v", web.Status)
	}
	if !hasEvent(web, "khook.cause") || !hasEvent(spans["wait"], "khook.cause") {
		t.Errorf("the cause is not an event of the step and of its wait: %v / %v", web.Events, spans["wait"].Events)
	}
	if got := web.EndTime.Sub(web.StartTime); got != 2060*time.Millisecond {
		t.Errorf("step span lasts %s, want the step's 2.06s (from its events)", got)
	}
	db := attrs(spans["apply db"])
	if db["khook.step.fate"] != "resume" || db["khook.step.outcome"] != "skipped" || spans["apply db"].Status.Code == codes.Error {
		t.Errorf("resumed step: %v %v", db, spans["apply db"].Status)
	}
	if spans["apply app"].Status.Code == codes.Error || attrs(spans["apply app"])["khook.step.outcome"] != "ok" {
		t.Errorf("ok step: %v", spans["apply app"].Status)
	}
	noSecret(t, rec.spans)
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func hasEvent(s tracetest.SpanStub, name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// noSecret fails when the planted secret is in any span's name,
// attribute, event or status.
func noSecret(t *testing.T, spans tracetest.SpanStubs) {
	t.Helper()
	for _, s := range spans {
		texts := []string{s.Name, s.Status.Description}
		kvs := append([]attribute.KeyValue{}, s.Attributes...)
		for _, e := range s.Events {
			texts = append(texts, e.Name)
			kvs = append(kvs, e.Attributes...)
		}
		for _, kv := range kvs {
			texts = append(texts, kv.Value.Emit())
		}
		for _, x := range texts {
			if strings.Contains(x, planted) {
				t.Errorf("span %q holds the planted secret: %q", s.Name, x)
			}
		}
	}
}

// TestFleetTrace: a fleet run is one trace, a span per cluster under the
// run's, each cluster's steps under its span.
func TestFleetTrace(t *testing.T) {
	tr, rec := newTestTrace(t, nil, redact.New())
	for _, c := range []string{"eu", "us"} {
		s := tr.Cluster(c, true)
		s.Emit(event.Event{Kind: event.StepStarted, Step: "web", Type: "helm", Attempt: 1, Time: at(1)})
		s.Emit(event.Event{Kind: event.StepSucceeded, Step: "web", Type: "helm", Attempt: 1, Time: at(2)})
		s.End("ok", nil)
	}
	tr.Cluster("never-ran", true) // ended with the run
	tr.End(0, nil)
	byID := map[string]string{}
	for _, s := range rec.spans {
		byID[s.SpanContext.SpanID().String()] = s.Name
	}
	clusters, steps := 0, 0
	for _, s := range rec.spans {
		switch {
		case strings.HasPrefix(s.Name, "cluster "):
			clusters++
			if byID[s.Parent.SpanID().String()] != "khook apply" {
				t.Errorf("%s is not under the run's span", s.Name)
			}
		case s.Name == "helm web":
			steps++
			if p := byID[s.Parent.SpanID().String()]; p != "cluster eu" && p != "cluster us" {
				t.Errorf("a step is under %q, not its cluster's span", p)
			}
		}
		if s.SpanContext.TraceID().String() != tr.ID() {
			t.Errorf("%s is in another trace", s.Name)
		}
	}
	if clusters != 3 || steps != 2 {
		t.Errorf("%d cluster spans, %d step spans; want 3 and 2: %v", clusters, steps, names(rec.spans))
	}
}

// TestEnabledByTheEnvironment: tracing is off unless the standard
// environment (or --trace-file) turns it on.
func TestEnabledByTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		file string
		want bool
	}{
		{nil, "", false},
		{map[string]string{"TRACEPARENT": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "", false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "", true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, "", true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, "", true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, "", true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, "", false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, "", false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none"}, "spans.jsonl", true},
	} {
		if got := Enabled(func(k string) string { return c.env[k] }, c.file); got != c.want {
			t.Errorf("Enabled(%v, %q) = %v, want %v", c.env, c.file, got, c.want)
		}
	}
	tr, err := Start(context.Background(), Options{Getenv: func(string) string { return "" }, Command: "apply"})
	if tr != nil || err != nil {
		t.Fatalf("Start without tracing: %v, %v", tr, err)
	}
	// a nil trace does nothing
	tr.Cluster("x", false).Emit(event.Event{Kind: event.StepStarted, Step: "a"})
	tr.End(1, nil)
	if tr.ID() != "" {
		t.Fatal("a nil trace has an id")
	}
}

// TestTraceFile: --trace-file writes OTLP JSON: one export request a
// line, ids in hex, enums as numbers, the run's spans in it.
func TestTraceFile(t *testing.T) {
	red := redact.New()
	red.Add(planted)
	file := filepath.Join(t.TempDir(), "spans.jsonl")
	tr, err := Start(context.Background(), Options{Getenv: func(string) string { return "" }, File: file, Command: "apply", Redactor: red})
	if err != nil || tr == nil {
		t.Fatalf("Start: %v, %v", tr, err)
	}
	sink := tr.Cluster("ctx", false)
	fakeRun(sink)
	sink.End("failed", nil)
	tr.End(1, nil)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type span struct {
		TraceID, SpanID, ParentSpanID, Name string
		Kind                                int
		Status                              struct{ Code int }
	}
	var got []span
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	lines := 0
	for sc.Scan() {
		lines++
		if strings.Contains(sc.Text(), planted) {
			t.Errorf("the trace file holds the planted secret")
		}
		var req struct {
			ResourceSpans []struct {
				Resource   struct{ Attributes []struct{ Key string } }
				ScopeSpans []struct{ Spans []span }
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		for _, rs := range req.ResourceSpans {
			service := false
			for _, a := range rs.Resource.Attributes {
				service = service || a.Key == "service.name"
			}
			if !service {
				t.Errorf("line %d: no service.name in the resource", lines)
			}
			for _, ss := range rs.ScopeSpans {
				got = append(got, ss.Spans...)
			}
		}
	}
	if lines == 0 || len(got) < 10 {
		t.Fatalf("%d lines, %d spans", lines, len(got))
	}
	for _, s := range got {
		if s.TraceID != tr.ID() || len(s.SpanID) != 16 || (s.ParentSpanID != "" && len(s.ParentSpanID) != 16) {
			t.Errorf("span %q: trace %q span %q parent %q: want hex ids of trace %s", s.Name, s.TraceID, s.SpanID, s.ParentSpanID, tr.ID())
		}
		if s.Kind != 1 { // SPAN_KIND_INTERNAL, as a number
			t.Errorf("span %q: kind %d", s.Name, s.Kind)
		}
		if s.Name == "helm web" && s.Status.Code != 2 { // STATUS_CODE_ERROR
			t.Errorf("failed step's status code %d", s.Status.Code)
		}
	}
	fmt.Fprintln(io.Discard, got)
}
