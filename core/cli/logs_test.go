package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"khook.io/core/redact"
	"khook.io/core/steps/builtin"
)

// TestRouteProcessLogs: the process's loggers go through the writer
// given, klog at the level given, masked by the redacting writer; restore
// puts back the standard logger and klog's level (klog's later lines are
// dropped, not written raw), and the next routing sends them to its own
// writer, not the first one's.
func TestRouteProcessLogs(t *testing.T) {
	const secret = "t0p-s3cret-value"
	prevLog := log.Writer()
	red := redact.New()
	red.Add(secret)
	var first, second bytes.Buffer

	w := red.Writer(&first)
	restore := RouteProcessLogs(w, 6)
	klog.V(6).Info("GET https://example/api?token=" + secret)
	klog.V(7).Info("above the level")
	log.Print("kustomize: a deprecated field")
	restore()
	_ = w.Flush()

	w2 := red.Writer(&second)
	restore = RouteProcessLogs(w2, 0)
	klog.V(1).Info("above the second run's level")
	klog.Info("second run")
	log.Print("second run's warning")
	restore()
	klog.Info("after the second run")
	_ = w2.Flush()

	if got := first.String(); !strings.Contains(got, "GET https://example/api?token=***") || strings.Contains(got, "above") ||
		!strings.Contains(got, "\nkustomize: a deprecated field\n") || strings.Contains(got, "second") {
		t.Errorf("the first run's stderr:\n%s", got)
	}
	if got := second.String(); !strings.Contains(got, "second run") || !strings.Contains(got, "second run's warning") || strings.Contains(got, "above") || strings.Contains(got, "GET") || strings.Contains(got, "after") {
		t.Errorf("the second run's stderr:\n%s", got)
	}
	if strings.Contains(first.String()+second.String(), secret) {
		t.Error("the secret leaked")
	}
	if log.Writer() != prevLog {
		t.Error("the standard logger's writer was not restored")
	}
	if klog.V(1).Enabled() {
		t.Error("klog's level was not restored")
	}
}

// debugConnection is a connection with its debug switch on (helm's
// --debug).
type debugConnection struct{ flagsConnection }

func (debugConnection) Debug() bool { return true }

// TestLogsRoutedPerRun: each run of the command tree routes the logs to
// its own standard error, once, before its first clients, at its own
// level, and undoes it when it ends; a run without Config.Logs touches
// nothing.
func TestLogsRoutedPerRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: x}}]\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls []string
	routings := 0
	run := func(conn Connection, logs bool, args ...string) string {
		var errOut bytes.Buffer
		cfg := Config{Name: "kubectl khook", Connection: conn, In: strings.NewReader(""), Out: io.Discard, ErrOut: &errOut, Environ: []string{}, Steps: builtin.Registry}
		if logs {
			cfg.Logs = func(w io.Writer, v int) func() {
				routings++
				n := routings
				calls = append(calls, fmt.Sprintf("route %d at %d", n, v))
				fmt.Fprintf(w, "routed %d\n", n)
				return func() { calls = append(calls, fmt.Sprintf("restore %d", n)) }
			}
		}
		if code := Execute(context.Background(), cfg, append([]string{"status", "-f", "testdata/golden-state-spec.yaml"}, args...)); code != ExitFailed {
			t.Fatalf("exit %d, want 1 (unauthorized):\n%s", code, errOut.String())
		}
		return errOut.String()
	}
	first := run(kubeconfigConnection(kubeconfig), true, "-v", "3")
	second := run(debugConnection{kubeconfigConnection(kubeconfig)}, true)
	run(kubeconfigConnection(kubeconfig), false, "-v", "6")
	if want := "route 1 at 3, restore 1, route 2 at 6, restore 2"; strings.Join(calls, ", ") != want {
		t.Errorf("calls: %s, want %s", strings.Join(calls, ", "), want)
	}
	if !strings.Contains(first, "routed 1\n") || strings.Contains(first, "routed 2") {
		t.Errorf("the first run's stderr:\n%s", first)
	}
	if !strings.Contains(second, "routed 2\n") || strings.Contains(second, "routed 1") {
		t.Errorf("the second run's stderr:\n%s", second)
	}
	// an offline command builds no clients: nothing is routed
	calls = nil
	var out bytes.Buffer
	Execute(context.Background(), Config{Name: "kubectl khook", Out: &out, ErrOut: io.Discard, Environ: []string{}, Steps: builtin.Registry,
		Logs: func(io.Writer, int) func() { calls = append(calls, "routed"); return func() {} }}, []string{"validate", "-f", "testdata/golden-spec.yaml"})
	if len(calls) > 0 {
		t.Errorf("validate routed the logs")
	}
}
