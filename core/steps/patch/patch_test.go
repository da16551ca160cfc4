package patch

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

func TestChangedBesidesStatus(t *testing.T) {
	if changedBesidesStatus([]string{".status", ".status.x"}) || !changedBesidesStatus([]string{".status.x", ".spec.y"}) {
		t.Error("changedBesidesStatus")
	}
}
