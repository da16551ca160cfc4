//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/testcluster"
)

// driftPlan runs plan -o json: each step's action, reason, drift and kept
// lines, and the exit code.
type planStep struct {
	Name, Action, Reason string
	Details, Drift, Kept []string
}

func driftPlan(t *testing.T, spec string, env []string, args ...string) (map[string]planStep, Result) {
	t.Helper()
	res := run(t, bins.Kubectl, env, "", append([]string{"plan", "-f", spec, "-o", "json"}, args...)...)
	var p struct{ Steps []planStep }
	if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil {
		t.Fatalf("plan: exit %d, %v\n%s\n%s", res.Code, err, res.Stdout, res.Stderr)
	}
	out := map[string]planStep{}
	for _, s := range p.Steps {
		out[s.Name] = s
	}
	return out, res
}

// watchJobs watches the Jobs of the namespaces from now on; the function
// returned stops the watches and names the Jobs created meanwhile.
func watchJobs(t *testing.T, namespaces ...string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var (
		mu      sync.Mutex
		created []string
		wg      sync.WaitGroup
		ws      []watch.Interface
	)
	for _, ns := range namespaces {
		list, err := typed(t).BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := typed(t).BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range w.ResultChan() {
				if o, ok := ev.Object.(metav1.Object); ok && ev.Type == watch.Added {
					mu.Lock()
					created = append(created, o.GetNamespace()+"/"+o.GetName())
					mu.Unlock()
				}
			}
		}()
	}
	return func() []string {
		for _, w := range ws {
			w.Stop()
		}
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return created
	}
}

// TestRealChartsRerunWithoutState is the first case with the
// built binary: a spec of real upstream charts (vendored: ingress-nginx,
// kube-state-metrics as kube-prometheus-stack configures it, the
// prometheus-operator admission webhook) whose templates write null
// annotations: and carry admission hooks, without state: applied, then
// applied twice more: every re-run leaves each release unchanged at
// revision 1, plan says no-op (plan --detailed-exitcode exits 0), and no
// hook Job is created again.
func TestRealChartsRerunWithoutState(t *testing.T) {
	cl := testcluster.Get(t)
	var nss []string
	var steps strings.Builder
	for _, c := range []struct{ step, chart, values string }{
		{"ingress", "ingress-nginx", "{controller: {ingressClassResource: {name: NS}, admissionWebhooks: {failurePolicy: Ignore, namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: NS}}}}}"},
		{"ksm", "kube-state-metrics", "{prometheusScrape: false}"},
		{"webhook", "prometheus-operator-admission-webhook", "{webhooks: {failurePolicy: Ignore, namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: NS}}}}"},
	} {
		ns := cl.NewNamespace(t, "e2e-"+c.step)
		nss = append(nss, ns)
		fmt.Fprintf(&steps, "  - name: %s\n    helm:\n      chart: %s\n      release: %s\n      namespace: %s\n      values: %s\n", c.step, chartrepo.ChartDir(c.chart), ns, ns, strings.ReplaceAll(c.values, "NS", ns))
	}
	spec := writeSpec(t, "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: real}\nsteps:\n"+steps.String())
	env := kubeEnv(t)
	t.Cleanup(func() {
		if res := run(t, bins.Kubectl, env, "", "destroy", "-f", spec, "--yes"); res.Code != 0 {
			t.Errorf("destroy: exit %d\n%s", res.Code, res.Stderr)
		}
	})
	if r, res := applyJSON(t, "apply", spec, env); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	jobs := watchJobs(t, nss...)
	for i := 1; i <= 2; i++ {
		p, res := driftPlan(t, spec, env, "--detailed-exitcode")
		if res.Code != 0 {
			t.Errorf("re-run %d: plan exit %d\n%s", i, res.Code, res.Stderr)
		}
		for _, name := range []string{"ingress", "ksm", "webhook"} {
			if p[name].Action != "no-op" {
				t.Errorf("re-run %d: plan of %s: %s (%s) %q", i, name, p[name].Action, p[name].Reason, p[name].Details)
			}
		}
		r, res := applyJSON(t, "apply", spec, env)
		if res.Code != 0 {
			t.Fatalf("re-run %d: exit %d\n%s", i, res.Code, res.Stderr)
		}
		for _, s := range r.Steps {
			if !strings.Contains(s.Message, "unchanged at revision 1") {
				t.Errorf("re-run %d: %s: %s", i, s.Name, s.Message)
			}
		}
	}
	if created := jobs(); len(created) > 0 {
		t.Errorf("hook Jobs created by the re-runs: %q", created)
	}
}

