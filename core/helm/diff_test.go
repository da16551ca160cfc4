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

// A release manifest is split as every manifest source is; a problem
// names the template it comes from.
func TestDecodeManifest(t *testing.T) {
	text := "---\n# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n--- # a comment\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"
	objs, err := decodeManifest(text)
	if err != nil || len(objs) != 2 || objs[1].GetName() != "b" {
		t.Fatalf("objects %v, error %v; want a and b", objs, err)
	}
	text += "---\n# Source: c/templates/b.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n...\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\n"
	_, err = decodeManifest(text)
	want := `c/templates/b.yaml: document 3: content after the document end marker "..." at line 15: kubectl would read only the document before it and silently drop the rest; separate documents with "---"`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
}
