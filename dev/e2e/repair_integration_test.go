//go:build integration

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/testing/testcluster"
)

// repairPassword is a secret variable the chart writes into a Secret.
const repairPassword = "r3pair-Pa55word/planted"

// repairSpec writes the c2 chart (two ConfigMaps and a Secret of
// a secret value) and a spec of it and an apply: step, with state: or
// not; it returns the spec's path and the namespace.
func repairSpec(t *testing.T, prefix string, withState bool) (string, string) {
	t.Helper()
	ns := testcluster.Get(t).NewNamespace(t, prefix)
	dir := t.TempDir()
	chart := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: c2\nversion: 0.1.0\n",
		"templates/all.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: c2-cm}
data: {a: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c2-cm2}
data: {a: "1", b: "2"}
---
apiVersion: v1
kind: Secret
metadata: {name: c2-creds}
stringData: {password: {{ .Values.password | quote }}}
`,
	}
	for name, body := range chart {
		p := filepath.Join(dir, "c2", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stateLine := ""
	if withState {
		stateLine = fmt.Sprintf("state: {namespace: %s}", ns)
	}
	spec := fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: heal}
%[2]s
steps:
  - name: c2
    helm:
      chart: ./c2
      namespace: %[1]s
      values: {password: "${PASSWORD}"}
  - name: config
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: config}
            data: {level: "${LEVEL:-info}"}
`, ns, stateLine)
	p := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, ns
}

// planSteps runs plan -o json: each step's action, reason and details.
func livePlanSteps(t *testing.T, spec string, env []string, args ...string) map[string]struct {
	Action, Reason string
	Details        []string
} {
	t.Helper()
	res := run(t, bins.Kubectl, env, "", append([]string{"plan", "-f", spec, "-o", "json"}, args...)...)
	var p struct {
		Steps []struct {
			Name, Action, Reason string
			Details              []string
		}
	}
	if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil || res.Code != 0 {
		t.Fatalf("plan: exit %d, %v\n%s\n%s", res.Code, err, res.Stdout, res.Stderr)
	}
	out := map[string]struct {
		Action, Reason string
		Details        []string
	}{}
	for _, s := range p.Steps {
		out[s.Name] = struct {
			Action, Reason string
			Details        []string
		}{s.Action, s.Reason, s.Details}
	}
	return out
}

