//go:build integration

package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/state"
	"khook.io/core/testing/testcluster"
)

const resumed = "unchanged since it succeeded in a previous run (state record)"

// stateSpec is a five-step spec with state; its folder holds a values
// file and a copy of the example chart.
type stateSpec struct {
	dir, path, ns, name string
}

func newStateSpec(t *testing.T, prefix string) *stateSpec {
	t.Helper()
	ns := testcluster.Get(t).NewNamespace(t, prefix)
	s := &stateSpec{dir: t.TempDir(), ns: ns, name: ns}
	s.path = filepath.Join(s.dir, "spec.yaml")
	copyDir(t, filepath.Join(root(t), "examples", "charts", "hello"), filepath.Join(s.dir, "chart"))
	s.writeFile(t, "values.yaml", "greeting: first\n")
	s.writeFile(t, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-file}\ndata: {v: \"1\"}\n")
	s.write(t, "one", "no")
	return s
}

func (s *stateSpec) writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// write renders the spec: cmValue goes into step b, flag into what step e
// waits for (e fails until flag is "yes").
func (s *stateSpec) write(t *testing.T, cmValue, flag string) {
	t.Helper()
	s.writeFile(t, "spec.yaml", fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: a
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: \"a\"}\n"}]
  - name: b
    needs: [a]
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {v: \"%[2]s\"}\n"}]
  - name: c
    apply:
      namespace: %[1]s
      manifests: [{file: ./cm.yaml}]
  - name: d
    helm:
      chart: ./chart
      namespace: %[1]s
      valuesFrom: [{file: ./values.yaml}]
  - name: e
    needs: [b]
    timeout: 2s
    apply:
      namespace: %[1]s
      waitFor: "jsonpath={.data.flag}=yes"
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: e}\ndata: {flag: \"%[3]s\", token: \"${TOKEN}\"}\n"}]
`, s.ns, cmValue, flag))
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

const stateSecret = "hunter2-state-s3cret"

func (s *stateSpec) apply(t *testing.T) (report, Result) {
	t.Helper()
	return applyJSON(t, "apply", s.path, kubeEnv(t, "KHOOK_SECRET_TOKEN="+stateSecret))
}

// ran lists the steps that ran (not resumed) in r.
func ran(r report) []string {
	var out []string
	for _, s := range r.Steps {
		if s.SkipReason != resumed {
			out = append(out, s.Name)
		}
	}
	return out
}

func (s *stateSpec) secret(t *testing.T) *corev1.Secret {
	t.Helper()
	sec, err := typed(t).CoreV1().Secrets(s.ns).Get(context.Background(), "khook-state-"+s.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the state record: %v", err)
	}
	return sec
}

func TestStateResumesPerStep(t *testing.T) {
	s := newStateSpec(t, "state")
	r, res := s.apply(t)
	if res.Code != 1 {
		t.Fatalf("first apply: e must fail until its flag is set; exit %d\n%s", res.Code, res.Stderr)
	}
	if fmt.Sprint(ran(r)) != "[a b c d e]" {
		t.Fatalf("first run ran %v", ran(r))
	}
	sec := s.secret(t)
	if sec.Labels[state.ManagedByLabel] != state.ManagedBy {
		t.Fatalf("record labels %v", sec.Labels)
	}
	rec, err := state.DecodeSecret(sec)
	if err != nil {
		t.Fatal(err)
	}
	if rec.RunStatus != "failed" || rec.Steps["a"].Status != "ok" || rec.Steps["e"].Status != "failed" || rec.KhookVersion == "" || rec.SpecHash == "" {
		t.Fatalf("record %+v", rec)
	}
	// the record holds nothing from which the planted secret can be read
	rawJSON, err := state.SecretJSON(sec)
	if err != nil {
		t.Fatal(err)
	}
	raw := string(rawJSON) + string(sec.Data[state.GzipDataKey])
	for _, f := range []string{stateSecret, base64.StdEncoding.EncodeToString([]byte(stateSecret))} {
		if strings.Contains(raw, f) {
			t.Fatalf("the record carries the secret (%q):\n%s", f, raw)
		}
	}

	// the failed step re-runs; the rest resume
	s.write(t, "one", "yes")
	r, res = s.apply(t)
	if res.Code != 0 || fmt.Sprint(ran(r)) != "[e]" {
		t.Fatalf("after fixing e: exit %d, ran %v\n%s", res.Code, ran(r), res.Stderr)
	}
	// nothing changed: every step resumes
	if r, res = s.apply(t); res.Code != 0 || len(ran(r)) != 0 {
		t.Fatalf("unchanged spec: exit %d, ran %v", res.Code, ran(r))
	}
	// editing one step re-runs that step only, not its dependents
	s.write(t, "two", "yes")
	if r, _ = s.apply(t); fmt.Sprint(ran(r)) != "[b]" {
		t.Fatalf("edited b: ran %v", ran(r))
	}
	// editing a referenced values file and a manifest file
	s.writeFile(t, "values.yaml", "greeting: second\n")
	if r, _ = s.apply(t); fmt.Sprint(ran(r)) != "[d]" {
		t.Fatalf("edited values.yaml: ran %v", ran(r))
	}
	s.writeFile(t, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-file}\ndata: {v: \"2\"}\n")
	if r, _ = s.apply(t); fmt.Sprint(ran(r)) != "[c]" {
		t.Fatalf("edited cm.yaml: ran %v", ran(r))
	}
	// a rotated secret changes e's inputs
	if r, _ = applyJSON(t, "apply", s.path, kubeEnv(t, "KHOOK_SECRET_TOKEN=rotated-"+stateSecret)); fmt.Sprint(ran(r)) != "[e]" {
		t.Fatalf("rotated secret: ran %v", ran(r))
	}
	// status: the next apply resumes everything but e (whose secret
	// rotates back)
	res = run(t, bins.Kubectl, kubeEnv(t, "KHOOK_SECRET_TOKEN="+stateSecret), "", "status", "-f", s.path, "-o", "json")
	var st struct {
		Found   bool     `json:"found"`
		Resumes []string `json:"resumes"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil || !st.Found || fmt.Sprint(st.Resumes) != "[a b c d]" {
		t.Fatalf("status -o json: %v %+v\n%s", err, st, res.Stdout)
	}
	res = run(t, bins.Kubectl, kubeEnv(t, "KHOOK_SECRET_TOKEN="+stateSecret), "", "status", "-f", s.path)
	if res.Code != 0 || !strings.Contains(res.Stdout, "input changed — will re-run") || !strings.Contains(res.Stdout, "Next apply resumes 4 steps (a, b, c, d)") {
		t.Fatalf("status text:\n%s", res.Stdout)
	}
	if strings.Contains(res.Stdout+res.Stderr, stateSecret) {
		t.Fatal("status printed the secret")
	}

	// the record deleted out of band: everything re-converges
	if err := typed(t).CoreV1().Secrets(s.ns).Delete(context.Background(), "khook-state-"+s.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r, res = s.apply(t); res.Code != 0 || len(ran(r)) != 5 {
		t.Fatalf("without a record: exit %d, ran %v", res.Code, ran(r))
	}
	// destroy deletes the record
	if r, res = applyJSON(t, "destroy", s.path, kubeEnv(t, "KHOOK_SECRET_TOKEN="+stateSecret)); res.Code != 0 {
		t.Fatalf("destroy: exit %d\n%s", res.Code, res.Stdout)
	}
	if _, err := typed(t).CoreV1().Secrets(s.ns).Get(context.Background(), "khook-state-"+s.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a successful destroy must delete the record: %v", err)
	}
	res = run(t, bins.Kubectl, kubeEnv(t, "KHOOK_SECRET_TOKEN=unused-token"), "", "status", "-f", s.path)
	if res.Code != 0 || !strings.Contains(res.Stdout, "not applied yet") {
		t.Fatalf("status without a record: exit %d\n%s", res.Code, res.Stdout)
	}
}

