//go:build integration

package helm_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"khook.io/core/step"
	"khook.io/core/testing/steptest"
)

// The drift charts: two ConfigMaps and a custom resource (of a CRD the
// chart's crds/ installs), as the c2; and a Deployment under an
// HorizontalPodAutoscaler, with a CPU limit the API server normalises.
const (
	gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.drift.khook.test}
spec:
  group: drift.khook.test
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
                color: {type: string}
`
	c2Templates = `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-cm}
data: {a: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm2
  labels: {app: c2}
data: {a: "1", b: "2"}
---
apiVersion: drift.khook.test/v1
kind: Gadget
metadata: {name: {{ .Release.Name }}-gadget}
spec: {size: 1, color: blue}
`
	scaledTemplates = `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}-web}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Release.Name }}-web}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}-web}}
    spec:
      containers:
        - name: web
          image: busybox
          resources: {limits: {cpu: 0.5}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: {{ .Release.Name }}-web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: {{ .Release.Name }}-web}
  minReplicas: 2
  maxReplicas: 3
---
apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-cfg}
data: {level: info}
`
	hookTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-hook
  annotations:
    helm.sh/hook: post-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
data: {ran: "yes"}
`
)

// localChart writes a chart named name with the templates (and the CRDs
// of crds/) and returns its directory.
func localChart(t *testing.T, name, templates, crds string) string {
	files := map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n",
		"templates/all.yaml": templates,
	}
	if crds != "" {
		files["crds/crd.yaml"] = crds
	}
	return writeFiles(t, files)
}

var gadgetGVR = schema.GroupVersionResource{Group: "drift.khook.test", Version: "v1", Resource: "gadgets"}

// driftStep is a helm step of chart dir as release in ns.
func driftStep(release, dir, ns string) string {
	return fmt.Sprintf("name: %s\nhelm:\n  chart: %s\n  namespace: %s", release, dir, ns)
}

// patchOutOfBand is someone else's edit: a merge patch by the field
// manager kubectl patch uses.
func (f *fixture) patchOutOfBand(gvr schema.GroupVersionResource, ns, name, patch string) {
	f.t.Helper()
	_, err := f.clients.Dynamic.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-patch"})
	if err != nil {
		f.t.Fatalf("patch %s %s: %v", gvr.Resource, name, err)
	}
}

func (f *fixture) get(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	f.t.Helper()
	u, err := f.clients.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get %s %s: %v", gvr.Resource, name, err)
	}
	return u
}

func (f *fixture) diff(r *run) step.Diff {
	f.t.Helper()
	ctx, cancel := f.ctx(r)
	defer cancel()
	d, err := step.DiffStep(ctx, f.exec, r.req)
	if err != nil {
		f.t.Fatalf("diff %s: %v", r.req.Step.Name, err)
	}
	return d
}

