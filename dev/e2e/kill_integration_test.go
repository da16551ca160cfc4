//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/state"
	"khook.io/core/testing/testcluster"
)

// killVariant is one set of the kill spec's variables: V is substituted
// into some steps (changing their inputs), F decides whether step flaky
// succeeds, X whether step opt is included (when:).
type killVariant struct{ V, F, X string }

func (v killVariant) String() string { return fmt.Sprintf("V=%s F=%s X=%s", v.V, v.F, v.X) }

func (v killVariant) env(t *testing.T) []string {
	return kubeEnv(t, "KHOOK_VAR_V="+v.V, "KHOOK_VAR_F="+v.F, "KHOOK_VAR_X="+v.X)
}

// killSpec is a spec of every kind of step destroy treats differently:
// apply steps in chains (a third of them taking V), a patch and a delete
// acting on base's objects, a job taking V, a step that fails unless F is
// yes (onError: continue) and a step a when: excludes unless X is yes.
type killSpec struct {
	ns, path string
	chain    int // apply steps c0..c<chain-1>
}

const killObjectsPerStep = 2

func newKillSpec(t *testing.T, chain int) *killSpec {
	t.Helper()
	k := &killSpec{ns: testcluster.Get(t).NewNamespace(t, "kill"), chain: chain}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: khook.io/v1
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
  - name: job
    needs: [base]
    job: {image: example.invalid/tool:1, args: ["${V}"], namespace: %[1]s}
  - name: flaky
    timeout: 2s
    onError: continue
    apply:
      namespace: %[1]s
      waitFor: jsonpath={.data.ok}=yes
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flaky}\ndata: {ok: \"${F}\"}\n"}]
  - name: opt
    when: vars.get("X", "no") == "yes"
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: opt}\ndata: {v: \"${V}\"}\n"}]
`, k.ns)
	for i := 0; i < chain; i++ {
		fmt.Fprintf(&b, "  - name: c%d\n", i)
		if i >= 3 {
			fmt.Fprintf(&b, "    needs: [c%d]\n", i-3)
		}
		fmt.Fprintf(&b, "    apply:\n      namespace: %s\n      manifests:\n", k.ns)
		for j := 0; j < killObjectsPerStep; j++ {
			fmt.Fprintf(&b, "        - inline: \"apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: c%d-%d}\\ndata: {v: \\\"%s\\\"}\\n\"\n", i, j, k.chainValue(i, "${V}"))
		}
	}
	k.path = writeSpec(t, b.String())
	return k
}

// chainValue is what step ci writes: V for every third step, else a
// constant.
func (k *killSpec) chainValue(i int, v string) string {
	if i%3 == 0 {
		return v
	}
	return "k"
}

func (k *killSpec) steps() []string {
	out := []string{"base", "patch", "drop", "job", "flaky", "opt"}
	for i := 0; i < k.chain; i++ {
		out = append(out, "c"+strconv.Itoa(i))
	}
	return out
}

// holds says what differs between the cluster and step's effects as of
// variant v ("" when they are there).
func (k *killSpec) holds(t *testing.T, c kubernetes.Interface, step string, v killVariant) string {
	t.Helper()
	want := func(name string, kv ...string) string {
		d := cmData(t, c, k.ns, name)
		if d == nil {
			return "ConfigMap " + name + " is missing"
		}
		for i := 0; i < len(kv); i += 2 {
			if d[kv[i]] != kv[i+1] {
				return fmt.Sprintf("ConfigMap %s has %s=%q, want %q", name, kv[i], d[kv[i]], kv[i+1])
			}
		}
		return ""
	}
	switch step {
	case "base":
		return want("base", "b", "1")
	case "patch":
		return want("base", "patched", "yes")
	case "drop":
		if cmData(t, c, k.ns, "doomed") != nil {
			return "ConfigMap doomed exists"
		}
		return ""
	case "job":
		j, err := c.BatchV1().Jobs(k.ns).Get(context.Background(), "job", metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "Job job is missing"
		case err != nil:
			t.Fatal(err)
		case j.DeletionTimestamp != nil:
			return "Job job is being deleted"
		case fmt.Sprint(j.Spec.Template.Spec.Containers[0].Args) != "["+v.V+"]":
			return fmt.Sprintf("Job job runs with args %v, want [%s]", j.Spec.Template.Spec.Containers[0].Args, v.V)
		case j.Status.Succeeded < 1:
			return "Job job has not succeeded"
		}
		return ""
	case "flaky":
		if v.F != "yes" {
			return "flaky cannot succeed with F=" + v.F
		}
		return want("flaky", "ok", "yes")
	case "opt":
		return want("opt", "v", v.V)
	}
	i, err := strconv.Atoi(strings.TrimPrefix(step, "c"))
	if err != nil {
		t.Fatalf("no step %s", step)
	}
	for j := 0; j < killObjectsPerStep; j++ {
		if msg := want(fmt.Sprintf("c%d-%d", i, j), "v", k.chainValue(i, v.V)); msg != "" {
			return msg
		}
	}
	return ""
}

// nextApply runs status -o json with variant v: what the next apply does
// with each step.
func (k *killSpec) nextApply(t *testing.T, v killVariant) map[string]string {
	t.Helper()
	res := run(t, bins.Kubectl, v.env(t), "", "status", "-f", k.path, "-o", "json")
	var st struct {
		Found bool `json:"found"`
		Steps []struct {
			Name string `json:"name"`
			Next string `json:"next"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("status -o json: exit %d, %v\n%s%s", res.Code, err, res.Stdout, res.Stderr)
	}
	out := map[string]string{}
	for _, s := range st.Steps {
		out[s.Name] = s.Next
	}
	return out
}

