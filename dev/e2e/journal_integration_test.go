//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/state"
	"khook.io/core/testing/testcluster"
)

// The journal under crashes: whenever khook dies, the state record claims
// no more than the cluster has, so the next apply converges.

// kill sends SIGKILL and reaps the process; ended says whether it had
// ended on its own first.
func (b *background) kill() (ended bool) {
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	ws, ok := b.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return !ok || !ws.Signaled()
}

func (b *background) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stdout.String() + b.stderr.String()
}

// eventually polls cond every 50 ms until it holds or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readRecord returns the record at ns/name, nil when there is none.
func readRecord(t *testing.T, c kubernetes.Interface, ns, name string) *state.Record {
	t.Helper()
	sec, err := c.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	rec, err := state.DecodeSecret(sec)
	if err != nil {
		t.Fatalf("the record is unreadable: %v", err)
	}
	return rec
}

func recordJSON(rec *state.Record) string {
	b, _ := json.MarshalIndent(rec, "", "  ")
	return string(b)
}

// attempted lists the steps of r that ran (at least one attempt): not
// resumed, not excluded, not kept from running.
func attempted(r report) []string {
	var out []string
	for _, s := range r.Steps {
		if s.Attempts > 0 {
			out = append(out, s.Name)
		}
	}
	return out
}

func claimsOK(rec *state.Record, step string) bool {
	return rec != nil && rec.Steps[step] != nil && rec.Steps[step].Status == state.StepOK
}

// cmData returns the data of ConfigMap ns/name; nil when it does not exist
// or is being deleted.
func cmData(t *testing.T, c kubernetes.Interface, ns, name string) map[string]string {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if cm.DeletionTimestamp != nil {
		return nil
	}
	if cm.Data == nil {
		return map[string]string{}
	}
	return cm.Data
}

const holdFinalizer = "khook.test/hold"