var (
	cmGVR     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// TestHelmRepairsDrift is the c2: a release's ConfigMap deleted
// and another's value edited out of band (and a custom resource's field)
// are seen by plan (repair) and diff (the drifted fields), and put back
// by the next apply, a new revision; a key and a label the chart does
// not set are left alone; a release that did not drift makes no new
// revision.
func TestHelmRepairsDrift(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-drift")
	dir := localChart(t, "c2", c2Templates, gadgetCRD)
	yaml := driftStep("c2", dir, ns)

	f.apply(f.request(yaml, steptest.Options{}))
	out := f.apply(f.request(yaml, steptest.Options{}))
	if out.Changed || !strings.Contains(out.Message, "unchanged at revision 1") {
		t.Fatalf("re-run without drift: %+v", out)
	}
	if p := f.plan(f.request(yaml, steptest.Options{})); p.Action.Word != "no-op" {
		t.Errorf("plan without drift: %+v", p)
	}
	if d := f.diff(f.request(yaml, steptest.Options{})); d.Changes || changedObjects(t, d) != nil {
		t.Errorf("diff without drift: changes %v, objects %v", d.Changes, changedObjects(t, d))
	}

	// out of band: one ConfigMap deleted, a value of the other edited and
	// a key and a label added to it (not the chart's), a field of the
	// custom resource edited
	if err := f.clients.Typed.CoreV1().ConfigMaps(ns).Delete(context.Background(), "c2-cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.patchOutOfBand(cmGVR, ns, "c2-cm2", `{"metadata":{"labels":{"team":"theirs"}},"data":{"b":"edited","c":"theirs"}}`)
	f.patchOutOfBand(gadgetGVR, ns, "c2-gadget", `{"spec":{"size":5}}`)

	p := f.plan(f.request(yaml, steptest.Options{}))
	wantDetails := []string{
		"ConfigMap/c2-cm in " + ns + ": missing: will be re-created",
		"ConfigMap/c2-cm2 in " + ns + ": differs: data.b: will be put back",
		"Gadget/c2-gadget in " + ns + ": differs: spec.size: will be put back",
	}
	if p.Action.Word != "repair" || !strings.Contains(p.Reason, "3 objects of revision 1 drifted") {
		t.Errorf("plan after drift: %+v", p)
	}
	for _, w := range wantDetails {
		if !slices.Contains(p.Details, w) {
			t.Errorf("plan details lack %q: %q", w, p.Details)
		}
	}

	d := f.diff(f.request(yaml, steptest.Options{}))
	if !d.Changes {
		t.Error("diff after drift: no change")
	}
	changed := changedObjects(t, d)
	if got := strings.Join(changed, ", "); got != "ConfigMap "+ns+"/c2-cm, ConfigMap "+ns+"/c2-cm2, Gadget "+ns+"/c2-gadget" {
		t.Errorf("diff changes %s", got)
	}
	for _, o := range d.Objects {
		switch o.Name {
		case "ConfigMap " + ns + "/c2-cm":
			if o.Live != nil {
				t.Errorf("the deleted ConfigMap has a live version in the diff")
			}
		case "ConfigMap " + ns + "/c2-cm2":
			if v, _, _ := unstructured.NestedString(o.Live.Object, "data", "b"); v != "edited" {
				t.Errorf("diff's live data.b = %q", v)
			}
			if v, _, _ := unstructured.NestedString(o.Merged.Object, "data", "b"); v != "2" {
				t.Errorf("diff's merged data.b = %q", v)
			}
			if _, found, _ := unstructured.NestedString(o.Live.Object, "data", "c"); found {
				t.Error("diff shows the key the chart does not set")
			}
		}
	}

	out = f.apply(f.request(yaml, steptest.Options{}))
	want := "repaired: ConfigMap/c2-cm re-created, ConfigMap/c2-cm2 data.b, Gadget/c2-gadget spec.size"
	if !out.Changed || !strings.Contains(out.Message, "to revision 2 with the chart and values of revision 1") || !strings.HasSuffix(out.Message, want) {
		t.Errorf("repair: %+v, want it to end %q", out, want)
	}
	if got := strings.Join(f.revisions(ns, "c2"), ","); got != "1:superseded,2:deployed" {
		t.Errorf("revisions %s", got)
	}
	if f.gone(ns, "ConfigMap", "c2-cm") {
		t.Error("the deleted ConfigMap was not re-created")
	}
	cm2 := f.get(cmGVR, ns, "c2-cm2")
	if data, _, _ := unstructured.NestedStringMap(cm2.Object, "data"); data["b"] != "2" || data["c"] != "theirs" {
		t.Errorf("c2-cm2 data %v: want b put back, c left", data)
	}
	if cm2.GetLabels()["team"] != "theirs" {
		t.Errorf("the label the chart does not set was removed: %v", cm2.GetLabels())
	}
	if size, _, _ := unstructured.NestedInt64(f.get(gadgetGVR, ns, "c2-gadget").Object, "spec", "size"); size != 1 {
		t.Errorf("the custom resource's size = %d, want 1 (merged three-way)", size)
	}

	// repaired: the next run changes nothing
	out = f.apply(f.request(yaml, steptest.Options{}))
	if out.Changed || !strings.Contains(out.Message, "unchanged at revision 2") {
		t.Errorf("after the repair: %+v", out)
	}
	if got := strings.Join(f.revisions(ns, "c2"), ","); got != "1:superseded,2:deployed" {
		t.Errorf("revisions %s", got)
	}
}

// changedObjects names the objects of d whose two versions differ.
func changedObjects(t *testing.T, d step.Diff) []string {
	t.Helper()
	var out []string
	for _, o := range d.Objects {
		switch {
		case o.Live == nil && o.Merged == nil:
		case o.Live == nil || o.Merged == nil:
			out = append(out, o.Name)
		default:
			l, m := o.Live.DeepCopy(), o.Merged.DeepCopy()
			if fmt.Sprint(l.Object) != fmt.Sprint(m.Object) {
				out = append(out, o.Name)
			}
		}
	}
	return out
}

// TestHelmDriftLeavesOthersFields: the replicas an HorizontalPodAutoscaler
// sets (through the scale subresource) and a CPU limit the API server
// normalises ("0.5" kept as "500m") are not drift: the release stays
// unchanged, and plan and the outcome name the kept field and its
// writer; and when something else drifts, the repair keeps the
// autoscaler's replicas.
func TestHelmDriftLeavesOthersFields(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-drift-hpa")
	dir := localChart(t, "scaled", scaledTemplates, "")
	yaml := driftStep("sc", dir, ns)
	f.apply(f.request(yaml, steptest.Options{}))

	// the autoscaler raises the replicas to its minimum, through scale
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := f.clients.Typed.AppsV1().Deployments(ns).Get(ctx, "sc-web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 2, nil
	})
	if err != nil {
		t.Fatalf("the autoscaler did not scale the Deployment: %v", err)
	}
	dep := f.get(deployGVR, ns, "sc-web")
	scaler := ""
	for _, m := range dep.GetManagedFields() {
		if m.Subresource == "scale" {
			scaler = m.Manager
		}
	}
	if scaler == "" {
		t.Fatalf("no manager through scale: %v", dep.GetManagedFields())
	}
	// the chart's 0.5 is stored as 500m: not what the manifest says, not
	// drift either (a dry run of the manifest gives 500m)
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if cpu, _, _ := unstructured.NestedString(cs[0].(map[string]any), "resources", "limits", "cpu"); cpu != "500m" {
		t.Fatalf("the live CPU limit is %q, want 500m", cpu)
	}

	p := f.plan(f.request(yaml, steptest.Options{}))
	if p.Action.Word != "no-op" {
		t.Errorf("plan: %+v, want no-op", p)
	}
	other := "kept: Deployment/sc-web spec.replicas (written by " + scaler + " through scale)"
	if !slices.Contains(p.Details, other) || !slices.Contains(p.Kept, other) {
		t.Errorf("plan details and kept lack %q: %q, %q", other, p.Details, p.Kept)
	}
	out := f.apply(f.request(yaml, steptest.Options{}))
	if out.Changed || !strings.Contains(out.Message, "unchanged at revision 1") || !strings.HasSuffix(out.Message, "; "+other) {
		t.Errorf("re-run with the autoscaler's replicas and a normalised limit: %+v", out)
	}

	// something else drifts: the repair puts it back, and keeps the
	// autoscaler's replicas (the Deployment is not written: same
	// generation)
	generation := f.get(deployGVR, ns, "sc-web").GetGeneration()
	f.patchOutOfBand(cmGVR, ns, "sc-cfg", `{"data":{"level":"debug"}}`)
	out = f.apply(f.request(yaml, steptest.Options{}))
	if !out.Changed || !strings.HasSuffix(out.Message, "repaired: ConfigMap/sc-cfg data.level; "+other) {
		t.Errorf("repair: %+v", out)
	}
	dep = f.get(deployGVR, ns, "sc-web")
	if r, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); r != 2 || dep.GetGeneration() != generation {
		t.Errorf("after the repair: replicas %d, generation %d (was %d): the repair took the autoscaler's replicas", r, dep.GetGeneration(), generation)
	}
	if v, _, _ := unstructured.NestedString(f.get(cmGVR, ns, "sc-cfg").Object, "data", "level"); v != "info" {
		t.Error("the ConfigMap was not put back")
	}
}

