//go:build integration

package helm_test

import (
	"context"
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
	"sigs.k8s.io/yaml"

	"khook.io/core/step"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/steptest"
)

// realCharts are the vendored upstream charts (chartrepo's
// testdata/charts/SOURCES.md) whose templates render annotations: with no
// value (the {{- with .Values.x.annotations }} pattern, a null) on some
// of their objects, with the values that make them install on a shared
// test cluster (NS is the test's namespace): their admission webhooks
// only for that namespace, failing open, and ingress-nginx's IngressClass
// named after it; ingress-nginx and the admission webhook carry
// admission hooks (Jobs that create a certificate Secret and patch the
// webhook configurations).
var realCharts = []struct{ name, values string }{
	{"ingress-nginx", "{controller: {ingressClassResource: {name: NS}, admissionWebhooks: {failurePolicy: Ignore, namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: NS}}}}}"},
	{"kube-state-metrics", "{prometheusScrape: false}"}, // as kube-prometheus-stack sets it
	{"prometheus-operator-admission-webhook", "{webhooks: {failurePolicy: Ignore, namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: NS}}}}"},
}

// TestRealChartsRerunUnchanged: real charts whose templates write null
// annotations: and carry admission hooks, applied and then applied twice
// more with nothing changed: no new revision (the outcome says unchanged,
// the plan no-op, the diff no change), and no hook Job is created again.
// Before, the null annotations read as "set to nothing" made each re-run
// a repair and a new revision, running the hooks again.
func TestRealChartsRerunUnchanged(t *testing.T) {
	f := newFixture(t)
	for _, c := range realCharts {
		t.Run(c.name, func(t *testing.T) {
			f := f.on(t)
			ns := f.cluster.NewNamespace(t, "real-"+c.name[:4])
			yaml := fmt.Sprintf("name: rel\nhelm:\n  chart: %s\n  release: %s\n  namespace: %s\n  values: %s", chartrepo.ChartDir(c.name), ns, ns, strings.ReplaceAll(c.values, "NS", ns))
			f.uninstallLater(t, yaml)
			out := f.apply(f.request(yaml, steptest.Options{}))
			if !out.Changed || !strings.Contains(out.Message, "installed release "+ns) {
				t.Fatalf("install: %+v", out)
			}
			hooks := f.watchJobs(t, ns)
			for i := range 2 {
				p := f.plan(f.request(yaml, steptest.Options{}))
				if p.Action.Word != "no-op" {
					t.Errorf("re-run %d: plan %s (%s): %q", i+1, p.Action, p.Reason, p.Details)
				}
				if d := f.diff(f.request(yaml, steptest.Options{})); d.Changes || changedObjects(t, d) != nil {
					t.Errorf("re-run %d: diff changes %v, objects %v", i+1, d.Changes, changedObjects(t, d))
				}
				out := f.apply(f.request(yaml, steptest.Options{}))
				if out.Changed || !strings.Contains(out.Message, "unchanged at revision 1") {
					t.Errorf("re-run %d: %+v", i+1, out)
				}
			}
			if got := strings.Join(f.revisions(ns, ns), ","); got != "1:deployed" {
				t.Errorf("revisions %s", got)
			}
			if created := hooks(); len(created) > 0 {
				t.Errorf("hook Jobs created by the re-runs: %q", created)
			}
		})
	}
}

// uninstallLater uninstalls the release of the step when t ends, before
// t's namespace goes: its cluster-scoped objects (webhook configurations,
// ClusterRoles) go with it.
func (f *fixture) uninstallLater(t *testing.T, yaml string) {
	t.Cleanup(func() {
		r := f.request(yaml, steptest.Options{})
		ctx, cancel := f.ctx(r)
		defer cancel()
		if _, err := step.DestroyStep(ctx, f.exec, r.req); err != nil {
			t.Errorf("uninstall: %v", err)
		}
	})
}

