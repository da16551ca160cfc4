//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/lock"
	"khook.io/core/state"
	"khook.io/core/testing/testcluster"
)

// Many hands on one cluster: apply and destroy of a spec with a state
// record hold its run lock, so two runs never write one record at once.

// gatedSpec is a spec of n steps with a state record: n-1 apply steps of a
// ConfigMap each (c0, c1, ...) and, when gated, a step "gate" that waits
// until ConfigMap gate (which the test makes) says open=yes, so that a run
// holds its lock until the test lets it end.
type gatedSpec struct {
	ns, name, path string
	n              int
	gated          bool
}

func newGatedSpec(t *testing.T, prefix string, n int, gated bool) *gatedSpec {
	t.Helper()
	g := &gatedSpec{ns: testcluster.Get(t).NewNamespace(t, prefix), n: n, gated: gated}
	g.name = g.ns
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: %[1]s}\nstate: {namespace: %[1]s}\nsteps:\n", g.ns)
	if gated {
		fmt.Fprintf(&b, "  - name: gate\n    timeout: 5m\n    wait: {for: \"jsonpath={.data.open}=yes\", on: configmap/gate, namespace: %s}\n", g.ns)
		c := typed(t)
		_, err := c.CoreV1().ConfigMaps(g.ns).Create(context.Background(), cm("gate", map[string]string{"open": "no"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < g.objects(); i++ {
		fmt.Fprintf(&b, "  - name: c%d\n    apply:\n      namespace: %s\n      manifests: [{inline: \"apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: c%d}\\ndata: {v: \\\"%d\\\"}\\n\"}]\n", i, g.ns, i, i)
	}
	g.path = writeSpec(t, b.String())
	return g
}

// objects is how many ConfigMaps the spec applies.
func (g *gatedSpec) objects() int {
	if g.gated {
		return g.n - 1
	}
	return g.n
}

func (g *gatedSpec) record() string { return "khook-state-" + g.name }

func (g *gatedSpec) open(t *testing.T) {
	t.Helper()
	_, err := typed(t).CoreV1().ConfigMaps(g.ns).Patch(context.Background(), "gate", types.MergePatchType, []byte(`{"data":{"open":"yes"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// holder waits until a run holds the spec's lock and returns it.
func (g *gatedSpec) holder(t *testing.T) lock.Holder {
	t.Helper()
	c := typed(t)
	var h lock.Holder
	eventually(t, time.Minute, "a run holds the lock", func() bool {
		var held bool
		var err error
		h, held, err = lock.Read(context.Background(), c, lock.Location{Namespace: g.ns, Name: g.record()})
		if err != nil {
			t.Fatal(err)
		}
		return held
	})
	return h
}

// present lists the spec's ConfigMaps in the cluster.
func (g *gatedSpec) present(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for i := 0; i < g.objects(); i++ {
		name := fmt.Sprintf("c%d", i)
		if d := cmData(t, typed(t), g.ns, name); d != nil && d["v"] == fmt.Sprint(i) {
			out[name] = true
		}
	}
	return out
}

// statusMatchesCluster checks that every step status calls unchanged (the
// next apply resumes it) has its ConfigMap, and every step whose ConfigMap
// is missing is one the next apply runs. It returns status's steps.
func (g *gatedSpec) statusMatchesCluster(t *testing.T) map[string]string {
	t.Helper()
	res := run(t, bins.Kubectl, kubeEnv(t), "", "status", "-f", g.path, "-o", "json")
	if res.Code != 0 {
		t.Fatalf("status: exit %d\n%s", res.Code, res.Stderr)
	}
	var st struct {
		Found bool `json:"found"`
		Steps []struct {
			Name string `json:"name"`
			Next string `json:"next"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, res.Stdout)
	}
	present := g.present(t)
	next := map[string]string{}
	for _, s := range st.Steps {
		next[s.Name] = s.Next
		if !strings.HasPrefix(s.Name, "c") {
			continue
		}
		if s.Next == "resume" && !present[s.Name] {
			t.Errorf("status resumes %s, whose ConfigMap is not in the cluster:\n%s", s.Name, res.Stdout)
		}
	}
	return next
}

// converges applies the spec once more: every ConfigMap is then there and
// status resumes every step.
func (g *gatedSpec) converges(t *testing.T) {
	t.Helper()
	if g.gated {
		g.open(t)
	}
	if _, res := applyJSON(t, "apply", g.path, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("converging apply: exit %d\n%s", res.Code, res.Stderr)
	}
	if got := len(g.present(t)); got != g.objects() {
		t.Errorf("after the converging apply %d of %d ConfigMaps are there", got, g.objects())
	}
	for name, next := range g.statusMatchesCluster(t) {
		if next != "resume" {
			t.Errorf("after the converging apply status says %s for %s, want resume", next, name)
		}
	}
	if _, held, err := lock.Read(context.Background(), typed(t), lock.Location{Namespace: g.ns, Name: g.record()}); err != nil || held {
		t.Errorf("after the runs ended the lock is still held (%v)", err)
	}
}

func heldBy(t *testing.T, stderr string, pid int) {
	t.Helper()
	for _, want := range []string{"is locked by another run", fmt.Sprintf("pid %d", pid), "--lock-timeout", "force-unlock"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refused run's error does not say %q:\n%s", want, stderr)
		}
	}
}

// Two applies of one 40-step spec, the second started while the first
// runs: it fails at once naming the first; with --lock-timeout it waits,
// then resumes everything the first did.
func TestSecondApplyWaitsForTheLock(t *testing.T) {
	g := newGatedSpec(t, "lock2", 40, true)
	first := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", g.path, "-o", "json")
	h := g.holder(t)
	if h.PID != first.cmd.Process.Pid || h.Command != "apply" {
		t.Fatalf("the lock is held by %+v, want the first apply (pid %d)", h, first.cmd.Process.Pid)
	}
	before := readRecord(t, typed(t), g.ns, g.record())
	res := run(t, bins.Kubectl, kubeEnv(t), "", "apply", "-f", g.path, "-o", "json")
	if res.Code != 1 {
		t.Fatalf("the second apply: exit %d, want 1\n%s", res.Code, res.Stderr)
	}
	heldBy(t, res.Stderr, first.cmd.Process.Pid)
	if res.Stdout != "" {
		t.Errorf("the refused apply reported steps:\n%s", res.Stdout)
	}
	if after := readRecord(t, typed(t), g.ns, g.record()); after != nil && before != nil && after.StartedAt != before.StartedAt {
		t.Errorf("the refused apply wrote the record (started %s, was %s)", after.StartedAt, before.StartedAt)
	}

	waiter := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", g.path, "-o", "json", "--lock-timeout", "3m")
	waiter.waitStderr(t, "waiting for the run lock of state record "+g.ns+"/"+g.record())
	g.open(t)
	if code := first.exit(t, "the first apply"); code != 0 {
		t.Fatalf("the first apply: exit %d\n%s", code, first.Stderr())
	}
	if code := waiter.exit(t, "the waiting apply"); code != 0 {
		t.Fatalf("the waiting apply: exit %d\n%s", code, waiter.Stderr())
	}
	var r report
	if err := json.Unmarshal([]byte(waiter.stdout.String()), &r); err != nil {
		t.Fatalf("waiting apply -o json: %v\n%s", err, waiter.stdout.String())
	}
	if len(r.Steps) != 40 {
		t.Fatalf("the waiting apply reported %d steps, want 40", len(r.Steps))
	}
	for _, s := range r.Steps {
		if s.Status != "skipped" || s.SkipReason != state.ResumeReason {
			t.Errorf("the waiting apply: step %s %s %q, want resumed", s.Name, s.Status, s.SkipReason)
		}
	}
	g.converges(t)
}

// apply racing destroy: a destroy started while apply runs is refused at
// once and deletes nothing; started together, one of them runs and the
// other is refused, or they run one after the other. Either way status
// then matches the cluster, and the next apply recreates everything.
func TestApplyRacingDestroy(t *testing.T) {
	t.Run("destroy while apply runs", func(t *testing.T) {
		g := newGatedSpec(t, "race", 12, true)
		apply := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", g.path)
		g.holder(t)
		eventually(t, time.Minute, "apply made its ConfigMaps", func() bool { return len(g.present(t)) == g.objects() })
		res := run(t, bins.Kubectl, kubeEnv(t), "", "destroy", "--yes", "-f", g.path)
		if res.Code != 1 {
			t.Fatalf("destroy during apply: exit %d, want 1\n%s", res.Code, res.Stderr)
		}
		heldBy(t, res.Stderr, apply.cmd.Process.Pid)
		if got := len(g.present(t)); got != g.objects() {
			t.Errorf("the refused destroy deleted objects: %d of %d left", got, g.objects())
		}
		g.open(t)
		if code := apply.exit(t, "apply"); code != 0 {
			t.Fatalf("apply: exit %d\n%s", code, apply.Stderr())
		}
		g.statusMatchesCluster(t)
		if res := run(t, bins.Kubectl, kubeEnv(t), "", "destroy", "--yes", "-f", g.path); res.Code != 0 {
			t.Fatalf("destroy after apply: exit %d\n%s", res.Code, res.Stderr)
		}
		if got := len(g.present(t)); got != 0 {
			t.Errorf("destroy left %d ConfigMaps", got)
		}
		if rec := readRecord(t, typed(t), g.ns, g.record()); rec != nil {
			t.Errorf("a successful destroy left the record:\n%s", recordJSON(rec))
		}
		g.converges(t)
	})
	t.Run("started together", func(t *testing.T) {
		g := newGatedSpec(t, "race", 35, false)
		apply := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", g.path)
		destroy := startBackground(t, bins.Kubectl, kubeEnv(t), "destroy", "--yes", "-f", g.path)
		codes := map[string]int{"apply": apply.exit(t, "apply"), "destroy": destroy.exit(t, "destroy")}
		stderr := map[string]string{"apply": apply.Stderr(), "destroy": destroy.Stderr()}
		for name, code := range codes {
			if code != 0 && !strings.Contains(stderr[name], "is locked by another run") {
				t.Errorf("%s: exit %d, and not for the lock:\n%s", name, code, stderr[name])
			}
		}
		g.statusMatchesCluster(t)
		g.converges(t)
	})
}

// A SIGKILLed holder leaves its lock behind: the next run waits for it to
// expire (--lock-timeout), takes it over, re-runs what the killed run left
// running, and converges.
func TestKilledHolderLockIsTakenOver(t *testing.T) {
	g := newGatedSpec(t, "lockkill", 20, true)
	first := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", g.path)
	h := g.holder(t)
	eventually(t, time.Minute, "the first apply made its ConfigMaps", func() bool { return len(g.present(t)) == g.objects() })
	if ended := first.kill(); ended {
		t.Fatalf("the first apply ended before it was killed:\n%s", first.output())
	}
	g.open(t)
	next := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", g.path, "--lock-timeout", "2m")
	if code := next.exit(t, "the next apply"); code != 0 {
		t.Fatalf("the next apply: exit %d\n%s", code, next.Stderr())
	}
	for _, want := range []string{"took over the run lock of state record " + g.ns + "/" + g.record(), fmt.Sprintf("pid %d", h.PID)} {
		if !strings.Contains(next.Stderr(), want) {
			t.Errorf("the next apply does not say %q:\n%s", want, next.Stderr())
		}
	}
	g.converges(t)
}

// force-unlock breaks only the named holder's lock, after showing it.
func TestForceUnlock(t *testing.T) {
	g := newGatedSpec(t, "unlock", 3, true)
	first := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", g.path)
	h := g.holder(t)
	if res := run(t, bins.Kubectl, kubeEnv(t), "", "force-unlock", "-f", g.path, "0000000000000000", "--yes"); res.Code == 0 || !strings.Contains(res.Stderr, "run "+h.ID) {
		t.Fatalf("force-unlock of another id: exit %d\n%s", res.Code, res.Stderr)
	}
	if res := run(t, bins.Kubectl, kubeEnv(t), "", "force-unlock", "-f", g.path, h.ID); res.Code != 2 || !strings.Contains(res.Stderr, "--yes") {
		t.Fatalf("force-unlock without a terminal and without --yes: exit %d\n%s", res.Code, res.Stderr)
	}
	// on a terminal it asks: anything but yes unlocks nothing
	code, out := ptyAnswer(t, kubeEnv(t), "Only 'yes' breaks it: ", "y", "force-unlock", "-f", g.path, h.ID)
	if code != 1 || !strings.Contains(out, "nothing was unlocked") || !strings.Contains(out, fmt.Sprintf("pid %d", first.cmd.Process.Pid)) {
		t.Fatalf("force-unlock answered y on a terminal: exit %d\n%s", code, out)
	}
	if _, held, _ := lock.Read(context.Background(), typed(t), lock.Location{Namespace: g.ns, Name: g.record()}); !held {
		t.Fatal("force-unlock answered y broke the lock")
	}
	res := run(t, bins.Kubectl, kubeEnv(t), "", "force-unlock", "-f", g.path, h.ID, "--yes")
	if res.Code != 0 || !strings.Contains(res.Stderr, fmt.Sprintf("pid %d", first.cmd.Process.Pid)) {
		t.Fatalf("force-unlock: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	// the unlocked run finds its lock gone at its next renewal and stops
	if code := first.exit(t, "the unlocked apply"); code != 1 || !strings.Contains(first.Stderr(), "lost") {
		t.Fatalf("the unlocked apply: exit %d\n%s", code, first.Stderr())
	}
	g.converges(t)
}

// plan, diff and status take no lock, but say when a run holds it.
func TestReadersSayARunHoldsTheLock(t *testing.T) {
	g := newGatedSpec(t, "lockread", 3, true)
	first := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", g.path)
	h := g.holder(t)
	for _, cmd := range []string{"plan", "diff", "status"} {
		res := run(t, bins.Kubectl, kubeEnv(t), "", cmd, "-f", g.path)
		if !strings.Contains(res.Stderr, "note: a run by") || !strings.Contains(res.Stderr, "run "+h.ID) || !strings.Contains(res.Stderr, "may be out of date") {
			t.Errorf("%s while a run holds the lock: exit %d, no note naming it:\n%s", cmd, res.Code, res.Stderr)
		}
	}
	g.open(t)
	if code := first.exit(t, "apply"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, first.Stderr())
	}
	if res := run(t, bins.Kubectl, kubeEnv(t), "", "status", "-f", g.path); strings.Contains(res.Stderr, "note:") {
		t.Errorf("status after the run ended still notes a lock:\n%s", res.Stderr)
	}
}

func cm(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
}

// Credentials that may not take the lock are refused, never run unlocked.
func TestLockForbiddenIsRefused(t *testing.T) {
	tc := testcluster.Get(t)
	ns := tc.LimitedNamespace
	name := "lockforbidden-" + lock.NewID()[:6]
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[2]s}
state: {namespace: %[1]s}
steps:
  - name: one
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %[2]s}\n"}]
`, ns, name))
	res := run(t, bins.Kubectl, []string{"KUBECONFIG=" + tc.LimitedKubeconfig}, "", "apply", "-f", spec)
	if res.Code != 1 || !strings.Contains(res.Stderr, "leases.coordination.k8s.io") || !strings.Contains(res.Stderr, "does not run unlocked") {
		t.Fatalf("apply without the right to take the lock: exit %d\n%s", res.Code, res.Stderr)
	}
	if d := cmData(t, typed(t), ns, name); d != nil {
		t.Errorf("the refused apply created ConfigMap %s", name)
	}
}

// breakLock does what an operator does after killing a run, instead of
// waiting the 15 s its lock takes to expire: it breaks the run lock of
// record ns/name, if a run left it held (a run killed before it took the
// lock, or after it released it, left none).
func breakLock(t *testing.T, ns, name string) {
	t.Helper()
	c := typed(t)
	loc := lock.Location{Namespace: ns, Name: name}
	h, held, err := lock.Read(context.Background(), c, loc)
	if err != nil {
		t.Fatal(err)
	}
	if !held {
		return
	}
	if _, err := lock.ForceUnlock(context.Background(), c, loc, h.ID); err != nil {
		t.Fatalf("break the killed run's lock: %v", err)
	}
}
