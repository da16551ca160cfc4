package patch

import (
	"reflect"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func TestChangedFields(t *testing.T) {
	before := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "x", "resourceVersion": "1", "generation": int64(1), "labels": map[string]any{"a": "1"}},
		"spec":     map[string]any{"replicas": int64(1), "list": []any{"a"}, "same": "s"},
	}}
	after := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "x", "resourceVersion": "2", "generation": int64(2), "labels": map[string]any{"a": "1", "b": "2"}},
		"spec":     map[string]any{"replicas": int64(3), "list": []any{"a", "b"}, "same": "s"},
	}}
	want := []string{".metadata.labels.b", ".spec.list", ".spec.replicas"}
	if got := ChangedFields(before, after); !reflect.DeepEqual(got, want) {
		t.Errorf("ChangedFields = %v, want %v", got, want)
	}
	if got := ChangedFields(before, before); len(got) != 0 {
		t.Errorf("ChangedFields of one object = %v", got)
	}
	if before.GetResourceVersion() != "1" {
		t.Error("ChangedFields modified its input")
	}
}

func TestNamedPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  types.PatchType
		body string
		want []string
	}{
		{"strategic leaves", types.StrategicMergePatchType,
			`{"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"main","image":"x:2"}]}}}}`,
			[]string{".spec.replicas", ".spec.template.spec.containers"}},
		{"strategic directives name their map", types.StrategicMergePatchType,
			`{"spec":{"$retainKeys":["type"],"type":"Recreate"},"metadata":{"$setElementOrder/finalizers":["a"]}}`,
			[]string{".metadata", ".spec", ".spec.type"}},
		{"merge null and empty map", types.MergePatchType,
			`{"metadata":{"labels":{"gone":null}},"spec":{"volume":{}}}`,
			[]string{".metadata.labels.gone", ".spec.volume"}},
		{"annotation keys keep their dots", types.MergePatchType,
			`{"metadata":{"annotations":{"example.com/team":"a"}}}`,
			[]string{".metadata.annotations.example.com/team"}},
		{"json operations but test, from included", types.JSONPatchType,
			`[{"op":"test","path":"/spec/x","value":1},{"op":"replace","path":"/spec/replicas","value":2},{"op":"move","from":"/metadata/labels/a","path":"/metadata/labels/b"},{"op":"add","path":"/metadata/annotations/example.com~1team","value":"a"}]`,
			[]string{".metadata.annotations.example.com/team", ".metadata.labels.a", ".metadata.labels.b", ".spec.replicas"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths, err := namedPaths(tc.typ, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range paths {
				got = append(got, p.String())
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("namedPaths = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPatchChanged: a patch changed the object when a field it names
// changed; a controller's writes elsewhere between the read and the patch
// (a Deployment's revision annotation, its status) are not the patch's.
func TestPatchChanged(t *testing.T) {
	obj := func(image, revision string, ready int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "web", "annotations": map[string]any{"deployment.kubernetes.io/revision": revision}},
			"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": image}}}}},
			"status":   map[string]any{"readyReplicas": ready},
		}}
	}
	containers, err := namedPaths(types.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"x:2"}]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	annotation, err := namedPaths(types.MergePatchType, []byte(`{"metadata":{"annotations":{"deployment.kubernetes":"n"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		named     []fieldPath
		live, out *unstructured.Unstructured
		want      bool
	}{
		{"the patched field changed", containers, obj("x:1", "1", 1), obj("x:2", "1", 1), true},
		{"only a controller wrote meanwhile", containers, obj("x:2", "1", 0), obj("x:2", "2", 1), false},
		{"nothing changed", containers, obj("x:2", "2", 1), obj("x:2", "2", 1), false},
		{"an annotation whose key extends the named key past a dot is another field", annotation, obj("x:2", "1", 1), obj("x:2", "2", 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := patchChanged(tc.named, tc.live, tc.out); got != tc.want {
				t.Errorf("patchChanged = %v, want %v", got, tc.want)
			}
		})
	}
}