// TestHelmReplaceUpgrades: --replace (Request.Replace) upgrades a release
// that needs nothing: a new revision, and its hooks run.
func TestHelmReplaceUpgrades(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-replace")
	dir := localChart(t, "hooked", c2Templates[:strings.Index(c2Templates, "---\napiVersion: drift")]+"---\n"+hookTemplate, "")
	yaml := driftStep("hk", dir, ns)
	f.apply(f.request(yaml, steptest.Options{}))
	if !f.gone(ns, "ConfigMap", "hk-hook") {
		t.Fatal("the post-upgrade hook ran on install")
	}
	r := f.request(yaml, steptest.Options{})
	r.req.Replace = true
	if p := f.plan(r); p.Action.Word != "upgrade" || !strings.Contains(p.Reason, "a new revision all the same (--replace)") {
		t.Errorf("plan with --replace: %+v", p)
	}
	r = f.request(yaml, steptest.Options{})
	r.req.Replace = true
	out := f.apply(r)
	if !out.Changed || !strings.Contains(out.Message, "upgraded release hk ("+ns+") to revision 2: chart "+dir+" with the same values and objects as revision 1") {
		t.Errorf("apply with --replace: %+v", out)
	}
	if got := strings.Join(f.revisions(ns, "hk"), ","); got != "1:superseded,2:deployed" {
		t.Errorf("revisions %s", got)
	}
	if f.gone(ns, "ConfigMap", "hk-hook") {
		t.Error("the post-upgrade hook did not run")
	}
}

