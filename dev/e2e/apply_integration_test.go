//go:build integration

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/testing/testcluster"
)

// report is apply/destroy -o json.
type report struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Steps  []struct {
		Name       string `json:"name"`
		Type       string `json:"type"`
		Status     string `json:"status"`
		Attempts   int    `json:"attempts"`
		DurationMs int64  `json:"durationMs"`
		Error      string `json:"error"`
		SkipReason string `json:"skipReason"`
		Message    string `json:"message"`
	} `json:"steps"`
}

func (r report) step(t *testing.T, name string) (status string, attempts int, errText, skip string) {
	t.Helper()
	for _, s := range r.Steps {
		if s.Name == name {
			return s.Status, s.Attempts, s.Error, s.SkipReason
		}
	}
	t.Fatalf("no step %q in the report", name)
	return
}

// kubeEnv points the binaries at the test cluster (admin user).
func kubeEnv(t *testing.T, extra ...string) []string {
	return append([]string{"KUBECONFIG=" + testcluster.Get(t).Kubeconfig}, extra...)
}

func typed(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(testcluster.Get(t).RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeSpec writes a spec into a fresh folder and returns its path.
func writeSpec(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// applyJSON runs `kubectl khook <cmd> -f spec -o json` and decodes the report.
func applyJSON(t *testing.T, cmd, spec string, env []string, args ...string) (report, Result) {
	t.Helper()
	res := run(t, bins.Kubectl, env, "", append(append([]string{cmd, "-f", spec, "-o", "json"}, yes(cmd)...), args...)...)
	var r report
	if err := json.Unmarshal([]byte(res.Stdout), &r); err != nil {
		t.Fatalf("%s -o json: %v\nstdout:\n%s\nstderr:\n%s", cmd, err, res.Stdout, res.Stderr)
	}
	return r, res
}

func TestQuickstartApplyTwiceThenDestroy(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "quick")
	env := kubeEnv(t, "KHOOK_VAR_NAMESPACE="+ns)
	spec := "examples/quickstart.yaml"
	r, res := applyJSON(t, "apply", spec, env)
	if res.Code != 0 || r.Status != "ok" || len(r.Steps) != 4 {
		t.Fatalf("first apply: exit %d, %+v\n%s", res.Code, r, res.Stderr)
	}
	c := typed(t)
	ctx := context.Background()
	dep1, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// the second run must change nothing it should not: the Deployment
	// keeps its resourceVersion; only the Job is replaced, as the spec says
	r, res = applyJSON(t, "apply", spec, env)
	if res.Code != 0 || r.Status != "ok" {
		t.Fatalf("second apply: exit %d\n%s", res.Code, res.Stderr)
	}
	dep2, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep1.ResourceVersion != dep2.ResourceVersion {
		t.Errorf("the second apply modified Deployment %s/web (resourceVersion %s -> %s)", ns, dep1.ResourceVersion, dep2.ResourceVersion)
	}
	if !strings.Contains(res.Stdout, "1 unchanged") {
		t.Errorf("the second apply should report the objects unchanged:\n%s", res.Stdout)
	}

	r, res = applyJSON(t, "destroy", spec, env)
	if res.Code != 0 || r.Status != "ok" {
		t.Fatalf("destroy: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if s, _, _, reason := r.step(t, "web-pods-ready"); s != "skipped" || !strings.Contains(reason, "destroy leaves wait steps alone") {
		t.Errorf("wait step: %s %q", s, reason)
	}
	if _, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment survived destroy: %v", err)
	}
	if _, err := c.BatchV1().Jobs(ns).Get(ctx, "hello", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Job survived destroy: %v", err)
	}
	if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("destroy must leave namespaces in place: %v", err)
	}
	// destroy again: what is gone counts as success
	if r, res = applyJSON(t, "destroy", spec, env); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("a second destroy must succeed: exit %d\n%s", res.Code, res.Stdout)
	}
}

// onErrorSpec: "fails" times out; "slow" (a Job, 1-6 s under kwok) runs in
// parallel; "after-slow" needs slow; "after-fails" needs fails.
func onErrorSpec(ns, onError string) string {
	return fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: onerror}
steps:
  - name: flag
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: flag}
            data: {ready: "no"}
  - name: fails
    needs: [flag]
    timeout: 1s
    onError: %[2]s
    wait: {for: "jsonpath={.data.ready}=never", on: configmap/flag, namespace: %[1]s}
  - name: slow
    job: {image: busybox, namespace: %[1]s}
  - name: after-slow
    needs: [slow]
    wait: {for: condition=Complete, on: job/slow, namespace: %[1]s}
  - name: after-fails
    needs: [fails]
    wait: {for: condition=Complete, on: job/slow, namespace: %[1]s}
