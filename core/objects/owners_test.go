package objects

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
	"sigs.k8s.io/yaml"

	"khook.io/core/spec"
)

func policyOf(t *testing.T, y string) Policy {
	t.Helper()
	var d spec.Drift
	if err := yaml.Unmarshal([]byte(y), &d); err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(&d)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// owned is live with managedFields entries: manager, subresource and
// fields (FieldsV1 JSON).
func owned(u *unstructured.Unstructured, entries ...[3]string) *unstructured.Unstructured {
	var mf []metav1.ManagedFieldsEntry
	for _, e := range entries {
		mf = append(mf, metav1.ManagedFieldsEntry{Manager: e[0], Operation: metav1.ManagedFieldsOperationUpdate, Subresource: e[1], APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(e[2])}})
	}
	u.SetManagedFields(mf)
	return u
}

// TestJudge: whose a differing field is, by its owners, under policies.
func TestJudge(t *testing.T) {
	f := func(owners ...Owner) Field { return Field{Owners: owners} }
	tests := []struct {
		name   string
		policy string
		field  Field
		keep   bool
		why    string
	}{
		{"nobody's: drift", "", f(), false, ""},
		{"still khook's: drift", "", f(Owner{Manager: "khook"}, Owner{Manager: "cainjector"}), false, ""},
		{"a person's (kubectl edit)", "", f(Owner{Manager: "kubectl-edit"}), false, "written by kubectl-edit"},
		{"a person's (kubectl apply --server-side)", "", f(Owner{Manager: "kubectl"}), false, "written by kubectl"},
		{"from before managed fields", "", f(Owner{Manager: "before-first-apply"}), false, "written by before-first-apply"},
		{"a controller's", "", f(Owner{Manager: "cainjector"}), true, "written by cainjector"},
		{"through a subresource, even a person's", "", f(Owner{Manager: "kubectl-scale", Subresource: "scale"}), true, "written by kubectl-scale through scale"},
		{"managers.take of a controller", "managers: {take: [cain*]}", f(Owner{Manager: "cainjector"}), false, "written by cainjector, taken back by managers.take"},
		{"managers.keep of a person", "managers: {keep: [kubectl-edit]}", f(Owner{Manager: "kubectl-edit"}), true, "written by kubectl-edit, kept by managers.keep"},
		{"a person and a controller: the controller keeps it", "", f(Owner{Manager: "kubectl-edit"}, Owner{Manager: "operator"}), true, "written by operator"},
		{"managers.take beats a default keep", "managers: {take: [kubectl-edit]}", f(Owner{Manager: "kubectl-edit"}, Owner{Manager: "operator"}), false, "written by kubectl-edit, taken back by managers.take"},
		{"managers.keep beats managers.take", "managers: {take: [a], keep: [b]}", f(Owner{Manager: "a"}, Owner{Manager: "b"}), true, "written by b, kept by managers.keep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := policyOf(t, tt.policy).Judge(tt.field, "khook")
			if v.Keep != tt.keep || v.Why != tt.why {
				t.Errorf("keep %v why %q, want %v %q", v.Keep, v.Why, tt.keep, tt.why)
			}
		})
	}
}

// TestIgnoredPointers: JSON pointers name a field or a field above it,
// list entries by their index in the manifest, "*" any token, ~1 a "/";
// a target narrows the rule to objects by kind, name glob, namespace and
// the manifest's labels.
func TestIgnoredPointers(t *testing.T) {
	intent := decode(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}, annotations: {example.com/a: x}}
spec:
  replicas: 1
  template:
    spec:
      containers: [{name: a, image: x}, {name: b, image: img-b}]