// TestChartCRDsAfterServerSideApply is the second case with the
// built binary: an apply: step applies prometheus-operator's CRDs
// server-side (another release's: its version annotation differs), then
// a chart shipping the same CRDs in its crds/ (kube-prometheus-stack's
// crds subchart) with a PrometheusRule of its own: the install succeeds,
// says it skipped them (the outcome, a warning naming their manager),
// and a re-run changes nothing. The CRDs' group is renamed so that other
// packages' tests on the same cluster keep theirs.
func TestChartCRDsAfterServerSideApply(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "e2e-crds")
	const group = "monitoring-e2e.coreos.com"
	dir := t.TempDir()
	crds := filepath.Join(chartrepo.ChartDir("kps-crds"), "crds")
	files := map[string]string{
		"stack/Chart.yaml":             "apiVersion: v2\nname: stack\nversion: 0.1.0\ndependencies:\n  - {name: crds, version: 0.0.0}\n",
		"stack/charts/crds/Chart.yaml": "apiVersion: v2\nname: crds\nversion: 0.0.0\n",
		"stack/templates/rule.yaml":    "apiVersion: " + group + "/v1\nkind: PrometheusRule\nmetadata: {name: rules}\nspec:\n  groups: [{name: g, rules: [{alert: A, expr: up == 0}]}]\n",
	}
	var bundle []string
	for _, name := range []string{"crd-prometheusrules.yaml", "crd-servicemonitors.yaml"} {
		b, err := os.ReadFile(filepath.Join(crds, name))
		if err != nil {
			t.Fatal(err)
		}
		crd := strings.ReplaceAll(string(b), "monitoring.coreos.com", group)
		files["stack/charts/crds/crds/"+name] = crd
		bundle = append(bundle, strings.Replace(crd, "operator.prometheus.io/version: 0.93.1", "operator.prometheus.io/version: 0.92.0", 1))
	}
	files["bundle.yaml"] = strings.Join(bundle, "\n---\n")
	files["spec.yaml"] = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: crds}
steps:
  - name: operator-crds
    apply:
      serverSide: true
      manifests: [{file: ./bundle.yaml}]
  - name: stack
    needs: [operator-crds]
    helm: {chart: ./stack, namespace: ` + ns + `}