// drift deletes c2-cm, edits c2-cm2's b and the Secret's password, as
// kubectl delete and kubectl patch would.
func drift(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	c := typed(t)
	if err := c.CoreV1().ConfigMaps(ns).Delete(ctx, "c2-cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "c2-cm2", types.MergePatchType, []byte(`{"data":{"b":"edited"}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatal(err)
	}
	tampered := base64.StdEncoding.EncodeToString([]byte("tampered-value"))
	if _, err := c.CoreV1().Secrets(ns).Patch(ctx, "c2-creds", types.MergePatchType, []byte(`{"data":{"password":"`+tampered+`"}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatal(err)
	}
}

func liveCM(t *testing.T, ns, name string) (map[string]string, bool) {
	t.Helper()
	cm, err := typed(t).CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data, true
}

func noRepairSecret(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, f := range []string{repairPassword, base64.StdEncoding.EncodeToString([]byte(repairPassword)), "tampered-value", base64.StdEncoding.EncodeToString([]byte("tampered-value"))} {
		for _, text := range texts {
			if strings.Contains(text, f) {
				t.Errorf("%s shows %q:\n%s", what, f, text)
			}
		}
	}
}

// TestRepairPlanDiffApply is the scenario, without state: after
// apply, plan says no-op (helm) and unchanged (apply:), diff no
// differences; after a ConfigMap of the release is deleted and fields of
// another and of its Secret edited out of band, plan says repair naming
// them, diff shows the drifted fields (the Secret's masked), and apply
// puts them back in a new revision; then all is quiet again.
func TestRepairPlanDiffApply(t *testing.T) {
	spec, ns := repairSpec(t, "repair", false)
	env := kubeEnv(t, "KHOOK_SECRET_PASSWORD="+repairPassword)
	if r, res := applyJSON(t, "apply", spec, env); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	p := livePlanSteps(t, spec, env)
	if p["c2"].Action != "no-op" || p["config"].Action != "unchanged" {
		t.Errorf("plan of the applied spec: c2 %+v, config %+v", p["c2"], p["config"])
	}
	if res := run(t, bins.Kubectl, env, "", "diff", "-f", spec); res.Code != 0 || !strings.Contains(res.Stdout, "No differences in heal (2 steps): 2 unchanged.") {
		t.Errorf("diff of the applied spec: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}

	drift(t, ns)
	p = livePlanSteps(t, spec, env)
	if p["c2"].Action != "repair" || p["config"].Action != "unchanged" {
		t.Errorf("plan after drift: c2 %+v, config %+v", p["c2"], p["config"])
	}
	for _, w := range []string{
		"ConfigMap/c2-cm in " + ns + ": missing: will be re-created",
		"ConfigMap/c2-cm2 in " + ns + ": differs: data.b: will be put back",
		"Secret/c2-creds in " + ns + ": differs: data.password: will be put back",
	} {
		if !slices.Contains(p["c2"].Details, w) {
			t.Errorf("plan details lack %q: %q", w, p["c2"].Details)
		}
	}
	text := run(t, bins.Kubectl, env, "", "plan", "-f", spec)
	if text.Code != 0 || !strings.Contains(text.Stdout, "repair") {
		t.Errorf("plan text: exit %d\n%s", text.Code, text.Stdout)
	}
	noRepairSecret(t, "plan", text.Stdout, text.Stderr)

	res := run(t, bins.Kubectl, env, "", "diff", "-f", spec)
	if res.Code != 1 {
		t.Fatalf("diff after drift: exit %d, want 1\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	noRepairSecret(t, "diff", res.Stdout, res.Stderr)
	got := changedLines(res.Stdout)
	if g := got["ConfigMap "+ns+"/c2-cm2"]; !slices.Equal(g, []string{"-  b: edited", `+  b: "2"`}) {
		t.Errorf("c2-cm2's changed lines %q\n%s", g, res.Stdout)
	}
	if g := got["Secret "+ns+"/c2-creds"]; !slices.Equal(g, []string{"-  password: '*** (before)'", "+  password: '*** (after)'"}) {
		t.Errorf("the Secret's changed lines %q\n%s", g, res.Stdout)
	}
	if g := got["ConfigMap "+ns+"/c2-cm"]; len(g) == 0 || !slices.Contains(g, "+  name: c2-cm") {
		t.Errorf("the deleted ConfigMap is not shown created: %q", g)
	}
	for _, w := range []string{
		"=== c2 (helm): 3 objects would change",
		"    repair: 3 objects of revision 1 (deployed, chart c2 0.1.0) drifted; an upgrade to a new revision of the same chart and values puts them back",
		"=== config (apply): no changes (1 object)",
		"Differences in heal (2 steps): 1 would change, 1 unchanged.",
	} {
		if !strings.Contains(res.Stdout, w) {
			t.Errorf("diff lacks %q:\n%s", w, res.Stdout)
		}
	}

	r, ares := applyJSON(t, "apply", spec, env)
	if ares.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply after drift: exit %d\n%s\n%s", ares.Code, ares.Stdout, ares.Stderr)
	}
	noRepairSecret(t, "apply", ares.Stdout, ares.Stderr)
	msg := stepMessage(t, r, "c2")
	// in helm's install order
	if want := "repaired: Secret/c2-creds data.password, ConfigMap/c2-cm re-created, ConfigMap/c2-cm2 data.b"; !strings.HasSuffix(msg, want) || !strings.Contains(msg, "to revision 2") {
		t.Errorf("apply's c2: %q, want it to end %q", msg, want)
	}
	if _, ok := liveCM(t, ns, "c2-cm"); !ok {
		t.Error("c2-cm was not re-created")
	}
	if d, _ := liveCM(t, ns, "c2-cm2"); d["b"] != "2" {
		t.Errorf("c2-cm2 b = %q", d["b"])
	}
	sec, err := typed(t).CoreV1().Secrets(ns).Get(context.Background(), "c2-creds", metav1.GetOptions{})
	if err != nil || string(sec.Data["password"]) != repairPassword {
		t.Errorf("the Secret was not put back (%v)", err)
	}
	p = livePlanSteps(t, spec, env)
	if p["c2"].Action != "no-op" {
		t.Errorf("plan after the repair: %+v", p["c2"])
	}
	if res := run(t, bins.Kubectl, env, "", "diff", "-f", spec); res.Code != 0 {
		t.Errorf("diff after the repair: exit %d\n%s", res.Code, res.Stdout)
	}
	// the apply: step's plan names the fields a changed manifest changes
	p = livePlanSteps(t, spec, append(env, "KHOOK_VAR_LEVEL=debug"))
	if c := p["config"]; c.Action != "configure" || len(c.Details) != 1 || !strings.HasPrefix(c.Details[0], "ConfigMap/config in "+ns+": configure: data.level") {
		t.Errorf("plan of a changed apply: step: %+v", c)
	}
}

// stepMessage is the message of step name in r.
func stepMessage(t *testing.T, r report, name string) string {
	t.Helper()
	for _, s := range r.Steps {
		if s.Name == name {
			return s.Message
		}
	}
	t.Fatalf("no step %q", name)
	return ""
}

// TestRepairStateResumes: with state:, a step the record resumes is not
// diffed and not repaired (resume trusts the record); --replace repairs
// it, and so does a run after the record is deleted.
func TestRepairStateResumes(t *testing.T) {
	spec, ns := repairSpec(t, "repairst", true)
	env := kubeEnv(t, "KHOOK_SECRET_PASSWORD="+repairPassword)
	if _, res := applyJSON(t, "apply", spec, env); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	drift(t, ns)
	if p := livePlanSteps(t, spec, env); p["c2"].Action != "skip" {
		t.Errorf("plan of a resumed step: %+v", p["c2"])
	}
	if res := run(t, bins.Kubectl, env, "", "diff", "-f", spec); res.Code != 0 || !strings.Contains(res.Stdout, "=== c2 (helm): resumed from the state record") {
		t.Errorf("diff of a resumed step: exit %d\n%s", res.Code, res.Stdout)
	}
	r, res := applyJSON(t, "apply", spec, env)
	if st, _, _, skip := r.step(t, "c2"); res.Code != 0 || st != "skipped" || !strings.Contains(skip, "state record") {
		t.Errorf("apply of a resumed step: exit %d, %s %s", res.Code, st, skip)
	}
	if _, ok := liveCM(t, ns, "c2-cm"); ok {
		t.Fatal("a resumed step repaired its release")
	}

	// --replace: plan says repair, apply repairs
	if p := livePlanSteps(t, spec, env, "--replace", "c2"); p["c2"].Action != "repair" || p["c2"].Reason != "forced by --replace (the state record had it unchanged)" {
		t.Errorf("plan --replace: %+v", p["c2"])
	}
	if res := run(t, bins.Kubectl, env, "", "diff", "-f", spec, "--replace", "c2"); res.Code != 1 || !strings.Contains(res.Stdout, "=== c2 (helm): 3 objects would change") {
		t.Errorf("diff --replace: exit %d\n%s", res.Code, res.Stdout)
	}
	r, res = applyJSON(t, "apply", spec, env, "--replace", "c2")
	if msg := stepMessage(t, r, "c2"); res.Code != 0 || !strings.Contains(msg, "ConfigMap/c2-cm re-created") || !strings.HasSuffix(msg, "; forced by --replace (the state record had it unchanged)") {
		t.Errorf("apply --replace: exit %d, %q", res.Code, msg)
	}
	if _, ok := liveCM(t, ns, "c2-cm"); !ok {
		t.Error("--replace did not re-create c2-cm")
	}

	// a deleted record: the next run re-converges everything
	if err := typed(t).CoreV1().ConfigMaps(ns).Delete(context.Background(), "c2-cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := typed(t).CoreV1().Secrets(ns).Delete(context.Background(), "khook-state-heal", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r, res = applyJSON(t, "apply", spec, env)
	if msg := stepMessage(t, r, "c2"); res.Code != 0 || !strings.HasSuffix(msg, "repaired: ConfigMap/c2-cm re-created") {
		t.Errorf("apply without the record: exit %d, %q", res.Code, msg)
	}
}

// TestRepairLeavesTheSpecsOwnPatch: a patch: step that changes a field
// of a helm release's object (the chart's replicas) says what the spec
// wants there: the re-run neither repairs it nor makes a new revision,
// and plan says why (field manager khook).
func TestRepairLeavesTheSpecsOwnPatch(t *testing.T) {
	d := newDiffSpec(t, "repairpatch")
	env := kubeEnv(t, "KHOOK_SECRET_TOKEN="+diffToken, "KHOOK_VAR_REPLICAS=2")
	for i := range 2 {
		r, res := applyJSON(t, "apply", d.path, env)
		if res.Code != 0 || r.Status != "ok" {
			t.Fatalf("apply %d: exit %d\n%s\n%s", i+1, res.Code, res.Stdout, res.Stderr)
		}
		if i == 1 {
			if msg := stepMessage(t, r, "chart"); !strings.Contains(msg, "unchanged at revision 1") {
				t.Errorf("the re-run of the chart: %q", msg)
			}
		}
	}
	dep, err := typed(t).AppsV1().Deployments(d.ns).Get(context.Background(), "chart", metav1.GetOptions{})
	if err != nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Fatalf("replicas after two runs: %v (%v)", dep.Spec.Replicas, err)
	}
	p := livePlanSteps(t, d.path, env)
	want := "kept: Deployment/chart spec.replicas (written by khook, another step of the spec)"
	if p["chart"].Action != "no-op" || !slices.Contains(p["chart"].Details, want) {
		t.Errorf("plan of the chart: %+v, want no-op with %q", p["chart"], want)
	}
}