`, ns, onError)
}

func TestOnErrorFail(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "onerr")
	r, res := applyJSON(t, "apply", writeSpec(t, onErrorSpec(ns, "fail")), kubeEnv(t))
	if res.Code != 1 || r.Status != "failed" {
		t.Fatalf("exit %d status %s\n%s", res.Code, r.Status, res.Stderr)
	}
	if s, _, errText, _ := r.step(t, "fails"); s != "failed" || !strings.Contains(errText, "timed out after 1s") {
		t.Errorf("fails: %s %q", s, errText)
	}
	// the Job was running when fails failed: it finishes
	if s, _, errText, _ := r.step(t, "slow"); s != "ok" {
		t.Errorf("a running step must finish: %s %q", s, errText)
	}
	if s, _, _, reason := r.step(t, "after-slow"); s != "skipped" || reason != "not run: step fails failed (onError: fail)" {
		t.Errorf("after-slow: %s %q", s, reason)
	}
	if s, _, _, reason := r.step(t, "after-fails"); s != "skipped" || reason != "needs fails, which failed" {
		t.Errorf("after-fails: %s %q", s, reason)
	}
}

func TestOnErrorContinue(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "oncont")
	r, res := applyJSON(t, "apply", writeSpec(t, onErrorSpec(ns, "continue")), kubeEnv(t))
	if res.Code != 1 || r.Status != "failed" {
		t.Fatalf("exit %d status %s", res.Code, r.Status)
	}
	if s, _, errText, _ := r.step(t, "after-slow"); s != "ok" {
		t.Errorf("other branches keep going with continue: %s %q", s, errText)
	}
	if s, _, _, reason := r.step(t, "after-fails"); s != "skipped" || reason != "needs fails, which failed" {
		t.Errorf("after-fails: %s %q", s, reason)
	}
}

func TestRetrySucceedsOnALaterAttempt(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "retry")
	// "await" waits 1 s per attempt for a flag that "flip" sets only after a
	// Job (1-6 s under kwok) completed: the first attempt cannot succeed.
	spec := fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: retry}
steps:
  - name: flag
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flag}\ndata: {ready: \"no\"}\n"}]
  - name: slow
    needs: [flag]
    job: {image: busybox, namespace: %[1]s}
  - name: flip
    needs: [slow]
    patch: {target: configmap/flag, namespace: %[1]s, type: merge, patch: {data: {ready: "yes"}}}
  - name: await
    needs: [flag]
    timeout: 1s
    retries: 12
    retryDelay: 500ms
    wait: {for: "jsonpath={.data.ready}=yes", on: configmap/flag, namespace: %[1]s}
`, ns)
	r, res := applyJSON(t, "apply", writeSpec(t, spec), kubeEnv(t))
	if res.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if s, attempts, _, _ := r.step(t, "await"); s != "ok" || attempts < 2 {
		t.Fatalf("await: %s after %d attempts, want ok after at least 2", s, attempts)
	}
	if !strings.Contains(res.Stderr, "retrying in 500ms") {
		t.Errorf("the retry should be reported:\n%s", res.Stderr)
	}
}

func TestInterruptMidRun(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "intr")
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: interrupt}
steps:
  - name: forever
    timeout: 5m
    wait: {for: "jsonpath={.data.never}", on: configmap/absent, namespace: %[1]s}
  - name: after
    needs: [forever]
    wait: {for: delete, on: configmap/absent, namespace: %[1]s}
`, ns))
	cmd := exec.Command(bins.Kubectl, "apply", "-f", spec)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, kubeEnv(t)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var errOut strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			errOut.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "forever") && strings.Contains(sc.Text(), "waiting for") {
				once = true
				close(started)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the wait never started:\n%s", errOut.String())
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("khook did not stop within 15 s of SIGINT")
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("want exit 1 after SIGINT, got %v", err)
	}
	t.Logf("stopped %s after SIGINT", time.Since(sent))
	out := stdout.String()
	for _, want := range []string{"apply interrupt was interrupted", "forever", "interrupted", "after"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary must still print (missing %q):\n%s", want, out)
		}
	}
}

func TestUnreachableAndMissingCluster(t *testing.T) {
	spec := "examples/quickstart.yaml"
	res := run(t, bins.Kubectl, []string{"KUBECONFIG=" + writeKubeconfig(t, "https://127.0.0.1:1")}, "", "apply", "-f", spec)
	if res.Code != 1 || !strings.Contains(res.Stderr, "cannot reach the cluster at https://127.0.0.1:1") || strings.Count(strings.TrimSpace(res.Stderr), "\n") > 0 {
		t.Errorf("unreachable: exit %d, want one clear line:\n%s", res.Code, res.Stderr)
	}
	if strings.Contains(res.Stdout, "STEP") {
		t.Error("nothing may start when the cluster is unreachable")
	}
	res = run(t, bins.Kubectl, []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}, "", "apply", "-f", spec)
	if res.Code != 1 || !strings.Contains(res.Stderr, "no cluster configured") || strings.Contains(res.Stderr, "localhost:8080") {
		t.Errorf("no kubeconfig: exit %d:\n%s", res.Code, res.Stderr)
	}
	res = run(t, bins.Helm, []string{"KUBECONFIG=" + writeKubeconfig(t, "https://127.0.0.1:1")}, "", "apply", "-f", spec)
	if res.Code != 1 || !strings.Contains(res.Stderr, "cannot reach the cluster at https://127.0.0.1:1") {
		t.Errorf("helm khook unreachable: exit %d:\n%s", res.Code, res.Stderr)
	}
}

func TestLeastPrivilegeUserRefused(t *testing.T) {
	c := testcluster.Get(t)
	spec := writeSpec(t, `apiVersion: khook.io/v1
kind: Khook
metadata: {name: limited}
steps:
  - name: cluster-role
    apply:
      manifests:
        - inline: |
            apiVersion: rbac.authorization.k8s.io/v1
            kind: ClusterRole
            metadata: {name: khook-e2e-forbidden}
            rules: []
`)
	r, res := applyJSON(t, "apply", spec, []string{"KUBECONFIG=" + c.LimitedKubeconfig})
	_, _, errText, _ := r.step(t, "cluster-role")
	if res.Code != 1 || !strings.Contains(errText, "forbidden") || !strings.Contains(errText, "clusterroles") || !strings.Contains(errText, "khook-limited") {
		t.Fatalf("want a forbidden error naming the user, resource and verb; exit %d: %q", res.Code, errText)
	}
}
