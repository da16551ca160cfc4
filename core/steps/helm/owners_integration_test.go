//go:build integration

package helm_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/testing/steptest"
)

// injectorTemplates: a ConfigMap whose data.ca is a placeholder, and a
// webhook configuration whose caBundle is one, for a controller (cert-
// manager's cainjector) to fill, as charts render them; the webhook
// covers nothing the tests use, and fails open.
const injectorTemplates = `apiVersion: v1
kind: ConfigMap
metadata:
  name: inj-ca
  labels: {app: inj}
  annotations:
data: {ca: placeholder, mode: strict}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: inj-{{ .Release.Namespace }}}
webhooks:
  - name: check.inj.khook.test
    clientConfig:
      service: {name: inj, namespace: {{ .Release.Namespace }}, path: /validate}
      caBundle: Cg==
    rules: [{apiGroups: [inj.khook.test], apiVersions: [v1], operations: [CREATE], resources: [things]}]
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Ignore
`

var webhookGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}

// inject is the controller: it writes the CA into the ConfigMap and the
// webhook configuration, through the objects, as field manager
// cainjector (a merge patch and a JSON patch, as controllers patch).
func (f *fixture) inject(ns, ca string) {
	f.t.Helper()
	ctx := context.Background()
	if _, err := f.clients.Dynamic.Resource(cmGVR).Namespace(ns).Patch(ctx, "inj-ca", types.MergePatchType,
		[]byte(`{"data":{"ca":"`+ca+`"}}`), metav1.PatchOptions{FieldManager: "cainjector"}); err != nil {
		f.t.Fatal(err)
	}
	bundle := base64.StdEncoding.EncodeToString([]byte(ca))
	if _, err := f.clients.Dynamic.Resource(webhookGVR).Patch(ctx, "inj-"+ns, types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"`+bundle+`"}]`), metav1.PatchOptions{FieldManager: "cainjector"}); err != nil {
		f.t.Fatal(err)
	}
}

// editMode is a person's kubectl edit of another key of the ConfigMap:
// an Update of the whole object, as field manager kubectl-edit.
func (f *fixture) editMode(ns, mode string) {
	f.t.Helper()
	ctx := context.Background()
	cm := f.get(cmGVR, ns, "inj-ca")
	if err := unstructured.SetNestedField(cm.Object, mode, "data", "mode"); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.clients.Dynamic.Resource(cmGVR).Namespace(ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		f.t.Fatal(err)
	}
}

// injected reads the ConfigMap's data and the webhook's caBundle,
// decoded.
func (f *fixture) injected(ns string) (map[string]string, string) {
	f.t.Helper()
	data, _, _ := unstructured.NestedStringMap(f.get(cmGVR, ns, "inj-ca").Object, "data")
	wh, err := f.clients.Dynamic.Resource(webhookGVR).Get(context.Background(), "inj-"+ns, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	hooks, _, _ := unstructured.NestedSlice(wh.Object, "webhooks")
	bundle, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle")
	b, _ := base64.StdEncoding.DecodeString(bundle)
	return data, string(b)
}

// TestHelmKeepsControllersFields is the injector: a controller
// (field manager cainjector) fills a ConfigMap's data.ca and a webhook
// configuration's caBundle that the chart renders as placeholders.
// Three re-applies, the controller writing again after each, keep its
// values, make no new revision and say which field is kept for whom
// (outcome, plan); a person's kubectl edit of another key of the same
// ConfigMap is repaired (a new revision) without touching the
// controller's key; drift: {mode: warn} reports the edit and the kept
// field and changes neither; an ignore: rule silences the key; mode off
// does not look; managers.take puts the controller's field back.
func TestHelmKeepsControllersFields(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-owners")
	dir := localChart(t, "inj", injectorTemplates, "")
	base := driftStep("inj", dir, ns)
	f.uninstallLater(t, base)
	f.apply(f.request(base, steptest.Options{}))
	webhook := `ValidatingWebhookConfiguration/inj-` + ns + ` webhooks[name="check.inj.khook.test"].clientConfig.caBundle (written by cainjector)`
	keptCA := "kept: ConfigMap/inj-ca data.ca (written by cainjector)"

	for i := 1; i <= 3; i++ {
		ca := fmt.Sprintf("real-ca-%d", i)
		f.inject(ns, ca)
		p := f.plan(f.request(base, steptest.Options{}))
		if p.Action.Word != "no-op" || !slices.Contains(p.Kept, keptCA) || !slices.Contains(p.Kept, "kept: "+webhook) {
			t.Errorf("re-apply %d: plan %s, kept %q", i, p.Action, p.Kept)
		}
		out := f.apply(f.request(base, steptest.Options{}))
		if out.Changed || !strings.Contains(out.Message, "unchanged at revision 1") || !strings.Contains(out.Message, keptCA) || !strings.Contains(out.Message, webhook) {
			t.Errorf("re-apply %d: %+v", i, out)
		}
		if data, bundle := f.injected(ns); data["ca"] != ca || bundle != ca {
			t.Errorf("re-apply %d: data.ca %q, caBundle %q, want the controller's %q", i, data["ca"], bundle, ca)
		}
	}

	// a person edits another key: repaired, the controller's key kept
	f.editMode(ns, "lax")
	p := f.plan(f.request(base, steptest.Options{}))
	if p.Action.Word != "repair" || !slices.Contains(p.Details, "ConfigMap/inj-ca in "+ns+": differs: data.mode: will be put back") || !slices.Contains(p.Kept, keptCA) {
		t.Errorf("plan after the edit: %s %q %q", p.Action, p.Details, p.Kept)
	}
	out := f.apply(f.request(base, steptest.Options{}))
	if !out.Changed || !strings.Contains(out.Message, "repaired: ConfigMap/inj-ca data.mode") {
		t.Errorf("repair: %+v", out)
	}
	if data, bundle := f.injected(ns); data["mode"] != "strict" || data["ca"] != "real-ca-3" || bundle != "real-ca-3" {
		t.Errorf("after the repair: data %v, caBundle %q", data, bundle)
	}

	// warn: both reported, neither changed
	f.editMode(ns, "lax")
	warn := base + "\n  drift: {mode: warn}"
	p = f.plan(f.request(warn, steptest.Options{}))
	left := "drift: ConfigMap/inj-ca data.mode (left as it is: drift mode warn)"
	if p.Action.Word != "no-op" || !slices.Contains(p.Drift, left) || !slices.Contains(p.Kept, keptCA) {
		t.Errorf("plan in warn mode: %s %s drift %q kept %q", p.Action, p.Reason, p.Drift, p.Kept)
	}
	if d := f.diff(f.request(warn, steptest.Options{})); d.Changes || changedObjects(t, d) != nil || !slices.Contains(d.Drift, left) {
		t.Errorf("diff in warn mode: changes %v, objects %v, drift %q", d.Changes, changedObjects(t, d), d.Drift)
	}
	out = f.apply(f.request(warn, steptest.Options{}))
	if out.Changed || !strings.Contains(out.Message, "unchanged at revision 2") || !strings.Contains(out.Message, "drift left as it is (drift mode warn): ConfigMap/inj-ca data.mode") ||
		!slices.Contains(out.Drift, left) || !slices.Contains(out.Kept, keptCA) {
		t.Errorf("apply in warn mode: %+v", out)
	}
	if data, _ := f.injected(ns); data["mode"] != "lax" || data["ca"] != "real-ca-3" {
		t.Errorf("warn changed something: %v", data)
	}

	// an ignore rule silences the key
	ignore := base + "\n  drift: {ignore: [{paths: [/data/mode], target: {kind: ConfigMap, name: inj-*}}]}"
	p = f.plan(f.request(ignore, steptest.Options{}))
	if p.Action.Word != "no-op" || len(p.Drift) > 0 || !slices.Contains(p.Kept, "ignored: ConfigMap/inj-ca data.mode (drift.ignore)") {
		t.Errorf("plan with the ignore rule: %s drift %q kept %q", p.Action, p.Drift, p.Kept)
	}
	out = f.apply(f.request(ignore, steptest.Options{}))
	if out.Changed || !strings.Contains(out.Message, "unchanged at revision 2") {
		t.Errorf("apply with the ignore rule: %+v", out)
	}
	// off: not even looked at
	off := base + "\n  drift: {mode: off}"
	if p := f.plan(f.request(off, steptest.Options{})); p.Action.Word != "no-op" || !strings.Contains(p.Reason, "drift mode off") || len(p.Kept) > 0 {
		t.Errorf("plan in off mode: %s %s %q", p.Action, p.Reason, p.Kept)
	}
	if data, _ := f.injected(ns); data["mode"] != "lax" {
		t.Errorf("ignore or off changed data.mode: %v", data)
	}

	// managers.take: the controller's write is put back, like a person's
	take := base + "\n  drift: {managers: {take: [cainjector]}}"
	out = f.apply(f.request(take, steptest.Options{}))
	if !out.Changed || !strings.Contains(out.Message, "repaired: ConfigMap/inj-ca data.ca, data.mode, ValidatingWebhookConfiguration/inj-"+ns) {
		t.Errorf("apply with managers.take: %+v", out)
	}
	if data, bundle := f.injected(ns); data["ca"] != "placeholder" || data["mode"] != "strict" || bundle != "\n" {
		t.Errorf("after managers.take: data %v, caBundle %q", data, bundle)
	}
	if got := strings.Join(f.revisions(ns, "inj"), ","); got != "1:superseded,2:superseded,3:deployed" {
		t.Errorf("revisions %s", got)
	}
}

// TestHelmUpgradeKeepsControllersFields: an upgrade to new values (not a
// repair) leaves out what a controller wrote where the chart did not
// change it: the release (applied server-side, as helm 4 and khook
// install) is upgraded without a conflict with cainjector, whose
// data.ca and caBundle stand, the new value applied. A field the chart
// changes is written all the same: the chart's author changed it.
func TestHelmUpgradeKeepsControllersFields(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-owners-up")
	templates := strings.Replace(injectorTemplates, "data: {ca: placeholder, mode: strict}", "data: {ca: placeholder, mode: {{ .Values.mode }}}", 1)
	dir := localChart(t, "inj", templates, "")
	step := func(mode string) string { return driftStep("inj", dir, ns) + "\n  values: {mode: " + mode + "}" }
	f.uninstallLater(t, step("strict"))
	f.apply(f.request(step("strict"), steptest.Options{}))
	f.inject(ns, "real-ca")
	out := f.apply(f.request(step("lax"), steptest.Options{}))
	if !out.Changed || !strings.Contains(out.Message, "upgraded release inj ("+ns+") to revision 2") {
		t.Fatalf("upgrade: %+v", out)
	}
	if data, bundle := f.injected(ns); data["ca"] != "real-ca" || bundle != "real-ca" || data["mode"] != "lax" {
		t.Errorf("after the upgrade: data %v, caBundle %q; want the controller's CA kept, mode lax", data, bundle)
	}
	if out := f.apply(f.request(step("lax"), steptest.Options{})); out.Changed || !strings.Contains(out.Message, "unchanged at revision 2") {
		t.Errorf("re-run: %+v", out)
	}
}
