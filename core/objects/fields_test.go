package objects

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"
)

func yamlObj(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// describeFields prints each field on one line: path, key field, intent, live
// (or "missing"), equal, owners.
func describeFields(fields []Field) string {
	var b strings.Builder
	for _, f := range fields {
		live := "missing"
		if f.InLive {
			live = fmt.Sprintf("%v", f.Live)
		}
		var owners []string
		for _, o := range f.Owners {
			s := o.Manager + "/" + string(o.Operation)
			if o.Subresource != "" {
				s += "/" + o.Subresource
			}
			owners = append(owners, s)
		}
		fmt.Fprintf(&b, "%s key=%v intent=%v live=%s equal=%v owners=%s\n", f, f.KeyField(), f.Intent, live, f.Equal, strings.Join(owners, ","))
	}
	return b.String()
}

const deployIntent = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team
  labels: {team: a}
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}", note: khook}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:2
        ports: [{containerPort: 80}]
        args: [serve, --port=80]
        resources: {limits: {cpu: 1000m}}
status: {replicas: 3}
`

const deployLive = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team
  uid: 1
  resourceVersion: "7"
  labels: {team: a, other: x}
  managedFields:
  - manager: team-a
    operation: Update
    apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata":{"f:labels":{".":{},"f:team":{},"f:other":{}}},"f:spec":{"f:selector":{},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}}}}}}}}
  - manager: khook
    operation: Update
    apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata":{"f:annotations":{".":{},"f:note":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:image":{},"f:args":{}}}}}}}
  - manager: kubectl
    operation: Update
    subresource: scale
    apiVersion: autoscaling/v1
    fieldsType: FieldsV1
    fieldsV1: {"f:spec":{"f:replicas":{}}}
  - manager: kube-controller-manager
    operation: Update
    subresource: status
    apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1: {"f:status":{"f:replicas":{}}}
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}", note: khook}
spec:
  replicas: 5
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:2
        ports: [{containerPort: 80, protocol: TCP}]
        args: [serve, --port=80]
        resources: {limits: {cpu: "1"}}
status: {replicas: 5}
`

// A built-in kind: lists merged by key are matched entry by entry (a
// port's protocol, a key server-side apply defaults, included), atomic
// maps (a selector) and lists (args) are one field, the name, the
// bookkeeping annotation and status are not fields; each field has its
// live value, whether it equals the intent's and the entries of
// managedFields that hold it, a subresource's included.
func TestFieldsBuiltIn(t *testing.T) {
	fields, err := Fields(yamlObj(t, deployIntent), yamlObj(t, deployLive))
	if err != nil {
		t.Fatal(err)
	}
	want := `.metadata.annotations.note key=false intent=khook live=khook equal=true owners=khook/Update
.metadata.labels.team key=false intent=a live=a equal=true owners=team-a/Update
.spec.replicas key=false intent=3 live=5 equal=false owners=kubectl/Update/scale
.spec.selector key=false intent=map[matchLabels:map[app:web]] live=map[matchLabels:map[app:web]] equal=true owners=team-a/Update
.spec.template.metadata.labels.app key=false intent=web live=web equal=true owners=team-a/Update
.spec.template.spec.containers[name="web"].args key=false intent=[serve --port=80] live=[serve --port=80] equal=true owners=khook/Update
.spec.template.spec.containers[name="web"].image key=false intent=nginx:2 live=nginx:2 equal=true owners=khook/Update
.spec.template.spec.containers[name="web"].name key=true intent=web live=web equal=true owners=team-a/Update
.spec.template.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].containerPort key=true intent=80 live=80 equal=true owners=team-a/Update
.spec.template.spec.containers[name="web"].resources.limits.cpu key=false intent=1000m live=1 equal=false owners=
`
	if got := describeFields(fields); got != want {
		t.Errorf("fields:\n%s\nwant:\n%s", got, want)
	}
	byPath := map[string]Field{}
	for _, f := range fields {
		byPath[f.String()] = f
	}
	replicas := byPath[".spec.replicas"]
	if replicas.Drifted("khook") || len(replicas.ThroughSubresource("khook")) != 1 {
		t.Errorf("replicas owned through scale by another manager: drifted %v", replicas.Drifted("khook"))
	}
	if cpu := byPath[`.spec.template.spec.containers[name="web"].resources.limits.cpu`]; !cpu.Drifted("khook") {
		t.Error("a changed field nobody owns through a subresource is drift")
	}
	if img := byPath[`.spec.template.spec.containers[name="web"].image`]; img.Drifted("khook") || !img.OwnedBy("khook") || len(img.OtherOwners("khook")) != 0 {
		t.Errorf("image: %+v", img)
	}
	// the paths are managedFields' own: an entry's set holds them
	set, err := ManagedSet(yamlObj(t, deployLive), "team-a", metav1.ManagedFieldsOperationUpdate)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{`.spec.template.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].containerPort`, ".spec.selector"} {
		if !set.Has(byPath[p].Path) {
			t.Errorf("team-a's managed set lacks %s:\n%s", p, set)
		}
	}
}

