//go:build integration

package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"khook.io/core/state"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/junitxsd"
	"khook.io/core/testing/testcluster"
)

// fleet is three test clusters side by side: this test binary's and two
// more started at once, with one kubeconfig naming them fleet-a, fleet-b
// and fleet-c (and fleet-dead, a context whose server is not there).
type fleet struct {
	kubeconfig string
	contexts   []string
	clients    map[string]kubernetes.Interface
	// ns exists in every cluster of the fleet.
	ns string
}

// startFleet starts the two other clusters at once (about 1.1 GB and most
// of two cores while they start) and stops them when the test ends.
func startFleet(t testing.TB) *fleet {
	t.Helper()
	clusters := []*testcluster.Cluster{testcluster.Get(t), nil, nil}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	began := time.Now()
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			clusters[i], errs[i] = testcluster.Start(ctx, testcluster.Options{})
		}()
	}
	wg.Wait()
	for i, c := range clusters {
		if c != nil && i > 0 {
			t.Cleanup(func() {
				if t.Failed() {
					c.Keep()
				}
				if err := c.Stop(); err != nil {
					t.Errorf("stop cluster %d: %v", i, err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("two more clusters started in %s", time.Since(began).Round(100*time.Millisecond))

	f := &fleet{contexts: []string{"fleet-a", "fleet-b", "fleet-c"}, clients: map[string]kubernetes.Interface{}}
	merged := clientcmdapi.NewConfig()
	for i, c := range clusters {
		name := f.contexts[i]
		cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		kctx := cfg.Contexts[cfg.CurrentContext]
		merged.Clusters[name] = cfg.Clusters[kctx.Cluster]
		merged.AuthInfos[name] = cfg.AuthInfos[kctx.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		if f.clients[name], err = kubernetes.NewForConfig(c.RESTConfig(t)); err != nil {
			t.Fatal(err)
		}
	}
	merged.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	merged.Contexts["fleet-dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "fleet-a"}
	merged.CurrentContext = "fleet-a"
	f.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, f.kubeconfig); err != nil {
		t.Fatal(err)
	}
	// one namespace, of one name, in every cluster
	f.ns = testcluster.Get(t).NewNamespace(t, "fleet")
	for _, name := range f.contexts[1:] {
		_, err := f.clients[name].CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// fleetSpec: a ConfigMap with the cluster's own variables, a Secret with
// the planted secret, and a wait that meets only where EXPECT is what the
// ConfigMap holds: in fleet-b it never is, and its timeout error holds the
// secret (the value waited for).
const fleetSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: fleet}
state: {namespace: %[1]s}
steps:
  - name: config
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: color}
            data: {color: "${COLOR}", context: "${KHOOK_CONTEXT}", ready: "${TOKEN|sha256sum}-yes"}
        - inline: |
            apiVersion: v1
            kind: Secret
            metadata: {name: token}
            stringData: {token: "${TOKEN}"}
  - name: ready
    needs: [config]
    timeout: 4s
    wait: {for: "jsonpath={.data.ready}=${TOKEN|sha256sum}-${EXPECT}", on: configmap/color, namespace: %[1]s}
  - name: b-only
    needs: [config]
    when: vars.KHOOK_CONTEXT == "fleet-b"
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: b-only}
`

type fleetReport struct {
	Status   string `json:"status"`
	Clusters []struct {
		Context string `json:"context"`
		Status  string `json:"status"`
		OK      int    `json:"ok"`
		Failed  int    `json:"failed"`
		Skipped int    `json:"skipped"`
		Error   string `json:"error"`
		Steps   []struct {
			Name, Status string
		} `json:"steps"`
	} `json:"clusters"`
}

// TestFleet applies one spec to three clusters at once, through the built
// binary: each cluster gets its own variables and its own state record;
// the cluster where a step times out fails alone, and so does an
// unreachable one; status and destroy work across the fleet; Ctrl-C stops
// every cluster cleanly; the planted secret appears in no output, no JUnit
// report, no record.
func TestFleet(t *testing.T) {
	f := startFleet(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(fleetSpec, f.ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	varDir := filepath.Join(dir, "vars")
	if err := os.MkdirAll(varDir, 0o755); err != nil {
		t.Fatal(err)
	}
	colors := map[string]string{"fleet-a": "red", "fleet-b": "blue", "fleet-c": "green", "fleet-dead": "none"}
	for ctx, color := range colors {
		expect := "yes"
		if ctx == "fleet-b" {
			expect = "never"
		}
		if err := os.WriteFile(filepath.Join(varDir, ctx+".yaml"), []byte(fmt.Sprintf("COLOR: %s\nEXPECT: %s\n", color, expect)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"KUBECONFIG=" + f.kubeconfig, "KHOOK_SECRET_TOKEN=" + planted}
	var outputs []string // everything khook printed, checked for the secret at the end
	fleetRun := func(bin string, args ...string) Result {
		t.Helper()
		res := run(t, bin, env, "", args...)
		outputs = append(outputs, res.Stdout, res.Stderr)
		return res
	}

	t.Run("apply -o junit", func(t *testing.T) {
		res := fleetRun(bins.Kubectl, "apply", "-f", spec, "--contexts", "fleet-*", "--var-dir", varDir, "-o", "junit")
		if res.Code != 1 {
			t.Fatalf("exit %d, want 1 (fleet-b and fleet-dead failed)\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
		if err := junitxsd.Validate([]byte(res.Stdout)); err != nil && !errors.Is(err, junitxsd.ErrUnavailable) {
			t.Fatalf("%v\n%s", err, res.Stdout)
		}
		var doc struct {
			Suites []struct {
				Name     string `xml:"name,attr"`
				Failures int    `xml:"failures,attr"`
				Errors   int    `xml:"errors,attr"`
				Cases    []struct {
					Name    string    `xml:"name,attr"`
					Failure *struct{} `xml:"failure"`
				} `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal([]byte(res.Stdout), &doc); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range doc.Suites {
			got[s.Name] = fmt.Sprintf("%d failures, %d errors", s.Failures, s.Errors)
		}
		want := map[string]string{"fleet-a": "0 failures, 0 errors", "fleet-b": "1 failures, 0 errors", "fleet-c": "0 failures, 0 errors", "fleet-dead": "0 failures, 1 errors"}
		for ctx, w := range want {
			if got[ctx] != w {
				t.Errorf("suite %s: %s, want %s\n%s", ctx, got[ctx], w, res.Stdout)
			}
		}
		for _, ctx := range []string{"fleet-a", "fleet-b", "fleet-c", "fleet-dead"} {
			if !strings.Contains(res.Stderr, ctx+" ") {
				t.Errorf("no progress line of %s:\n%s", ctx, res.Stderr)
			}
		}
	})

	t.Run("variables landed in their cluster", func(t *testing.T) {
		for _, ctx := range f.contexts {
			cm, err := f.clients[ctx].CoreV1().ConfigMaps(f.ns).Get(context.Background(), "color", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("%s: %v", ctx, err)
			}
			if cm.Data["color"] != colors[ctx] || cm.Data["context"] != ctx {
				t.Errorf("%s holds %v", ctx, cm.Data)
			}
			_, err = f.clients[ctx].CoreV1().ConfigMaps(f.ns).Get(context.Background(), "b-only", metav1.GetOptions{})
			if (ctx == "fleet-b") != (err == nil) {
				t.Errorf("%s: ConfigMap b-only: %v", ctx, err)
			}
		}
	})

	t.Run("apply -o json again: the others resume, fleet-b fails alone", func(t *testing.T) {
		res := fleetRun(bins.Kubectl, "apply", "-f", spec, "--contexts", "fleet-a,fleet-b,fleet-c", "--var-dir", varDir, "-o", "json", "--fleet-parallelism", "2")
		if res.Code != 1 {
			t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
		var r fleetReport
		if err := json.Unmarshal([]byte(res.Stdout), &r); err != nil {
			t.Fatalf("%v\n%s", err, res.Stdout)
		}
		if r.Status != "failed" || len(r.Clusters) != 3 {
			t.Fatalf("report: %+v", r)
		}
		for _, c := range r.Clusters {
			wantStatus, wantFailed := "ok", 0
			if c.Context == "fleet-b" {
				wantStatus, wantFailed = "failed", 1
			}
			if c.Status != wantStatus || c.Failed != wantFailed {
				t.Errorf("%s: %s with %d failed, want %s: %+v", c.Context, c.Status, c.Failed, wantStatus, c)
			}
			if c.Context == "fleet-b" && (!strings.HasPrefix(c.Error, "ready: ") || !strings.Contains(c.Error, "***-never")) {
				t.Errorf("fleet-b's first error: %q", c.Error)
			}
			if c.Context == "fleet-a" && c.Skipped != 3 {
				t.Errorf("fleet-a should resume config and ready and skip b-only: %+v", c)
			}
		}
	})

	t.Run("each cluster's record is its own", func(t *testing.T) {
		for _, ctx := range f.contexts {
			rec, found, err := state.Read(context.Background(), f.clients[ctx], state.Location{Namespace: f.ns, Name: "khook-state-fleet"})
			if err != nil || !found {
				t.Fatalf("%s: %v, found %v", ctx, err, found)
			}
			ready, bOnly := rec.Steps["ready"], rec.Steps["b-only"]
			if ready == nil || bOnly == nil {
				t.Fatalf("%s: record steps %v", ctx, rec.Steps)
			}
			wantReady, wantB := "ok", "skipped"
			if ctx == "fleet-b" {
				wantReady, wantB = "failed", "ok"
			}
			if ready.Status != wantReady || bOnly.Status != wantB {
				t.Errorf("%s: ready %s, b-only %s; want %s, %s", ctx, ready.Status, bOnly.Status, wantReady, wantB)
			}
			raw, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			outputs = append(outputs, string(raw))
			s, err := f.clients[ctx].CoreV1().Secrets(f.ns).Get(context.Background(), "khook-state-fleet", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range s.Data {
				outputs = append(outputs, string(v))
			}
		}
	})

	t.Run("status and plan across the fleet, both plugins", func(t *testing.T) {
		res := fleetRun(bins.Kubectl, "status", "-f", spec, "--contexts", "fleet-[abc]", "--var-dir", varDir, "-o", "json")
		var st struct {
			Clusters []struct {
				Context string
				Status  struct{ Found bool }
				Error   string
			}
		}
		if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil || res.Code != 0 || len(st.Clusters) != 3 {
			t.Fatalf("status: exit %d, %v\n%s\n%s", res.Code, err, res.Stdout, res.Stderr)
		}
		for _, c := range st.Clusters {
			if !c.Status.Found || c.Error != "" {
				t.Errorf("status of %s: %+v", c.Context, c)
			}
		}
		res = fleetRun(bins.Helm, "plan", "-f", spec, "--contexts", "fleet-a,fleet-b", "--var-dir", varDir)
		if res.Code != 0 || !strings.Contains(res.Stdout, "==> context fleet-a <==") || !strings.Contains(res.Stdout, "==> context fleet-b <==") {
			t.Errorf("helm khook plan --contexts: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
	})

	t.Run("--shard splits the fleet into disjoint slices", func(t *testing.T) {
		contextsOf := func(extra ...string) []string {
			t.Helper()
			res := run(t, bins.Kubectl, append(env, "JOB_COMPLETION_INDEX=1"), "", append([]string{"status", "-f", spec, "--contexts", "fleet-[abc]", "--var-dir", varDir, "-o", "json"}, extra...)...)
			outputs = append(outputs, res.Stdout, res.Stderr)
			var st struct{ Clusters []struct{ Context string } }
			if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil || res.Code != 0 {
				t.Fatalf("status %v: exit %d, %v\n%s\n%s", extra, res.Code, err, res.Stdout, res.Stderr)
			}
			var out []string
			for _, c := range st.Clusters {
				out = append(out, c.Context)
			}
			return out
		}
		one, two := contextsOf("--shard", "1/2"), contextsOf("--shard", "2/2")
		if !slices.Equal(one, []string{"fleet-a"}) || !slices.Equal(two, []string{"fleet-b", "fleet-c"}) {
			t.Errorf("--shard 1/2: %v, 2/2: %v; want disjoint slices of the sorted contexts whose union is all three", one, two)
		}
		if zero := contextsOf("--shard", "0+1/2"); !slices.Equal(zero, one) {
			t.Errorf("--shard 0+1/2 (an Indexed Job's index 0): %v, want %v", zero, one)
		}
		// JOB_COMPLETION_INDEX alone changes nothing
		if all := contextsOf(); !slices.Equal(all, []string{"fleet-a", "fleet-b", "fleet-c"}) {
			t.Errorf("without --shard: %v, want every context", all)
		}
	})

	t.Run("a single cluster's JUnit report", func(t *testing.T) {
		// the kubeconfig's current context, fleet-a; KHOOK_CONTEXT is an
		// ordinary variable outside a fleet
		res := fleetRun(bins.Kubectl, "apply", "-f", spec, "--var-file", filepath.Join(varDir, "fleet-a.yaml"), "--set", "KHOOK_CONTEXT=fleet-a", "-o", "junit")
		if res.Code != 0 {
			t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
		if err := junitxsd.Validate([]byte(res.Stdout)); err != nil && !errors.Is(err, junitxsd.ErrUnavailable) {
			t.Fatalf("%v\n%s", err, res.Stdout)
		}
		if !strings.Contains(res.Stdout, `<testsuite name="fleet-a" tests="3" failures="0" errors="0" skipped="3"`) {
			t.Errorf("report:\n%s", res.Stdout)
		}
	})

	t.Run("Ctrl-C stops every cluster", func(t *testing.T) {
		interruptFleet(t, f, env, spec, varDir, &outputs)
	})

	t.Run("destroy across the fleet", func(t *testing.T) {
		res := fleetRun(bins.Kubectl, "destroy", "--yes", "-f", spec, "--contexts", "fleet-a,fleet-b,fleet-c", "--var-dir", varDir)
		if res.Code != 0 || !strings.Contains(res.Stdout, "destroy fleet on 3 clusters succeeded") {
			t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
		for _, ctx := range f.contexts {
			c := f.clients[ctx].CoreV1()
			for _, name := range []string{"color", "b-only"} {
				if _, err := c.ConfigMaps(f.ns).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("%s: ConfigMap %s survived destroy: %v", ctx, name, err)
				}
			}
			if _, err := c.Secrets(f.ns).Get(context.Background(), "khook-state-fleet", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: the record survived a successful destroy: %v", ctx, err)
			}
		}
	})

	sum := sha256.Sum256([]byte(planted))
	for _, out := range outputs {
		for _, form := range append(plantedForms(), hex.EncodeToString(sum[:])) {
			if strings.Contains(out, form) {
				t.Errorf("the planted secret (%q) appears in an output:\n%s", form, out)
			}
		}
	}
}

// interruptFleet starts an apply on two clusters whose wait never meets
// (EXPECT changed) and sends SIGINT once both wait: both stop at once,
// reported interrupted, and their records say so.
func interruptFleet(t *testing.T, f *fleet, env []string, spec, varDir string, outputs *[]string) {
	slow := filepath.Join(filepath.Dir(spec), "slow.yaml")
	body, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(slow, []byte(strings.Replace(string(body), "timeout: 4s", "timeout: 5m", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins.Kubectl, "apply", "-f", slow, "--contexts", "fleet-a,fleet-c", "--var-dir", varDir, "--set", "EXPECT=later")
	cmd.Dir = filepath.Dir(spec)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	var errOut strings.Builder
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		seen := map[string]bool{}
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			errOut.WriteString(line + "\n")
			mu.Unlock()
			if strings.Contains(line, " ready ") && strings.Contains(line, "waiting for") {
				seen[strings.Fields(line)[0]] = true
				if len(seen) == 2 {
					close(waiting)
					seen["done"] = true
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-waiting:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the waits never started:\n%s", errOut.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("khook did not stop within 30 s of SIGINT")
	}
	mu.Lock()
	*outputs = append(*outputs, stdout.String(), errOut.String())
	mu.Unlock()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("want exit 1 after SIGINT, got %v\n%s", err, stdout.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "apply fleet on 2 clusters was interrupted") || strings.Count(out, "interrupted") < 3 {
		t.Errorf("summary:\n%s", out)
	}
	for _, ctx := range []string{"fleet-a", "fleet-c"} {
		rec, _, err := state.Read(context.Background(), f.clients[ctx], state.Location{Namespace: f.ns, Name: "khook-state-fleet"})
		if err != nil {
			t.Fatal(err)
		}
		if rec.RunStatus != "interrupted" || rec.Steps["ready"].Status != "interrupted" {
			t.Errorf("%s: record %s, ready %s", ctx, rec.RunStatus, rec.Steps["ready"].Status)
		}
	}
}

// BenchmarkFleetTenCharts: the same spec of ten local charts (installed in
// parallel steps) applied to one cluster, then to three at once, each run
// followed by a destroy (not timed). The figure is the wall time of each
// and their ratio. Run it with
//
//	go test -tags integration -run '^$' -bench FleetTenCharts -benchtime 3x ./dev/e2e/
func BenchmarkFleetTenCharts(b *testing.B) {
	f := startFleet(b)
	var body strings.Builder
	fmt.Fprintf(&body, "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: bench}\nsteps:\n")
	for i := range 10 {
		fmt.Fprintf(&body, "  - name: chart-%d\n    helm: {chart: %s, namespace: %s, values: {color: c%d}}\n", i, chartrepo.ChartDir("demo"), f.ns, i)
	}
	spec := filepath.Join(b.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte(body.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + f.kubeconfig}
	mustRun := func(args ...string) time.Duration {
		res := run(b, bins.Kubectl, env, "", args...)
		if res.Code != 0 {
			b.Fatalf("%v: exit %d\n%s\n%s", args, res.Code, res.Stdout, res.Stderr)
		}
		return res.Elapsed
	}
	var one, three time.Duration
	b.ResetTimer()
	for range b.N {
		one += mustRun("apply", "-f", spec, "--contexts", "fleet-a")
		b.StopTimer()
		mustRun("destroy", "--yes", "-f", spec, "--contexts", "fleet-a")
		b.StartTimer()
		three += mustRun("apply", "-f", spec, "--contexts", "fleet-a,fleet-b,fleet-c")
		b.StopTimer()
		mustRun("destroy", "--yes", "-f", spec, "--contexts", "fleet-a,fleet-b,fleet-c")
		b.StartTimer()
	}
	b.ReportMetric(one.Seconds()/float64(b.N), "1-cluster-s")
	b.ReportMetric(three.Seconds()/float64(b.N), "3-clusters-s")
	b.ReportMetric(three.Seconds()/one.Seconds(), "ratio")
}

// oneClusterTwice writes a kubeconfig naming the test cluster under three
// contexts: one-a and one-b (admin, each with its own cluster entry, as
// two kubeconfig files merged would), and one-limited (the least-privilege
// user, who may not read namespace kube-system).
func oneClusterTwice(t *testing.T) (kubeconfig, server string) {
	t.Helper()
	c := testcluster.Get(t)
	merged := clientcmdapi.NewConfig()
	for _, e := range []struct {
		file     string
		contexts []string
	}{{c.Kubeconfig, []string{"one-a", "one-b"}}, {c.LimitedKubeconfig, []string{"one-limited"}}} {
		cfg, err := clientcmd.LoadFromFile(e.file)
		if err != nil {
			t.Fatal(err)
		}
		kctx := cfg.Contexts[cfg.CurrentContext]
		for _, name := range e.contexts {
			merged.Clusters[name] = cfg.Clusters[kctx.Cluster]
			merged.AuthInfos[name] = cfg.AuthInfos[kctx.AuthInfo]
			merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
			server = cfg.Clusters[kctx.Cluster].Server
		}
	}
	merged.CurrentContext = "one-a"
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, server
}

// oneClusterSpec: a ConfigMap per context, and a state record in ns,
// named by recordName.
const oneClusterSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: twice}
state: {namespace: %[1]s, name: "%[2]s"}
steps:
  - name: config
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: "cm-${KHOOK_CONTEXT}"}
`

// TestFleetOneClusterTwice: a fleet naming one cluster under two contexts
// with one state record is refused before anything runs, both contexts
// named (told apart by kube-system's UID, or by URL and CA for a user who
// may not read it); with a record per context (state.name with
// ${KHOOK_CONTEXT}) it runs on both. An empty --contexts (an unset CI
// variable) is refused, not taken for the current context.
func TestFleetOneClusterTwice(t *testing.T) {
	kubeconfig, server := oneClusterTwice(t)
	c := testcluster.Get(t)
	cs, err := kubernetes.NewForConfig(c.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := c.NewNamespace(t, "fleet-once")
	dir := t.TempDir()
	shared, separate := filepath.Join(dir, "shared.yaml"), filepath.Join(dir, "separate.yaml")
	for file, record := range map[string]string{shared: "khook-state-twice", separate: "khook-state-${KHOOK_CONTEXT}"} {
		if err := os.WriteFile(file, []byte(fmt.Sprintf(oneClusterSpec, ns, record)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"KUBECONFIG=" + kubeconfig}
	ctx := context.Background()
	// untouched says that ns holds nothing khook writes: no ConfigMap of
	// the spec, no record, no lock
	untouched := func(t *testing.T) {
		t.Helper()
		cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range cms.Items {
			if strings.HasPrefix(cm.Name, "cm-") {
				t.Errorf("ConfigMap %s was applied", cm.Name)
			}
		}
		secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets.Items {
			t.Errorf("Secret %s was written", s.Name)
		}
		leases, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leases.Items {
			t.Errorf("Lease %s was taken", l.Name)
		}
	}

	for _, tc := range []struct {
		name, command, contexts string
		has                     []string
	}{
		{"apply, two admin contexts", "apply", "one-a,one-b",
			[]string{`contexts "one-a" and "one-b" are one cluster (` + server + `, kube-system namespace UID `, "sharing the state record " + ns + "/khook-state-twice", "khook-state-${KHOOK_CONTEXT}"}},
		{"destroy, by a pattern", "destroy", "one-*",
			[]string{`contexts "one-a", "one-b" and "one-limited" are one cluster (` + server}},
		{"apply, kube-system forbidden to one: the URL and CA", "apply", "one-limited,one-b",
			[]string{`contexts "one-limited" and "one-b" are one cluster (` + server + ` (reading namespace kube-system is forbidden: told apart by its URL and certificate authority)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, bins.Kubectl, env, "", append([]string{tc.command, "-f", shared, "--contexts", tc.contexts}, yes(tc.command)...)...)
			if res.Code != 2 {
				t.Fatalf("exit %d, want 2\n%s\n%s", res.Code, res.Stdout, res.Stderr)
			}
			for _, s := range append(tc.has, "the fleet names one cluster under several contexts, so nothing was run on any cluster") {
				if !strings.Contains(res.Stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, res.Stderr)
				}
			}
			untouched(t)
		})
	}

	t.Run("--contexts '' applies nowhere", func(t *testing.T) {
		for _, contexts := range []string{"", ","} {
			res := run(t, bins.Kubectl, env, "", "apply", "-f", separate, "--contexts", contexts, "--set", "KHOOK_CONTEXT=one-a")
			if res.Code != 2 || !strings.Contains(res.Stderr, "--contexts was given an empty value") {
				t.Fatalf("--contexts %q: exit %d, want 2\n%s\n%s", contexts, res.Code, res.Stdout, res.Stderr)
			}
		}
		untouched(t)
	})

	t.Run("a state record per context: both run", func(t *testing.T) {
		res := run(t, bins.Kubectl, env, "", "apply", "-f", separate, "--contexts", "one-a,one-b")
		if res.Code != 0 {
			t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
		for _, name := range []string{"one-a", "one-b"} {
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "cm-"+name, metav1.GetOptions{}); err != nil {
				t.Errorf("ConfigMap of %s: %v", name, err)
			}
			if _, found, err := state.Read(ctx, cs, state.Location{Namespace: ns, Name: "khook-state-" + name}); err != nil || !found {
				t.Errorf("record of %s: found %v, %v", name, found, err)
			}
		}
	})

	t.Run("--contexts '' destroys nothing", func(t *testing.T) {
		res := run(t, bins.Kubectl, env, "", "destroy", "--yes", "-f", separate, "--contexts", "", "--set", "KHOOK_CONTEXT=one-a")
		if res.Code != 2 || !strings.Contains(res.Stderr, "--contexts was given an empty value") {
			t.Fatalf("exit %d, want 2\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
		for _, name := range []string{"one-a", "one-b"} {
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "cm-"+name, metav1.GetOptions{}); err != nil {
				t.Errorf("ConfigMap of %s: %v", name, err)
			}
			if _, found, err := state.Read(ctx, cs, state.Location{Namespace: ns, Name: "khook-state-" + name}); err != nil || !found {
				t.Errorf("record of %s: found %v, %v", name, found, err)
			}
		}
	})

	t.Run("destroy with a record per context", func(t *testing.T) {
		res := run(t, bins.Kubectl, env, "", "destroy", "--yes", "-f", separate, "--contexts", "one-a,one-b")
		if res.Code != 0 {
			t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
		untouched(t)
	})
}
