package diff

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChangedFields: the fields a plan names for a configure, as the two
// versions part; the server's bookkeeping is not named.
func TestChangedFields(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "resourceVersion": "1", "generation": int64(1),
			"labels":        map[string]any{"app.kubernetes.io/name": "x"},
			"managedFields": []any{map[string]any{"manager": "a"}}},
		"data": map[string]any{"a": "1", "b": "2"},
		"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "image": "a"},
			map[string]any{"name": "old", "image": "b"},
		}, "args": []any{"x"}},
	}}
	merged := live.DeepCopy()
	unstructured.SetNestedField(merged.Object, "2", "metadata", "resourceVersion")
	unstructured.SetNestedField(merged.Object, int64(2), "metadata", "generation")
	unstructured.SetNestedSlice(merged.Object, []any{map[string]any{"manager": "b"}}, "metadata", "managedFields")
	unstructured.SetNestedField(merged.Object, "y", "metadata", "labels", "app.kubernetes.io/name")
	unstructured.SetNestedField(merged.Object, "3", "data", "b")
	unstructured.SetNestedField(merged.Object, "4", "data", "c")
	unstructured.SetNestedField(merged.Object, "v", "metadata", "annotations", "new")
	unstructured.SetNestedSlice(merged.Object, []any{
		map[string]any{"name": "new", "image": "c"},
		map[string]any{"name": "web", "image": "a2"},
	}, "spec", "containers")
	unstructured.SetNestedSlice(merged.Object, []any{"x", "y"}, "spec", "args")
	want := []string{
		"data.b", "data.c",
		"metadata.annotations.new",
		`metadata.labels["app.kubernetes.io/name"]`,
		"spec.args",
		"spec.containers[name=web].image", "spec.containers[name=old]", "spec.containers[name=new]",
	}
	if got := ChangedFields(live, merged); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := ChangedFields(live, live.DeepCopy()); len(got) != 0 {
		t.Errorf("unchanged: %q", got)
	}
}