// A kind outside client-go's scheme (a custom resource) is read as the
// API server reads one without a schema: maps field by field, lists
// atomic. Values compare as JSON (3 equals 3.0); an intent's null sets
// nothing (the API server drops it), whatever the live object holds
// there; a missing live object leaves every field missing.
func TestFieldsCustomResource(t *testing.T) {
	intent := yamlObj(t, `apiVersion: example.com/v1
kind: Widget
metadata: {name: w, finalizers: [example.com/a]}
spec:
  size: 3
  gone: null
  items: [{name: a, v: 1}]
  nested: {deep: {x: "1"}}
`)
	live := yamlObj(t, `apiVersion: example.com/v1
kind: Widget
metadata: {name: w, finalizers: [example.com/a]}
spec:
  size: 3.0
  gone: someone's
  items: [{name: a, v: 2}]
  nested: {deep: {x: "1", y: "2"}}
`)
	fields, err := Fields(intent, live)
	if err != nil {
		t.Fatal(err)
	}
	want := `.metadata.finalizers key=false intent=[example.com/a] live=[example.com/a] equal=true owners=
.spec.items key=false intent=[map[name:a v:1]] live=[map[name:a v:2]] equal=false owners=
.spec.nested.deep.x key=false intent=1 live=1 equal=true owners=
.spec.size key=false intent=3 live=3 equal=true owners=
`
	if got := describeFields(fields); got != want {
		t.Errorf("fields:\n%s\nwant:\n%s", got, want)
	}
	fields, err = Fields(intent, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if f.InLive || (f.Equal != (f.Intent == nil)) {
			t.Errorf("%s without a live object: in live %v, equal %v", f, f.InLive, f.Equal)
		}
	}
}

// The last-applied annotation read as an intent; finalizers of a
// built-in kind are a set, element by element.
func TestFieldsOfLastApplied(t *testing.T) {
	live := yamlObj(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  finalizers: [example.com/a, example.com/b]
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","finalizers":["example.com/a"]},"data":{"k":"khook","gone":"x"}}'
  managedFields:
  - {manager: other, operation: Apply, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {"f:data":{"f:k":{}}}}
data: {k: theirs}
`)
	intent, err := LastApplied(live)
	if err != nil || intent == nil {
		t.Fatalf("last applied: %v %v", intent, err)
	}
	fields, err := Fields(intent, live)
	if err != nil {
		t.Fatal(err)
	}
	want := `.data.gone key=false intent=x live=missing equal=false owners=
.data.k key=false intent=khook live=theirs equal=false owners=other/Apply
.metadata.finalizers[="example.com/a"] key=false intent=example.com/a live=example.com/a equal=true owners=
`
	if got := describeFields(fields); got != want {
		t.Errorf("fields:\n%s\nwant:\n%s", got, want)
	}
	if f := fields[1]; !f.Drifted("khook") || f.ThroughSubresource("khook") != nil {
		t.Errorf("another manager's Apply on the object itself is drift: %+v", f)
	}
	if got, err := LastApplied(yamlObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")); got != nil || err != nil {
		t.Errorf("no annotation: %v %v", got, err)
	}
}

// holds: the field itself, a field under it; not a field above it (a
// map's own entry, {".": {}}, reads as an atomic field would).
func TestHolds(t *testing.T) {
	s := fieldpath.NewSet(
		fieldpath.MakePathOrDie("spec", "selector"),
		fieldpath.MakePathOrDie("spec", "list", fieldpath.KeyByFields("name", "a"), "v"),
	)
	for _, c := range []struct {
		path []any
		want bool
	}{
		{[]any{"spec", "selector"}, true},
		{[]any{"spec", "selector", "matchLabels", "app"}, false}, // a member above
		{[]any{"spec", "list"}, true},                            // keyed below
		{[]any{"spec", "other"}, false},
		{[]any{"spec"}, true},
		{[]any{"metadata", "labels"}, false},
	} {
		if got := holds(s, fieldpath.MakePathOrDie(c.path...)); got != c.want {
			t.Errorf("holds %v = %v, want %v", c.path, got, c.want)
		}
	}
}

// BenchmarkFields: one Deployment intent against its live object (the
// schema parser is built once, on the first call, outside the loop).
func BenchmarkFields(b *testing.B) {
	var intent, live map[string]any
	if err := yaml.Unmarshal([]byte(deployIntent), &intent); err != nil {
		b.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(deployLive), &live); err != nil {
		b.Fatal(err)
	}
	i, l := &unstructured.Unstructured{Object: intent}, &unstructured.Unstructured{Object: live}
	if _, err := Fields(i, l); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Fields(i, l); err != nil {
			b.Fatal(err)
		}
	}
}
