package helm

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"khook.io/core/objects"
	"khook.io/core/spec"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

// withManaged sets live's managedFields: manager, subresource, fields
// (FieldsV1 JSON).
func withManaged(u *unstructured.Unstructured, entries ...[3]string) *unstructured.Unstructured {
	var mf []metav1.ManagedFieldsEntry
	for _, e := range entries {
		mf = append(mf, metav1.ManagedFieldsEntry{Manager: e[0], Operation: metav1.ManagedFieldsOperationUpdate, Subresource: e[1], APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(e[2])}})
	}
	u.SetManagedFields(mf)
	return u
}

const deployManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, labels: {app: web}, annotations: {}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - {name: web, image: busybox}
        - {name: sidecar, image: pause}
`

const deployLive = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, uid: u1, resourceVersion: "7", labels: {app: web, team: x}}
spec:
  replicas: 3
  progressDeadlineSeconds: 600
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - {name: web, image: busybox, imagePullPolicy: Always}
        - {name: sidecar, image: pause}
status: {replicas: 3}
`

func names(fs []objects.Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = pathName(f.Path)
	}
	return out
}

// TestClassifyDrift: of the fields a manifest sets, those whose live
// value differs are drift when nobody, helm, or a person (kubectl's
// managers) wrote the live value, and another writer's, kept, when a
// controller did, through the object or a subresource (an HPA's
// replicas, through scale), or another step of the spec did; the policy's
// managers.keep and managers.take say otherwise for the managers they
// name, its ignore rules leave fields out; what the manifest does not set
// (a label, defaults) is never read; a null or an empty map the server
// drops is no drift; a Secret's stringData is compared as the data it
// becomes.
func TestClassifyDrift(t *testing.T) {
	const helmMgr = "helm"
	scaled := `{"f:spec":{"f:replicas":{}}}`
	const injected = `apiVersion: v1
kind: ConfigMap
metadata: {name: inj-ca, namespace: ns, labels: {app: inj}}
data: {ca: placeholder, other: "1"}
`
	injectedLive := func(ca, other, caManager, otherManager string) *unstructured.Unstructured {
		u := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: inj-ca, namespace: ns, labels: {app: inj}}\ndata: {ca: "+ca+", other: '"+other+"'}\n")
		return withManaged(u,
			[3]string{helmMgr, "", `{"f:metadata":{"f:labels":{"f:app":{}}}}`},
			[3]string{caManager, "", `{"f:data":{"f:ca":{}}}`},
			[3]string{otherManager, "", `{"f:data":{"f:other":{}}}`})
	}
	policy := func(y string) objects.Policy {
		var d spec.Drift
		if err := yaml.Unmarshal([]byte(y), &d); err != nil {
			t.Fatal(err)
		}
		p, err := objects.NewPolicy(&d)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name       string
		want, live *unstructured.Unstructured
		policy     objects.Policy
		differ     []string
		kept       []string
		ignored    []string
	}{
		{
			name: "replicas an HPA scaled: another writer's, not drift",
			want: obj(t, deployManifest),
			live: withManaged(obj(t, deployLive),
				[3]string{helmMgr, "", `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:template":{}}}`},
				[3]string{"kube-controller-manager", "scale", scaled}),
			kept: []string{"Deployment/web spec.replicas (written by kube-controller-manager through scale)"},
		},
		{
			name: "replicas a patch: step of the spec set (field manager khook): the spec's, not drift",
			want: obj(t, deployManifest),
			live: withManaged(obj(t, deployLive),
				[3]string{helmMgr, "", `{"f:spec":{"f:template":{}}}`},
				[3]string{"khook", "", scaled}),
			kept: []string{"Deployment/web spec.replicas (written by khook, another step of the spec)"},
		},
		{
			name: "annotations: with no value, live carrying helm's own: not set, no drift",
			want: obj(t, "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: ns\n  annotations:\n  labels: {app: s}\nspec:\n  selector: {app: s}\n  ports: [{port: 80}]\n"),
			live: withManaged(obj(t, "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: ns\n  annotations: {meta.helm.sh/release-name: r}\n  labels: {app: s, app.kubernetes.io/managed-by: Helm}\nspec:\n  clusterIP: 10.0.0.7\n  selector: {app: s}\n  ports: [{port: 80, protocol: TCP, targetPort: 80}]\n"),
				[3]string{helmMgr, "", `{"f:metadata":{"f:annotations":{"f:meta.helm.sh/release-name":{}}}}`}),
		},
		{
			name:   "a controller filled a placeholder; a person edited another key: the first kept, the second drift",
			want:   obj(t, injected),
			live:   injectedLive("real-ca", "2", "cainjector", "kubectl-edit"),
			differ: []string{"data.other"},
			kept:   []string{"ConfigMap/inj-ca data.ca (written by cainjector)"},
		},
		{
			name:   "managers.take: the controller's write is put back",
			want:   obj(t, injected),
			live:   injectedLive("real-ca", "1", "cainjector", "kubectl-edit"),
			policy: policy("managers: {take: [cain*]}"),
			differ: []string{"data.ca"},
		},
		{
			name:   "managers.keep: a person's write is kept",
			want:   obj(t, injected),
			live:   injectedLive("placeholder", "2", "cainjector", "kubectl-edit"),
			policy: policy("managers: {keep: [kubectl-edit]}"),
			kept:   []string{"ConfigMap/inj-ca data.other (written by kubectl-edit, kept by managers.keep)"},
		},
		{
			name:    "an ignore rule for the object: ignored, whoever wrote it",
			want:    obj(t, injected),
			live:    injectedLive("real-ca", "2", "cainjector", "kubectl-edit"),
			policy:  policy("ignore: [{paths: [/data/other, /data/ca], target: {kind: ConfigMap, labelSelector: app=inj}}]"),
			ignored: []string{"ConfigMap/inj-ca data.ca (drift.ignore)", "ConfigMap/inj-ca data.other (drift.ignore)"},
		},
		{
			name:   "an ignore rule for other objects: no effect",
			want:   obj(t, injected),
			live:   injectedLive("real-ca", "2", "cainjector", "kubectl-edit"),
			policy: policy("ignore: [{paths: [/data], target: {name: other-*}}]"),
			differ: []string{"data.other"},
			kept:   []string{"ConfigMap/inj-ca data.ca (written by cainjector)"},
		},
		{
			name:   "an ignore rule with a wildcard list index",
			want:   obj(t, deployManifest),
			live:   withManaged(obj(t, strings.Replace(deployLive, "image: pause", "image: pause:2", 1)), [3]string{"kubectl-set", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"sidecar\"}":{"f:image":{}}}}}}}`}),
			policy: policy("ignore: [{paths: [/spec/template/spec/containers/*/image, /spec/replicas]}]"),
			ignored: []string{"Deployment/web spec.replicas (drift.ignore)",
				`Deployment/web spec.template.spec.containers[name="sidecar"].image (drift.ignore)`},
		},
		{
			name: "replicas someone edited: drift",
			want: obj(t, deployManifest),
			live: withManaged(obj(t, deployLive),
				[3]string{helmMgr, "", `{"f:spec":{"f:template":{}}}`},
				[3]string{"kubectl-edit", "", scaled}),
			differ: []string{"spec.replicas"},
		},
		{
			name: "a container the cluster lacks: drift of each of its fields",
			want: obj(t, deployManifest),
			live: func() *unstructured.Unstructured {
				u := obj(t, deployLive)
				u.Object["spec"].(map[string]any)["replicas"] = int64(1)
				spec := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
				spec["containers"] = spec["containers"].([]any)[:1]
				return u
			}(),
			differ: []string{`spec.template.spec.containers[name="sidecar"].image`, `spec.template.spec.containers[name="sidecar"].name`},
		},
		{
			name:   "a ConfigMap value edited, a key added by someone else",
			want:   obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '1', b: '2'}\n"),
			live:   obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '1', b: edited, c: theirs}\n"),
			differ: []string{"data.b"},
		},
		{
			name:   "a Secret's stringData, edited as data",
			want:   obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {p: planted-one}\n"),
			live:   obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: Opaque\ndata: {p: "+base64.StdEncoding.EncodeToString([]byte("other"))+"}\n"),
			differ: []string{"data.p"},
		},
		{
			name: "a Secret's stringData as the server keeps it",
			want: obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {p: planted-one}\n"),
			live: obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: Opaque\ndata: {p: "+base64.StdEncoding.EncodeToString([]byte("planted-one"))+"}\n"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, err := classify(tt.want, tt.live, tt.policy, "khook", helmMgr)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(cl.differ); !reflect.DeepEqual(got, tt.differ) && (len(got) > 0 || len(tt.differ) > 0) {
				t.Errorf("drift %q, want %q", got, tt.differ)
			}
			for _, c := range []struct {
				what string
				got  []objects.Kept
				want []string
			}{{"kept", cl.kept, tt.kept}, {"ignored", cl.ignored, tt.ignored}} {
				var got []string
				for _, f := range c.got {
					got = append(got, f.String())
				}
				if !reflect.DeepEqual(got, c.want) && (len(got) > 0 || len(c.want) > 0) {
					t.Errorf("%s %q, want %q", c.what, got, c.want)
				}
			}
		})
	}
}

// TestConfirmDrift: a field a server-side dry run of the manifest leaves
// at its live value (a webhook's, a default, a normalised quantity) is not
// drift; without a dry run every differing field is, unconfirmed; a
// missing list entry is named once; the live version shows each drifted
// field at its live value.
func TestConfirmDrift(t *testing.T) {
	want := obj(t, deployManifest)
	live := obj(t, deployLive)
	spec := live.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["containers"] = []any{map[string]any{"name": "web", "image": "docker.io/library/busybox"}}
	cl, err := classify(want, live, objects.Policy{}, "khook", "helm")
	if err != nil {
		t.Fatal(err)
	}
	intent, differ := cl.intent, cl.differ

	// the dry run: a webhook rewrites the image, and the replicas and the
	// sidecar go back
	applied := obj(t, deployLive)
	aspec := applied.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	aspec["containers"] = []any{map[string]any{"name": "web", "image": "docker.io/library/busybox"}, map[string]any{"name": "sidecar", "image": "pause"}}
	applied.Object["spec"].(map[string]any)["replicas"] = int64(1)
	d := confirm(objects.RefOf(want), intent, differ, applied, "")
	if d == nil {
		t.Fatal("no drift")
	}
	wantFields := []string{`spec.replicas`, `spec.template.spec.containers[name="sidecar"]`}
	if !reflect.DeepEqual(d.Fields, wantFields) {
		t.Errorf("fields %q, want %q", d.Fields, wantFields)
	}
	// the live version: the manifest with replicas 3, no sidecar, the
	// image as the manifest has it (not drift)
	if r, _, _ := unstructured.NestedInt64(d.Live.Object, "spec", "replicas"); r != 3 {
		t.Errorf("live replicas %d, want 3", r)
	}
	cs, _, _ := unstructured.NestedSlice(d.Live.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 || cs[0].(map[string]any)["image"] != "busybox" {
		t.Errorf("live containers %v, want web with the manifest's image", cs)
	}
	if r, _, _ := unstructured.NestedInt64(d.Manifest.Object, "spec", "replicas"); r != 1 {
		t.Errorf("the manifest changed: replicas %d", r)
	}

	// the dry run leaves everything as it is: no drift
	same := live.DeepCopy()
	if d := confirm(objects.RefOf(want), intent, differ, same, ""); d != nil {
		t.Errorf("drift %q where the dry run changes nothing", d.Fields)
	}

	// no dry run: every field, unconfirmed
	d = confirm(objects.RefOf(want), intent, differ, nil, "forbidden")
	if d == nil || d.Unconfirmed != "forbidden" || len(d.Fields) != 3 {
		t.Fatalf("unconfirmed drift %+v", d)
	}
}

// TestDriftWording: what the outcome, the plan and the diff say.
func TestDriftWording(t *testing.T) {
	d := Drift{
		Objects: []DriftedObject{
			{Ref: objects.Ref{Kind: "ConfigMap", Namespace: "heal", Name: "c2-cm"}, Missing: true},
			{Ref: objects.Ref{Kind: "ConfigMap", Namespace: "heal", Name: "c2-cm2"}, Fields: []string{"data.b"}},
		},
		Kept:    []objects.Kept{{Ref: objects.Ref{Kind: "Deployment", Namespace: "heal", Name: "web"}, Path: "spec.replicas", Why: "written by kube-controller-manager through scale"}},
		Ignored: []objects.Kept{{Ref: objects.Ref{Kind: "ConfigMap", Namespace: "heal", Name: "inj"}, Path: "data.ca", Why: "drift.ignore"}},
		Unknown: []string{"Role/r in heal"},
	}
	if got, want := d.Summary("re-created"), "ConfigMap/c2-cm re-created, ConfigMap/c2-cm2 data.b"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	want := []string{
		"ConfigMap/c2-cm in heal: missing: will be re-created",
		"ConfigMap/c2-cm2 in heal: differs: data.b: will be put back",
		"kept: Deployment/web spec.replicas (written by kube-controller-manager through scale)",
		"ignored: ConfigMap/inj data.ca (drift.ignore)",
		"Role/r in heal: drift unknown (may not be read)",
	}
	if got := d.Details(); !reflect.DeepEqual(got, want) {
		t.Errorf("details\n%q\nwant\n%q", got, want)
	}
	if (Drift{Kept: d.Kept}).None() != true || d.None() || !d.Repairs() || d.Left() || d.LeftLines() != nil {
		t.Error("None, Repairs, Left")
	}
	d.Mode = spec.DriftWarn
	want = []string{
		"ConfigMap/c2-cm in heal: missing: left missing (drift mode warn)",
		"ConfigMap/c2-cm2 in heal: differs: data.b: left as it is (drift mode warn)",
	}
	if got := d.Details()[:2]; !reflect.DeepEqual(got, want) || d.Repairs() || !d.Left() {
		t.Errorf("warn: details\n%q\nwant\n%q", got, want)
	}
	want = []string{
		"drift: ConfigMap/c2-cm missing (left as it is: drift mode warn)",
		"drift: ConfigMap/c2-cm2 data.b (left as it is: drift mode warn)",
	}
	if got := d.LeftLines(); !reflect.DeepEqual(got, want) {
		t.Errorf("left lines\n%q\nwant\n%q", got, want)
	}
}

// TestSetPath: a field written at a path of managedFields' form, list
// entries found by their keys (a key the manifest leaves to its default
// matching), an entry removed.
func TestSetPath(t *testing.T) {
	u := obj(t, deployManifest)
	live := obj(t, deployLive)
	fields, err := objects.Fields(u, live)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		switch pathName(f.Path) {
		case `spec.template.spec.containers[name="sidecar"].image`:
			objects.SetPath(u.Object, f.Path, "other", true)
			if v, ok := objects.LookupPath(u.Object, f.Path); !ok || v != "other" {
				t.Errorf("set: %v %v", v, ok)
			}
			objects.SetPath(u.Object, f.Path[:len(f.Path)-1], nil, false)
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			if len(cs) != 1 || cs[0].(map[string]any)["name"] != "web" {
				t.Errorf("entry removed: %v", cs)
			}
			return
		}
	}
	t.Fatal("no sidecar image field")
}

// TestUpgradeClientOptions: khook's upgrades merge custom resources
// three-way when they apply client-side (read from Helm's own options),
// and force conflicts only where Helm allows it: server-side.
func TestUpgradeClientOptions(t *testing.T) {
	for _, tt := range []struct {
		opts []helmkube.ClientUpdateOption
		ssa  bool
	}{
		{nil, true}, // Helm's default
		{[]helmkube.ClientUpdateOption{helmkube.ClientUpdateOptionServerSideApply(false, false)}, false},
		{[]helmkube.ClientUpdateOption{helmkube.ClientUpdateOptionServerSideApply(true, true)}, true},
	} {
		got, err := updateServerSide(tt.opts)
		if err != nil || got != tt.ssa {
			t.Errorf("updateServerSide = %v, %v; want %v", got, err, tt.ssa)
		}
	}
	if _, err := updateServerSide([]helmkube.ClientUpdateOption{helmkube.ClientUpdateOptionServerSideApply(false, true)}); err == nil {
		t.Error("Helm's refusal of force conflicts with client-side apply was not seen")
	}
	for _, tt := range []struct {
		option, method string
		want           bool
	}{
		{"auto", "csa", false}, {"auto", "", false}, {"auto", "ssa", true}, {"true", "csa", true}, {"false", "ssa", false},
	} {
		up := &action.Upgrade{ServerSideApply: tt.option}
		if got := forceConflicts(up, &release.Release{ApplyMethod: tt.method}); got != tt.want {
			t.Errorf("forceConflicts(%s, %s) = %v", tt.option, tt.method, got)
		}
	}
}

// TestContained: the cheap test of no drift holds when every field the
// manifest sets holds its value live (defaults and others' fields around
// them, numbers of another Go type, an empty map the server dropped), and
// fails on anything objects.Fields would have to look at.
func TestContained(t *testing.T) {
	want := obj(t, deployManifest)
	live := obj(t, deployLive)
	unstructured.SetNestedField(live.Object, int64(1), "spec", "replicas")
	if !objects.Contained(want.Object, live.Object, true) {
		t.Error("the live Deployment holds the manifest's fields, with defaults and a label of others' around them")
	}
	if cl, err := classify(want, live, objects.Policy{}, "khook", "helm"); err != nil || len(cl.differ) != 0 || len(cl.kept) != 0 {
		t.Errorf("classify: %v %v %v", cl.differ, cl.kept, err)
	}
	for name, edit := range map[string]func(u *unstructured.Unstructured){
		"a value": func(u *unstructured.Unstructured) {
			unstructured.SetNestedField(u.Object, int64(2), "spec", "replicas")
		},
		"a label removed": func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "metadata", "labels", "app")
		},
		"a container removed": func(u *unstructured.Unstructured) {
			unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "web", "image": "busybox"}}, "spec", "template", "spec", "containers")
		},
		"containers reordered": func(u *unstructured.Unstructured) {
			unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "sidecar", "image": "pause"}, map[string]any{"name": "web", "image": "busybox"}}, "spec", "template", "spec", "containers")
		},
	} {
		l := live.DeepCopy()
		edit(l)
		if objects.Contained(want.Object, l.Object, true) {
			t.Errorf("%s: contained", name)
		}
	}
	if objects.Contained(map[string]any{"a": nil}, map[string]any{"a": "x"}, true) {
		t.Error("a null the manifest sets is contained in a value")
	}
}