// TestHelmRepairsServerSideRelease: a release the helm 4 CLI installed
// server-side, a field of which another manager edited (a conflict for
// server-side apply), is repaired by khook with force-conflicts: the
// field is taken back.
func TestHelmRepairsServerSideRelease(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-drift-ssa")
	dir := localChart(t, "c2", c2Templates[:strings.Index(c2Templates, "---\napiVersion: drift")], "")
	helm4 := newHelmCmd(t, "helm 4", helm4Version, f.cluster.Kubeconfig)
	helm4.run(t, "install", "c2", dir, "-n", ns, "--server-side=true")
	yaml := driftStep("c2", dir, ns)
	if out := f.apply(f.request(yaml, steptest.Options{})); out.Changed {
		t.Fatalf("khook over helm 4's server-side release: %+v", out)
	}
	f.patchOutOfBand(cmGVR, ns, "c2-cm2", `{"data":{"b":"edited"}}`)
	out := f.apply(f.request(yaml, steptest.Options{}))
	if !out.Changed || !strings.HasSuffix(out.Message, "repaired: ConfigMap/c2-cm2 data.b") {
		t.Errorf("repair of a server-side release: %+v", out)
	}
	cm := f.get(cmGVR, ns, "c2-cm2")
	if b, _, _ := unstructured.NestedString(cm.Object, "data", "b"); b != "2" {
		t.Errorf("data.b = %q after the repair", b)
	}
	for _, m := range cm.GetManagedFields() {
		if m.Manager == "kubectl-patch" && strings.Contains(string(m.FieldsV1.Raw), `"f:b"`) {
			t.Errorf("kubectl-patch still owns data.b: %s", m.FieldsV1.Raw)
		}
	}
	if got := helm4.list(t, ns, "c2"); !strings.HasPrefix(got, "2:deployed:") {
		t.Errorf("helm 4 lists %q after khook's repair", got)
	}
}