`
	writeTree(t, dir, files)
	spec := filepath.Join(dir, "spec.yaml")
	env := kubeEnv(t)
	t.Cleanup(func() {
		if res := run(t, bins.Kubectl, env, "", "destroy", "-f", spec, "--yes"); res.Code != 0 {
			t.Errorf("destroy: exit %d\n%s", res.Code, res.Stderr)
		}
	})
	r, res := applyJSON(t, "apply", spec, env)
	if res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	msg := ""
	for _, s := range r.Steps {
		if s.Name == "stack" {
			msg = s.Message
		}
	}
	if !strings.Contains(msg, "installed release stack") || !strings.Contains(msg, "skipped 2 CRDs of the chart's crds/ that exist (helm installs them only when absent): prometheusrules."+group) {
		t.Errorf("the install: %q", msg)
	}
	warning := "Warning: stack: chart stack: charts/crds/crds/crd-prometheusrules.yaml: CustomResourceDefinition prometheusrules." + group + " exists (managed by khook): skipped"
	if !strings.Contains(res.Stderr, warning) {
		t.Errorf("standard error lacks %q:\n%s", warning, res.Stderr)
	}
	r, res = applyJSON(t, "apply", spec, env)
	if res.Code != 0 {
		t.Fatalf("re-run: exit %d\n%s", res.Code, res.Stderr)
	}
	for _, s := range r.Steps {
		if !strings.Contains(s.Message, "unchanged") {
			t.Errorf("re-run: %s: %s", s.Name, s.Message)
		}
	}
}

// TestDriftPolicyAtTheCommandLine: the injector with the built binary:
// a controller's fields (cainjector: a ConfigMap's data.ca, a webhook
// configuration's caBundle) are kept through re-applies, named in plan
// (-o json's kept) and in the report; a person's edit under drift:
// {mode: warn} (from defaults:) is reported by plan, diff and apply,
// which change nothing and, with --detailed-exitcode, exit 4 (0
// without it); the same edit under the default policy is repaired.
func TestDriftPolicyAtTheCommandLine(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "e2e-drift")
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"inj/Chart.yaml": "apiVersion: v2\nname: inj\nversion: 0.1.0\n",
		"inj/templates/all.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: inj-ca, annotations: }
data: {ca: placeholder, mode: strict}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: inj-{{ .Release.Namespace }}}
webhooks:
  - name: check.inj.khook.test
    clientConfig:
      service: {name: inj, namespace: {{ .Release.Namespace }}}
      caBundle: Cg==
    rules: [{apiGroups: [inj.khook.test], apiVersions: [v1], operations: [CREATE], resources: [things]}]
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Ignore
`,
	})
	specText := func(mode string) string {
		return `apiVersion: khook.io/v1
kind: Khook
metadata: {name: drift}
defaults:
  drift: {mode: ` + mode + `}
steps:
  - name: inj
    helm: {chart: ./inj, namespace: ` + ns + `}
`
	}
	repair, warn := filepath.Join(dir, "repair.yaml"), filepath.Join(dir, "warn.yaml")
	writeTree(t, dir, map[string]string{"repair.yaml": specText("repair"), "warn.yaml": specText("warn")})
	env := kubeEnv(t)
	t.Cleanup(func() { run(t, bins.Kubectl, env, "", "destroy", "-f", repair, "--yes") })
	if r, res := applyJSON(t, "apply", repair, env); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	c := typed(t)
	ctx := context.Background()
	inject := func() {
		t.Helper()
		if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "inj-ca", types.MergePatchType, []byte(`{"data":{"ca":"real"}}`), metav1.PatchOptions{FieldManager: "cainjector"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, "inj-"+ns, types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"cmVhbA=="}]`), metav1.PatchOptions{FieldManager: "cainjector"}); err != nil {
			t.Fatal(err)
		}
	}
	kept := []string{
		"kept: ConfigMap/inj-ca data.ca (written by cainjector)",
		`kept: ValidatingWebhookConfiguration/inj-` + ns + ` webhooks[name="check.inj.khook.test"].clientConfig.caBundle (written by cainjector)`,
	}
	for i := 1; i <= 3; i++ {
		inject()
		p, res := driftPlan(t, repair, env, "--detailed-exitcode")
		if res.Code != 0 || p["inj"].Action != "no-op" || !sameLines(p["inj"].Kept, kept) {
			t.Errorf("re-apply %d: plan exit %d, %s, kept %q", i, res.Code, p["inj"].Action, p["inj"].Kept)
		}
		r, res := applyJSON(t, "apply", repair, env)
		if res.Code != 0 || !strings.Contains(r.Steps[0].Message, "unchanged at revision 1") || !strings.Contains(r.Steps[0].Message, kept[0]) {
			t.Errorf("re-apply %d: exit %d, %q", i, res.Code, r.Steps[0].Message)
		}
	}

	// a person's edit, under warn: reported, left, exit 4 when asked
	if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "inj-ca", types.MergePatchType, []byte(`{"data":{"mode":"lax"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	left := "drift: ConfigMap/inj-ca data.mode (left as it is: drift mode warn)"
	p, res := driftPlan(t, warn, env, "--detailed-exitcode")
	if res.Code != 4 || p["inj"].Action != "no-op" || !slices.Contains(p["inj"].Drift, left) {
		t.Errorf("plan in warn mode: exit %d, %s, drift %q", res.Code, p["inj"].Action, p["inj"].Drift)
	}
	if _, res := driftPlan(t, warn, env); res.Code != 0 {
		t.Errorf("plan in warn mode without --detailed-exitcode: exit %d", res.Code)
	}
	text := run(t, bins.Kubectl, env, "", "plan", "-f", warn)
	if !strings.Contains(text.Stdout, "Drift left as it is (drift mode warn) in 1 step: inj.") {
		t.Errorf("plan text:\n%s", text.Stdout)
	}
	if res := run(t, bins.Kubectl, env, "", "diff", "-f", warn, "--detailed-exitcode"); res.Code != 4 || !strings.Contains(res.Stdout, "left as it is (drift mode warn)") {
		t.Errorf("diff in warn mode: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	r, res := applyJSON(t, "apply", warn, env, "--detailed-exitcode")
	if res.Code != 4 || !strings.Contains(r.Steps[0].Message, "unchanged at revision 1") || !strings.Contains(r.Steps[0].Message, "drift left as it is (drift mode warn): ConfigMap/inj-ca data.mode") {
		t.Errorf("apply in warn mode: exit %d, %q", res.Code, r.Steps[0].Message)
	}
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "inj-ca", metav1.GetOptions{})
	if err != nil || cm.Data["mode"] != "lax" || cm.Data["ca"] != "real" {
		t.Fatalf("warn changed something: %v %v", cm.Data, err)
	}

	// the default policy repairs the person's edit, keeps the controller's
	r, res = applyJSON(t, "apply", repair, env, "--detailed-exitcode")
	if res.Code != 0 || !strings.Contains(r.Steps[0].Message, "repaired: ConfigMap/inj-ca data.mode") {
		t.Errorf("apply in repair mode: exit %d, %q", res.Code, r.Steps[0].Message)
	}
	cm, err = c.CoreV1().ConfigMaps(ns).Get(ctx, "inj-ca", metav1.GetOptions{})
	if err != nil || cm.Data["mode"] != "strict" || cm.Data["ca"] != "real" {
		t.Errorf("after the repair: %v %v", cm.Data, err)
	}
}

// sameLines reports whether got holds every line of want, in any order.
func sameLines(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return len(got) == len(want)
}

// TestDriftWarnInStatus: with state:, a run in which a release with a
// warn policy finds drift records it, and status shows it (the record's
// detail of the step). The step runs again here because the record was
// deleted, the spec's way to re-converge everything.
func TestDriftWarnInStatus(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "e2e-warnst")
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"c/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"c/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {mode: strict}\n",
		"spec.yaml":           "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: warnst}\nstate: {namespace: " + ns + "}\nsteps:\n  - name: c\n    helm: {chart: ./c, namespace: " + ns + ", drift: {mode: warn}}\n",
	})
	spec := filepath.Join(dir, "spec.yaml")
	env := kubeEnv(t)
	if r, res := applyJSON(t, "apply", spec, env); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	c := typed(t)
	ctx := context.Background()
	if err := c.CoreV1().Secrets(ns).Delete(ctx, "khook-state-warnst", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "cfg", types.MergePatchType, []byte(`{"data":{"mode":"lax"}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatal(err)
	}
	if _, res := applyJSON(t, "apply", spec, env, "--detailed-exitcode"); res.Code != 4 {
		t.Fatalf("apply: exit %d, want 4\n%s", res.Code, res.Stderr)
	}
	st := run(t, bins.Kubectl, env, "", "status", "-f", spec)
	if st.Code != 0 || !strings.Contains(st.Stdout, "drift left as it is (drift mode warn): ConfigMap/cfg data.mode") {
		t.Errorf("status: exit %d\n%s\n%s", st.Code, st.Stdout, st.Stderr)
	}
}

// writeTree writes files (path relative to dir: content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