func TestStateRefusesANonOwnedSecret(t *testing.T) {
	s := newStateSpec(t, "notown")
	_, err := typed(t).CoreV1().Secrets(s.ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "khook-state-" + s.name},
		StringData: map[string]string{"mine": "do not touch"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, bins.Kubectl, kubeEnv(t, "KHOOK_SECRET_TOKEN=unused-token"), "", "apply", "-f", s.path)
	if res.Code != 1 || !strings.Contains(res.Stderr, "not managed by khook") || strings.Contains(res.Stdout, "STEP") {
		t.Fatalf("exit %d; nothing may run:\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if _, err := typed(t).CoreV1().ConfigMaps(s.ns).Get(context.Background(), "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatal("a step ran although the record was refused")
	}
	if sec := s.secret(t); sec.Data["mine"] == nil || sec.Data[state.DataKey] != nil || sec.Data[state.GzipDataKey] != nil {
		t.Fatal("the non-owned Secret was modified")
	}
}

func TestStatusNeedsState(t *testing.T) {
	res := run(t, bins.Kubectl, kubeEnv(t), "", "status", "-f", "examples/quickstart.yaml")
	if res.Code != 2 || !strings.Contains(res.Stderr, "state:") {
		t.Fatalf("exit %d:\n%s", res.Code, res.Stderr)
	}
}

// TestKillResumes kills khook with SIGKILL in the middle of a run, then
// re-runs: the steps recorded as done resume.
func TestKillResumes(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "kill")
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: first
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flag}\ndata: {go: \"${GO}\"}\n"}]}
  - name: second
    needs: [first]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: second}\n"}]}
  - name: third
    needs: [second]
    timeout: 2m
    wait: {for: "jsonpath={.data.go}=yes", on: configmap/flag, namespace: %[1]s}