// The two variants status is asked about: each step's input hash depends
// on one variable at most (V or F), and these two give both of its values.
var (
	probeA = killVariant{V: "a", F: "yes", X: "yes"}
	probeB = killVariant{V: "b", F: "no", X: "yes"}
)

// checkRecord checks the record against the cluster: every step recorded
// ok has its effects in the cluster, as of the inputs its hash is of.
// It returns how many steps the record claims.
func (k *killSpec) checkRecord(t *testing.T, c kubernetes.Interface, history *strings.Builder) int {
	t.Helper()
	rec := readRecord(t, c, k.ns, "khook-state-"+k.ns)
	if rec == nil {
		return 0
	}
	nextA, nextB := k.nextApply(t, probeA), k.nextApply(t, probeB)
	claimed := 0
	for _, step := range k.steps() {
		if !claimsOK(rec, step) {
			continue
		}
		claimed++
		var v killVariant
		switch {
		case nextA[step] == state.NextResume:
			v = probeA
		case nextB[step] == state.NextResume:
			v = probeB
		default:
			t.Fatalf("the record claims %s ok with a hash of no inputs this test uses\nhistory:\n%s\nrecord:\n%s", step, history, recordJSON(rec))
		}
		if msg := k.holds(t, c, step, v); msg != "" {
			t.Fatalf("the record claims %s ok (inputs %s), but %s\nhistory:\n%s\nrecord:\n%s", step, v, msg, history, recordJSON(rec))
		}
	}
	return claimed
}

// checkConverged checks that every step v includes has its effects in
// the cluster and that the record resumes each of them.
func (k *killSpec) checkConverged(t *testing.T, c kubernetes.Interface, v killVariant, history *strings.Builder) {
	t.Helper()
	next := k.nextApply(t, v)
	for _, step := range k.steps() {
		if step == "opt" && v.X != "yes" {
			continue
		}
		if msg := k.holds(t, c, step, v); msg != "" {
			t.Fatalf("after a full apply (%s), step %s: %s\nhistory:\n%s", v, step, msg, history)
		}
		if next[step] != state.NextResume {
			t.Fatalf("after a full apply (%s), the next apply would not resume %s (%s)\nhistory:\n%s", v, step, next[step], history)
		}
	}
}

// killIterations is how many kill-then-converge rounds
// TestKillAnywhereConverges makes (KHOOK_KILL_ITERATIONS overrides).
func killIterations(t *testing.T) int {
	n := 10
	if s := os.Getenv("KHOOK_KILL_ITERATIONS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("KHOOK_KILL_ITERATIONS=%q: want a positive number", s)
		}
		n = v
	}
	return n
}

