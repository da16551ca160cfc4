package objects

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubectlutil "k8s.io/kubectl/pkg/util"

	"khook.io/core/manifest"
)

func decode(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	objs, err := manifest.Decode([]byte(y))
	if err != nil || len(objs) != 1 {
		t.Fatalf("decode: %v (%d objects)", err, len(objs))
	}
	return objs[0]
}

// live simulates the object as the server holds it after a client-side
// apply of applied, then changes by others.
func live(t *testing.T, applied string, others func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	o := decode(t, applied)
	if err := kubectlutil.CreateApplyAnnotation(o, unstructured.UnstructuredJSONScheme); err != nil {
		t.Fatal(err)
	}
	o.SetUID("uid-1")
	o.SetResourceVersion("7")
	if others != nil {
		others(o)
	}
	return o
}

func modified(t *testing.T, y string) []byte {
	t.Helper()
	b, err := kubectlutil.GetModifiedConfiguration(decode(t, y), true, unstructured.UnstructuredJSONScheme)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestThreeWayPatch(t *testing.T) {
	dep := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ns}\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - {name: web, image: a}\n      - {name: side, image: s}\n"
	t.Run("unchanged", func(t *testing.T) {
		typ, patch, err := ThreeWayPatch(live(t, dep, nil), modified(t, dep))
		if err != nil || string(patch) != "{}" || typ != types.StrategicMergePatchType {
			t.Fatalf("%s %s %v", typ, patch, err)
		}
	})
	t.Run("built-in kind: strategic merge, list items by key, other writers kept", func(t *testing.T) {
		l := live(t, dep, func(o *unstructured.Unstructured) {
			o.SetLabels(map[string]string{"other": "writer"})
		})
		changed := strings.Replace(dep, "image: a", "image: b", 1)
		typ, patch, err := ThreeWayPatch(l, modified(t, changed))
		if err != nil || typ != types.StrategicMergePatchType {
			t.Fatalf("%s %v", typ, err)
		}
		var p map[string]any
		if err := json.Unmarshal(patch, &p); err != nil {
			t.Fatal(err)
		}
		specPatch, _ := json.Marshal(p["spec"])
		if strings.Contains(string(patch), "other") || strings.Contains(string(specPatch), `"image":"s"`) {
			t.Errorf("patch touches what it should not: %s", patch)
		}
		if !strings.Contains(string(patch), `"$setElementOrder/containers"`) || !strings.Contains(string(patch), `"image":"b"`) {
			t.Errorf("patch is not a strategic merge of the container by name: %s", patch)
		}
	})
	t.Run("a field dropped from the manifest is removed", func(t *testing.T) {
		cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '1', b: '2'}\n"
		_, patch, err := ThreeWayPatch(live(t, cm, nil), modified(t, strings.Replace(cm, ", b: '2'", "", 1)))
		if err != nil || !strings.Contains(string(patch), `"b":null`) {
			t.Fatalf("%s %v", patch, err)
		}
	})
	t.Run("custom resource: JSON merge patch", func(t *testing.T) {
		cr := "apiVersion: x.io/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1, tags: [a, b]}\n"
		typ, patch, err := ThreeWayPatch(live(t, cr, nil), modified(t, strings.Replace(cr, "[a, b]", "[a]", 1)))
		if err != nil || typ != types.MergePatchType || !strings.Contains(string(patch), `"tags":["a"]`) {
			t.Fatalf("%s %s %v", typ, patch, err)
		}
	})
	t.Run("renamed object", func(t *testing.T) {
		cr := "apiVersion: x.io/v1\nkind: Widget\nmetadata: {name: w}\n"
		_, _, err := ThreeWayPatch(live(t, cr, nil), modified(t, strings.Replace(cr, "name: w", "name: v", 1)))
		if err == nil || !strings.Contains(err.Error(), "apiVersion, kind or name differ") {
			t.Fatalf("err %v", err)
		}
	})
}