`)
	path := func(s string) fieldpath.Path {
		var out fieldpath.Path
		for _, part := range strings.Split(s, " ") {
			if name, key, ok := strings.Cut(part, "="); ok {
				out = append(out, fieldpath.PathElement{Key: &value.FieldList{{Name: name, Value: value.NewValueInterface(key)}}})
				continue
			}
			part := part
			out = append(out, fieldpath.PathElement{FieldName: &part})
		}
		return out
	}
	tests := []struct {
		rule  string
		field string
		want  bool
	}{
		{"ignore: [{paths: [/spec/replicas]}]", "spec replicas", true},
		{"ignore: [{paths: [/spec]}]", "spec replicas", true},
		{"ignore: [{paths: [/spec/replicas/x]}]", "spec replicas", false},
		{"ignore: [{paths: [/spec/template/spec/containers/1/image]}]", "spec template spec containers name=b image", true},
		{"ignore: [{paths: [/spec/template/spec/containers/0/image]}]", "spec template spec containers name=b image", false},
		{"ignore: [{paths: [/spec/template/spec/containers/*/image]}]", "spec template spec containers name=b image", true},
		{"ignore: [{paths: [/metadata/annotations/example.com~1a]}]", "metadata annotations example.com/a", true},
		{"ignore: [{paths: [/spec/replicas], target: {kind: Deployment, name: w*, namespace: shop, labelSelector: app=web}}]", "spec replicas", true},
		{"ignore: [{paths: [/spec/replicas], target: {labelSelector: app=db}}]", "spec replicas", false},
		{"ignore: [{paths: [/spec/replicas], target: {group: apps}}]", "spec replicas", true},
		{"ignore: [{paths: [/spec/replicas], target: {group: \"\", kind: Deployment}}]", "spec replicas", true},
		{"ignore: [{paths: [/spec/replicas], target: {kind: StatefulSet}}]", "spec replicas", false},
	}
	for _, tt := range tests {
		if got := policyOf(t, tt.rule).Ignored(intent, path(tt.field)); got != tt.want {
			t.Errorf("%s on %s: %v, want %v", tt.rule, tt.field, got, tt.want)
		}
	}
}

// TestLeaveOut: the fields a write leaves out are taken out of a
// client-side apply's patch, strategic (list entries by their merge
// keys, an entry left with its keys only dropped, with the list's
// order) or JSON merge; a patch left with nothing is "{}".
func TestLeaveOut(t *testing.T) {
	live := owned(decode(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers: [{name: a, image: theirs}, {name: b, image: img-b2}]
`))
	intent := decode(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers: [{name: a, image: x}, {name: b, image: img-b}]
`)
	fields, err := Fields(intent, live)
	if err != nil {
		t.Fatal(err)
	}
	var imageA, imageB fieldpath.Path
	for _, f := range fields {
		switch f.Path.String() {
		case `.spec.template.spec.containers[name="a"].image`:
			imageA = f.Path
		case `.spec.template.spec.containers[name="b"].image`:
			imageB = f.Path
		}
	}
	patch := `{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"a"},{"name":"b"}],"containers":[{"image":"x","name":"a"},{"image":"img-b","name":"b"}]}}}}`
	got, err := leaveOut([]byte(patch), []fieldpath.Path{imageA})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"a"},{"name":"b"}],"containers":[{"image":"img-b","name":"b"}]}}}}`; string(got) != want {
		t.Errorf("one image left out:\n%s\nwant\n%s", got, want)
	}
	got, err = leaveOut([]byte(patch), []fieldpath.Path{imageA, imageB})
	if err != nil || string(got) != "{}" {
		t.Errorf("both left out: %s %v", got, err)
	}
	ca := fieldpath.MakePathOrDie("data", "ca")
	got, err = leaveOut([]byte(`{"data":{"ca":"placeholder","mode":"strict"}}`), []fieldpath.Path{ca})
	if want := `{"data":{"mode":"strict"}}`; err != nil || string(got) != want {
		t.Errorf("merge patch: %s %v, want %s", got, err, want)
	}
	got, err = leaveOut([]byte(`{"data":{"ca":"placeholder"},"metadata":{"annotations":{"x":"y"}}}`), []fieldpath.Path{ca})
	if want := `{"metadata":{"annotations":{"x":"y"}}}`; err != nil || string(got) != want {
		t.Errorf("merge patch: %s %v, want %s", got, err, want)
	}
}

// TestSort: an apply's fields of an existing object, sorted: a
// controller's kept, a person's put back (repair) or left and reported
// (warn), ignored ones left, ours written, nulls not set; a field whose
// value the spec changed since the last apply is written.
func TestSort(t *testing.T) {
	intent := decode(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: inj, annotations: }
data: {ca: placeholder, mode: strict, level: info, extra: new}
`)
	live := owned(decode(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: inj, annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"}}
data: {ca: real, mode: lax, level: debug}
`), [3]string{"khook", "", `{"f:data":{"f:level":{}}}`}, [3]string{"cainjector", "", `{"f:data":{"f:ca":{}}}`}, [3]string{"kubectl-edit", "", `{"f:data":{"f:mode":{}}}`})
	for _, tc := range []struct {
		policy          string
		kept, ign, left []string
		leave           int
	}{
		{"", []string{"ConfigMap/inj data.ca (written by cainjector)"}, nil, nil, 1},
		{"mode: warn", []string{"ConfigMap/inj data.ca (written by cainjector)"}, nil, []string{"data.mode"}, 2},
		{"ignore: [{paths: [/data/ca, /data/level]}]", nil, []string{"ConfigMap/inj data.ca (drift.ignore)"}, nil, 1},
	} {
		s, err := policyOf(t, tc.policy).Sort(intent, nil, live, "khook")
		if err != nil {
			t.Fatal(err)
		}
		var kept, ign []string
		for _, k := range s.Kept {
			kept = append(kept, k.String())
		}
		for _, k := range s.Ignored {
			ign = append(ign, k.String())
		}
		if !reflect.DeepEqual(kept, tc.kept) || !reflect.DeepEqual(ign, tc.ign) || !reflect.DeepEqual(s.Left, tc.left) || len(s.Leave) != tc.leave {
			t.Errorf("%q: kept %q ignored %q left %q leave %v", tc.policy, kept, ign, s.Left, s.Leave)
		}
	}
	// what the step applied last had another ca and mode: the spec
	// changed them, so they are written whoever wrote them since
	previous := decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: inj}\ndata: {ca: old, mode: old, level: info}\n")
	s, err := policyOf(t, "mode: warn").Sort(intent, previous, live, "khook")
	if err != nil || len(s.Kept)+len(s.Left)+len(s.Leave) != 0 {
		t.Errorf("spec changes sorted as drift: %+v %v", s, err)
	}
}