// TestKillAnywhereConverges kills apply and destroy with SIGKILL at random
// moments (once or twice in a row, with inputs changed between runs,
// sometimes before the record's first write), checks after every kill that
// the record claims nothing the cluster lacks, and that the next apply
// always converges. KHOOK_KILL_SEED repeats a sequence.
func TestKillAnywhereConverges(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KHOOK_KILL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KHOOK_KILL_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("KHOOK_KILL_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	c := typed(t)
	k := newKillSpec(t, 60)
	var history strings.Builder
	logf := func(format string, args ...any) { fmt.Fprintf(&history, format+"\n", args...) }

	// how long the commands take uninterrupted, to spread the kills
	// over them
	timed := func(cmd string, v killVariant) time.Duration {
		r, res := applyJSON(t, cmd, k.path, v.env(t))
		if res.Code != 0 {
			t.Fatalf("%s (%s): exit %d\n%s\n%v", cmd, v, res.Code, res.Stderr, r)
		}
		logf("%s %s: full run, %s", cmd, v, res.Elapsed.Round(time.Millisecond))
		return res.Elapsed
	}
	first := killVariant{V: "a", F: "yes", X: "yes"}
	durations := map[string]time.Duration{"apply": timed("apply", first)}
	durations["destroy"] = timed("destroy", first)
	timed("apply", first)
	t.Logf("uninterrupted: apply %s, destroy %s", durations["apply"], durations["destroy"])

	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	iterations := killIterations(t)
	var kills, alive, claims int
	for it := 0; it < iterations; it++ {
		runs := 1
		if rng.IntN(3) == 0 {
			runs = 2 // two runs in a row killed
		}
		for n := 0; n < runs; n++ {
			cmd := "apply"
			if rng.IntN(5) < 2 {
				cmd = "destroy"
			}
			v := killVariant{V: pick("a", "b"), F: pick("yes", "yes", "yes", "no"), X: pick("yes", "no")}
			// half the kills uniform over a full run, half log-uniform
			// from 20 ms: early ones (loading, connecting, the record's
			// first write) and those of re-runs, shorter than a full run
			full := float64(durations[cmd] * 11 / 10)
			delay := time.Duration(rng.Float64() * full)
			if rng.IntN(2) == 0 {
				lo := float64(20 * time.Millisecond)
				delay = time.Duration(lo * math.Pow(full/lo, rng.Float64()))
			}
			p := startBackground(t, bins.Kubectl, v.env(t), append([]string{cmd, "-f", k.path}, yes(cmd)...)...)
			time.Sleep(delay)
			exited := p.kill()
			breakLock(t, k.ns, "khook-state-"+k.ns)
			kills++
			how := "killed"
			if exited {
				how = "had ended"
			} else {
				alive++
			}
			logf("round %d: %s %s, SIGKILL after %s (%s)", it, cmd, v, delay.Round(time.Millisecond), how)
			claims += k.checkRecord(t, c, &history)
		}
		v := killVariant{V: pick("a", "b"), F: "yes", X: pick("yes", "no")}
		r, res := applyJSON(t, "apply", k.path, v.env(t))
		logf("round %d: apply %s: exit %d, ran %v", it, v, res.Code, attempted(r))
		if res.Code != 0 {
			t.Fatalf("the apply after the kills failed: exit %d\n%s\nhistory:\n%s", res.Code, res.Stderr, &history)
		}
		k.checkConverged(t, c, v, &history)
		if it%5 == 4 {
			// start over without a record: the next kill may hit its
			// first write
			if _, res := applyJSON(t, "destroy", k.path, v.env(t)); res.Code != 0 {
				t.Fatalf("destroy: exit %d\n%s\nhistory:\n%s", res.Code, res.Stderr, &history)
			}
			if readRecord(t, c, k.ns, "khook-state-"+k.ns) != nil {
				t.Fatal("a successful destroy left the record")
			}
			logf("round %d: destroy %s: ok", it, v)
		}
	}
	t.Logf("%d rounds, %d kills (%d of a running process), %d step entries checked against the cluster", iterations, kills, alive, claims)
	if alive == 0 {
		t.Error("no kill hit a running process: the test proved nothing")
	}
}