`, ns))
	cmd := exec.Command(bins.Kubectl, "apply", "-f", spec)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, kubeEnv(t, "KHOOK_VAR_GO=no")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		closed := false
		for sc.Scan() {
			if !closed && strings.Contains(sc.Text(), "third") && strings.Contains(sc.Text(), "started") {
				closed = true
				close(waiting)
			}
		}
	}()
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("third never started")
	}
	// the record is written after each step, asynchronously: wait until it
	// shows second done, as a real interruption would find it
	deadline := time.Now().Add(10 * time.Second)
	for {
		sec, err := typed(t).CoreV1().Secrets(ns).Get(context.Background(), "khook-state-"+ns, metav1.GetOptions{})
		if err == nil && recordHasStep(sec, "second") {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the record never showed second done: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	breakLock(t, ns, "khook-state-"+ns)
	// the kill left runStatus running: a marker, not a lock
	res := run(t, bins.Kubectl, kubeEnv(t, "KHOOK_VAR_GO=no"), "", "status", "-f", spec)
	if !strings.Contains(res.Stdout, "last apply running") {
		t.Errorf("status after kill -9:\n%s", res.Stdout)
	}
	// the flag flips only for the re-run's first step... which resumes; set
	// it directly, as an operator fixing the cause would
	_, err = typed(t).CoreV1().ConfigMaps(ns).Patch(context.Background(), "flag", "application/merge-patch+json", []byte(`{"data":{"go":"yes"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, res2 := applyJSON(t, "apply", spec, kubeEnv(t, "KHOOK_VAR_GO=no"))
	if res2.Code != 0 || fmt.Sprint(ran(r)) != "[third]" {
		t.Fatalf("after kill -9: exit %d, ran %v, want only third\n%s", res2.Code, ran(r), res2.Stderr)
	}
}