// watchJobs watches the Jobs of ns from now on; the function returned
// stops the watch and names the Jobs created meanwhile.
func (f *fixture) watchJobs(t *testing.T, ns string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := f.clients.Typed.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := f.clients.Typed.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		created []string
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(metav1.Object); ok && ev.Type == watch.Added {
				mu.Lock()
				created = append(created, o.GetName())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(cancel)
	return func() []string {
		w.Stop()
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return created
	}
}

// TestChartCRDsPresent: a CRD an earlier step applied server-side (field
// manager khook) from another prometheus-operator release, then a chart
// shipping the same CRDs in its crds/ (as kube-prometheus-stack does,
// through its crds subchart): the install succeeds, skipping the present
// one, left as it was, with a warning naming its manager (helm 4's own
// install failed there with a conflict on the version annotation), plan
// and the outcome say so, and a re-run is unchanged. A CRD of crds/ that
// is absent is still installed.
func TestChartCRDsPresent(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "crds-present")
	crdDir := filepath.Join(chartrepo.ChartDir("kps-crds"), "crds")
	// an earlier step's apply: the rules CRD only, of another
	// prometheus-operator release (the bundle), server-side as
	// khook
	//
	// The CRDs' group is renamed (monitoring-steps.coreos.com) so that
	// tests of other packages, which install the same CRDs on the same
	// cluster at the same time, keep theirs.
	const group = "monitoring-steps.coreos.com"
	readCRD := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(crdDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return []byte(strings.ReplaceAll(string(b), "monitoring.coreos.com", group))
	}
	rules := readCRD("crd-prometheusrules.yaml")
	const chartVersion, bundleVersion = "operator.prometheus.io/version: 0.93.1", "operator.prometheus.io/version: 0.92.0"
	if !strings.Contains(string(rules), chartVersion) {
		t.Fatalf("the vendored CRD has no %q", chartVersion)
	}
	applyServerSide(t, f, []byte(strings.Replace(string(rules), chartVersion, bundleVersion, 1)))
	t.Cleanup(func() {
		for _, n := range []string{"prometheusrules." + group, "servicemonitors." + group} {
			_ = f.clients.Dynamic.Resource(crdGVR).Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})

	// a chart as kube-prometheus-stack is: the crds subchart, and a
	// PrometheusRule of its own
	dir := writeFiles(t, map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: stack\nversion: 0.1.0\ndependencies:\n  - {name: crds, version: 0.0.0, condition: crds.enabled}\n",
		"values.yaml":            "crds: {enabled: true}\n",
		"templates/rule.yaml":    "apiVersion: " + group + "/v1\nkind: PrometheusRule\nmetadata: {name: {{ .Release.Name }}-rules}\nspec:\n  groups: [{name: g, rules: [{alert: A, expr: up == 0}]}]\n",
		"charts/crds/Chart.yaml": "apiVersion: v2\nname: crds\nversion: 0.0.0\n",
	})
	for _, name := range []string{"crd-prometheusrules.yaml", "crd-servicemonitors.yaml"} {
		b := readCRD(name)
		if err := os.MkdirAll(filepath.Join(dir, "charts", "crds", "crds"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "charts", "crds", "crds", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	yaml := driftStep("stack", dir, ns)
	skipped := "charts/crds/crds/crd-prometheusrules.yaml: CustomResourceDefinition prometheusrules." + group + " exists (managed by khook)"

	p := f.plan(f.request(yaml, steptest.Options{}))
	if p.Action.Word != "install" || !slices.ContainsFunc(p.Details, func(d string) bool { return strings.HasPrefix(d, skipped+": will be skipped") }) {
		t.Errorf("plan: %s %q", p.Action, p.Details)
	}
	r := f.request(yaml, steptest.Options{})
	var warnings []string
	var mu sync.Mutex
	r.req.Warn = func(text string) { mu.Lock(); warnings = append(warnings, text); mu.Unlock() }
	out := f.apply(r)
	if !out.Changed || !strings.Contains(out.Message, "skipped 1 CRD of the chart's crds/ that exist (helm installs them only when absent): prometheusrules."+group+" (charts/crds/crds/crd-prometheusrules.yaml)") {
		t.Errorf("install: %+v", out)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.HasPrefix(w, "chart stack: "+skipped+": skipped") }) {
		t.Errorf("warnings %q", warnings)
	}
	// the absent one was installed by the chart, the present one left as
	// the earlier step wrote it
	sm, err := f.clients.Dynamic.Resource(crdGVR).Get(context.Background(), "servicemonitors."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the absent CRD was not installed: %v", err)
	}
	if mgrs := managers(sm.GetManagedFields()); !slices.Contains(mgrs, "helm/Apply") {
		t.Errorf("servicemonitors' managers %q", mgrs)
	}
	pr, err := f.clients.Dynamic.Resource(crdGVR).Get(context.Background(), "prometheusrules."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mgrs := managers(pr.GetManagedFields()); slices.ContainsFunc(mgrs, func(m string) bool { return strings.HasPrefix(m, "helm/") }) {
		t.Errorf("the present CRD was written by the install: managers %q", mgrs)
	}
	if v := pr.GetAnnotations()["operator.prometheus.io/version"]; v != "0.92.0" {
		t.Errorf("the present CRD's version annotation is %q, want the earlier step's 0.92.0", v)
	}
	out = f.apply(f.request(yaml, steptest.Options{}))
	if out.Changed || !strings.Contains(out.Message, "unchanged at revision 1") {
		t.Errorf("re-run: %+v", out)
	}
	if p := f.plan(f.request(yaml, steptest.Options{})); p.Action.Word != "no-op" {
		t.Errorf("plan after: %s %q", p.Action, p.Details)
	}
}

// applyServerSide applies the objects of a YAML file server-side as
// khook's apply: steps do (field manager khook).
func applyServerSide(t *testing.T, f *fixture, data []byte) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	meta := obj["metadata"].(map[string]any)
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	force := false
	if _, err := f.clients.Dynamic.Resource(crdGVR).Patch(context.Background(), meta["name"].(string), types.ApplyPatchType, j, metav1.PatchOptions{FieldManager: "khook", Force: &force}); err != nil {
		t.Fatal(err)
	}
}

// certTemplates render a new certificate on every render, as
// aws-load-balancer-controller's chart does for its webhook: a Secret
// with the key pair and a webhook configuration with its CA.
const certTemplates = `{{- $cert := genSelfSignedCert "lbc.example" nil nil 30 }}
apiVersion: v1
kind: Secret
metadata: {name: lbc-tls}
type: kubernetes.io/tls
data:
  tls.crt: {{ $cert.Cert | b64enc }}
  tls.key: {{ $cert.Key | b64enc }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: lbc-config}
data: {level: info}
`

// TestPlanSaysWhyAChartUpgradesEachRun: a chart whose template renders
// a new certificate on every render still upgrades on every run (as helm
// upgrade does), and plan says why: which fields of which objects the
// new rendering changes, by path, never by value.
func TestPlanSaysWhyAChartUpgradesEachRun(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-renders")
	dir := localChart(t, "lbc", certTemplates, "")
	yaml := driftStep("lbc", dir, ns)
	f.apply(f.request(yaml, steptest.Options{}))
	p := f.plan(f.request(yaml, steptest.Options{}))
	want := `the chart renders differently now: Secret/lbc-tls data["tls.crt"], data["tls.key"]`
	if p.Action.Word != "upgrade" || !strings.Contains(p.Reason, want) || strings.Contains(p.Reason, "ConfigMap") {
		t.Errorf("plan: %s %q, want the reason to say %q", p.Action, p.Reason, want)
	}
	if out := f.apply(f.request(yaml, steptest.Options{})); !out.Changed || !strings.Contains(out.Message, "to revision 2") {
		t.Errorf("re-run: %+v", out)
	}
}