func releaseFinalizer(t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	_, err := c.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// heldSpec: step held deletes slowly (its last object carries a finalizer
// the test removes), base is undone after it, patch and drop act on
// base's objects, free is independent and opt is excluded unless OPT=yes.
func heldSpec(ns string, heldTimeout string) string {
	return fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: base
    apply:
      namespace: %[1]s
      manifests:
        - inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base}\ndata: {b: \"1\"}\n"
        - inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: doomed}\n"
  - name: patch
    needs: [base]
    patch: {target: configmap/base, namespace: %[1]s, type: merge, patch: {data: {patched: "yes"}}}
  - name: drop
    needs: [base]
    delete: {resource: configmap/doomed, namespace: %[1]s}
  - name: held
    needs: [base]
    timeout: %[2]s
    apply:
      namespace: %[1]s
      manifests:
        - inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held-a}\n"
        - inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held-b, finalizers: [%[3]s]}\n"
  - name: free
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: free}\n"}]
  - name: opt
    when: vars.get("OPT", "no") == "yes"
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: opt}\n"}]
`, ns, heldTimeout, holdFinalizer)
}

// heldConverged checks the state a full apply of heldSpec leaves.
func heldConverged(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	if d := cmData(t, c, ns, "base"); d == nil || d["patched"] != "yes" {
		t.Errorf("base: %v, want it patched (the patch step re-run)", d)
	}
	if d := cmData(t, c, ns, "doomed"); d != nil {
		t.Error("doomed exists: the delete step did not run again after base re-created it")
	}
	for _, name := range []string{"held-a", "held-b", "free"} {
		if cmData(t, c, ns, name) == nil {
			t.Errorf("ConfigMap %s is missing", name)
		}
	}
}

// TestKilledDestroyLosesNothing kills destroy while a step it undoes waits
// for its objects to go: the record must already have stopped claiming
// that step (and every step destroy may change), and the next apply
// recreates everything.
func TestKilledDestroyLosesNothing(t *testing.T) {
	c := typed(t)
	ns := testcluster.Get(t).NewNamespace(t, "killdestroy")
	t.Cleanup(func() { releaseFinalizer(t, c, ns, "held-b") })
	spec := writeSpec(t, heldSpec(ns, "2m"))
	env := kubeEnv(t, "KHOOK_VAR_OPT=yes")
	if _, res := applyJSON(t, "apply", spec, env); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	p := startBackground(t, bins.Kubectl, kubeEnv(t), "destroy", "--yes", "-f", spec)
	// held's first object is gone, the second is held by its finalizer
	eventually(t, time.Minute, "destroy deletes held's objects", func() bool {
		return cmData(t, c, ns, "held-a") == nil && cmData(t, c, ns, "held-b") == nil
	})
	rec := readRecord(t, c, ns, "khook-state-"+ns)
	for _, step := range []string{"held", "free", "base", "patch", "drop"} {
		if claimsOK(rec, step) {
			t.Errorf("while destroy runs, the record still claims %s ok:\n%s", step, recordJSON(rec))
		}
	}
	if !claimsOK(rec, "opt") {
		t.Errorf("opt, excluded by when: (destroy leaves its objects), must keep its entry:\n%s", recordJSON(rec))
	}
	if p.kill() {
		t.Fatalf("destroy ended before the kill:\n%s", p.output())
	}
	breakLock(t, ns, "khook-state-"+ns)
	releaseFinalizer(t, c, ns, "held-b")
	eventually(t, 30*time.Second, "held-b goes", func() bool {
		_, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), "held-b", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	res := run(t, bins.Kubectl, env, "", "status", "-f", spec)
	if !strings.Contains(res.Stdout, "last destroy running") || !strings.Contains(res.Stdout, "running, or its run was killed — will re-run") {
		t.Errorf("status after the killed destroy:\n%s", res.Stdout)
	}
	r, res := applyJSON(t, "apply", spec, env)
	if res.Code != 0 {
		t.Fatalf("apply after the killed destroy: exit %d\n%s", res.Code, res.Stderr)
	}
	if got := fmt.Sprint(attempted(r)); got != "[base patch drop held free]" {
		t.Errorf("apply after the killed destroy ran %s, want every step destroy may have changed (opt resumes)", got)
	}
	heldConverged(t, c, ns)
}

// TestStoppedDestroyRestoresWhatItNeverReached: a destroy that fails (or
// is interrupted) part-way puts back the entries of the steps it never
// started, and the steps it left alone (patch, delete) run again on the
// next apply, since what they acted on may be gone.
func TestStoppedDestroyRestoresWhatItNeverReached(t *testing.T) {
	for _, how := range []string{"fails", "interrupted"} {
		t.Run(how, func(t *testing.T) {
			c := typed(t)
			ns := testcluster.Get(t).NewNamespace(t, "stopdestroy")
			t.Cleanup(func() { releaseFinalizer(t, c, ns, "held-b") })
			timeout := "2m"
			if how == "fails" {
				timeout = "2s"
			}
			spec := writeSpec(t, heldSpec(ns, timeout))
			env := kubeEnv(t, "KHOOK_VAR_OPT=yes")
			if _, res := applyJSON(t, "apply", spec, env); res.Code != 0 {
				t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
			}
			p := startBackground(t, bins.Kubectl, kubeEnv(t), "destroy", "--yes", "-f", spec)
			if how == "interrupted" {
				eventually(t, time.Minute, "destroy deletes held's objects", func() bool {
					return cmData(t, c, ns, "held-b") == nil && cmData(t, c, ns, "free") == nil
				})
				if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
			if code := p.exit(t, "destroy"); code != 1 {
				t.Fatalf("destroy: exit %d, want 1\n%s", code, p.output())
			}
			rec := readRecord(t, c, ns, "khook-state-"+ns)
			// base was never started: its entry stands; held was cut
			// short, free undone, patch and drop left alone
			if !claimsOK(rec, "base") || !claimsOK(rec, "opt") {
				t.Errorf("base (never reached) and opt (excluded) must keep their entries:\n%s", recordJSON(rec))
			}
			for _, step := range []string{"held", "free", "patch", "drop"} {
				if claimsOK(rec, step) {
					t.Errorf("the record claims %s ok after destroy:\n%s", step, recordJSON(rec))
				}
			}
			releaseFinalizer(t, c, ns, "held-b")
			eventually(t, 30*time.Second, "held-b goes", func() bool { return cmData(t, c, ns, "held-b") == nil })
			r, res := applyJSON(t, "apply", spec, env)
			if res.Code != 0 {
				t.Fatalf("apply after destroy: exit %d\n%s", res.Code, res.Stderr)
			}
			if got := fmt.Sprint(attempted(r)); got != "[patch drop held free]" {
				t.Errorf("apply after destroy ran %s, want [patch drop held free] (base and opt resume)", got)
			}
			heldConverged(t, c, ns)
		})
	}
}

// TestFailedDestroyReRunsStepsItLeftAlone: destroy undoes base but fails
// on another step; patch and delete steps acting on base's objects must
// run again on the next apply.
func TestFailedDestroyReRunsStepsItLeftAlone(t *testing.T) {
	c := typed(t)
	ns := testcluster.Get(t).NewNamespace(t, "faildestroy")
	t.Cleanup(func() { releaseFinalizer(t, c, ns, "held-b") })
	// held no longer needs base: base is undone while held's destroy waits
	body := strings.Replace(heldSpec(ns, "3s"), "  - name: held\n    needs: [base]\n", "  - name: held\n", 1)
	spec := writeSpec(t, body)
	env := kubeEnv(t)
	if _, res := applyJSON(t, "apply", spec, env); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	r, res := applyJSON(t, "destroy", spec, env)
	if res.Code != 1 {
		t.Fatalf("destroy: exit %d, want 1 (held times out)\n%s", res.Code, res.Stderr)
	}
	if st, _, _, _ := r.step(t, "base"); st != "ok" {
		t.Fatalf("base was not undone (%s): the test needs it undone", st)
	}
	releaseFinalizer(t, c, ns, "held-b")
	eventually(t, 30*time.Second, "held-b goes", func() bool { return cmData(t, c, ns, "held-b") == nil })
	r, res = applyJSON(t, "apply", spec, env)
	if res.Code != 0 {
		t.Fatalf("apply after destroy: exit %d\n%s", res.Code, res.Stderr)
	}
	if got := fmt.Sprint(attempted(r)); got != "[base patch drop held free]" {
		t.Errorf("apply after the failed destroy ran %s", got)
	}
	heldConverged(t, c, ns)
}

// TestKilledReRunOfAChangedStep: a step recorded ok with inputs A is
// re-run with inputs B and killed half-way; an apply with inputs A again
// must re-run it, not trust the old entry.
func TestKilledReRunOfAChangedStep(t *testing.T) {
	c := typed(t)
	ns := testcluster.Get(t).NewNamespace(t, "killrerun")
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: other
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"}]
  - name: s
    timeout: 2m
    apply:
      namespace: %[1]s
      waitFor: jsonpath={.data.go}=yes
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\ndata: {v: \"${V}\", go: \"${GO}\"}\n"}]
`, ns))
	first := kubeEnv(t, "KHOOK_VAR_V=1", "KHOOK_VAR_GO=yes")
	if _, res := applyJSON(t, "apply", spec, first); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	// V=2 is applied, then the step waits for go=yes, which never comes
	p := startBackground(t, bins.Kubectl, kubeEnv(t, "KHOOK_VAR_V=2", "KHOOK_VAR_GO=no"), "apply", "-f", spec)
	eventually(t, time.Minute, "s is re-applied", func() bool { return cmData(t, c, ns, "s")["v"] == "2" })
	rec := readRecord(t, c, ns, "khook-state-"+ns)
	if claimsOK(rec, "s") {
		t.Errorf("while s re-runs with new inputs, the record still claims its old success:\n%s", recordJSON(rec))
	}
	if !claimsOK(rec, "other") {
		t.Errorf("other resumes: its entry must stand:\n%s", recordJSON(rec))
	}
	if p.kill() {
		t.Fatalf("apply ended before the kill:\n%s", p.output())
	}
	breakLock(t, ns, "khook-state-"+ns)
	r, res := applyJSON(t, "apply", spec, first)
	if res.Code != 0 || fmt.Sprint(attempted(r)) != "[s]" {
		t.Fatalf("apply with the first inputs again: exit %d, ran %v, want [s]\n%s", res.Code, attempted(r), res.Stderr)
	}
	if d := cmData(t, c, ns, "s"); d["v"] != "1" {
		t.Errorf("s holds %v, want v=1", d)
	}
}