func mapping(namespaced bool) *meta.RESTMapping {
	scope := meta.RESTScopeRoot
	if namespaced {
		scope = meta.RESTScopeNamespace
	}
	return &meta.RESTMapping{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Scope: scope}
}

func TestPrepare(t *testing.T) {
	in := decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  managedFields: [{manager: x}]\n")
	out := Prepare(in, mapping(true), "team")
	if out.GetNamespace() != "team" || out.GetManagedFields() != nil {
		t.Errorf("prepared %v", out.Object["metadata"])
	}
	if in.GetNamespace() != "" || len(in.GetManagedFields()) != 1 {
		t.Error("Prepare modified its input")
	}
	if out := Prepare(decode(t, "apiVersion: v1\nkind: X\nmetadata: {name: a, namespace: x}\n"), mapping(false), "team"); out.GetNamespace() != "" {
		t.Error("a cluster-scoped object kept a namespace")
	}
	if out := Prepare(decode(t, "apiVersion: v1\nkind: X\nmetadata: {name: a, namespace: x}\n"), mapping(true), "team"); out.GetNamespace() != "x" {
		t.Error("an object's own namespace was replaced")
	}
}

func TestConflictError(t *testing.T) {
	status := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
		Message: `Apply failed with 2 conflicts: conflicts with "helm" using v1:\n- .data.a\n- .data.b`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "helm" using v1`, Field: ".data.a"},
			{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-edit" with subresource "scale" using apps/v1`, Field: ".spec.replicas"},
		}},
	}}
	err := newConflictError(status)
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 2 {
		t.Fatalf("%v", err)
	}
	want := `server-side apply conflicts: .data.a is owned by field manager "helm" (using v1); .spec.replicas is owned by field manager "kubectl-edit" (with subresource "scale" using apps/v1); khook applies with force: false`
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message\n got %s\nwant %s...", err, want)
	}
	if !apierrors.IsConflict(err) {
		t.Error("the API status is lost")
	}
	// a conflict without field managers stays the server's error
	plain := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("the object has been modified"))
	if got := newConflictError(plain); got != error(plain) {
		t.Errorf("plain conflict became %v", got)
	}
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		total  int
		counts map[Action]int
		want   string
	}{
		{3, map[Action]int{Created: 1, Configured: 1, Unchanged: 1}, "applied 3 objects: 1 created, 1 configured, 1 unchanged"},
		{1, map[Action]int{Unchanged: 1}, "applied 1 object: 1 unchanged"},
		{2, map[Action]int{Created: 2}, "applied 2 objects: 2 created"},
	} {
		var set ChangeSet
		for _, a := range []Action{Unchanged, Configured, Created} { // the order of the set does not matter
			for range tc.counts[a] {
				set.Add(Change{Action: a})
			}
		}
		if got := set.Summary(tc.total); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestCRDHelpers(t *testing.T) {
	crd := decode(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.x.io}
spec:
  group: x.io
  names: {kind: Widget, plural: widgets}
  versions:
  - {name: v1, served: true, storage: true}
  - {name: v1beta1, served: false, storage: false}
  - {name: v2, served: true, storage: false}
`)
	if !manifest.IsCRD(crd.GroupVersionKind()) || manifest.IsNamespace(crd.GroupVersionKind()) {
		t.Fatal("kind checks")
	}
	gvs, kind := servedVersions(crd)
	if kind != "Widget" || len(gvs) != 2 || gvs[0].String() != "x.io/v1" || gvs[1].String() != "x.io/v2" {
		t.Errorf("served %v %s", gvs, kind)
	}
	if gk := CRDGroupKind(crd); gk != (schema.GroupKind{Group: "x.io", Kind: "Widget"}) {
		t.Errorf("group kind %v", gk)
	}
	if !CRDNamespaced(crd) {
		t.Error("a CRD without scope: Cluster defines a namespaced kind")
	}
	if unstructured.SetNestedField(crd.Object, "Cluster", "spec", "scope"); CRDNamespaced(crd) {
		t.Error("scope: Cluster defines a cluster-scoped kind")
	}
}
