package helm

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func u(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

// TestPairObjects: rendered objects keep Helm's order, each with its
// current version when there is one (matched by group, kind, namespace
// and name, not version); objects only the current revision has (an
// upgrade deletes them) follow; hooks are named as such.
func TestPairObjects(t *testing.T) {
	cur := []*unstructured.Unstructured{
		u("v1", "ConfigMap", "ns", "dropped"),
		u("apps/v1beta2", "Deployment", "ns", "web"),
		u("v1", "ConfigMap", "ns", "kept"),
	}
	rendered := []*unstructured.Unstructured{
		u("v1", "ConfigMap", "ns", "kept"),
		u("v1", "ConfigMap", "other", "kept"),
		u("apps/v1", "Deployment", "ns", "web"),
		u("rbac.authorization.k8s.io/v1", "ClusterRole", "", "new"),
	}
	got := pair(cur, rendered, false)
	var lines []string
	for _, o := range got {
		lines = append(lines, o.Name()+" current="+present(o.Current)+" rendered="+present(o.Rendered))
	}
	want := []string{
		"ConfigMap ns/kept current=v1 rendered=v1",
		"ConfigMap other/kept current=- rendered=v1",
		"Deployment ns/web current=apps/v1beta2 rendered=apps/v1",
		"ClusterRole new current=- rendered=rbac.authorization.k8s.io/v1",
		"ConfigMap ns/dropped current=v1 rendered=-",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	hooks := pair(nil, []*unstructured.Unstructured{u("batch/v1", "Job", "ns", "migrate")}, true)
	if len(hooks) != 1 || hooks[0].Name() != "Job ns/migrate (hook)" || hooks[0].Current != nil {
		t.Errorf("hooks: %+v", hooks)
	}
}

func present(o *unstructured.Unstructured) string {
	if o == nil {
		return "-"
	}
	return o.GetAPIVersion()
}
