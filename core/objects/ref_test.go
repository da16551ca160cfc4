package objects

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRef(t *testing.T) {
	for _, tc := range []struct {
		name                string
		ref                 Ref
		str, kindName, path string
	}{
		{"namespaced", Ref{Kind: "Deployment", Namespace: "team", Name: "web"}, "Deployment/web in team", "Deployment/web", "Deployment team/web"},
		{"cluster-scoped", Ref{Kind: "ClusterRole", Name: "admin"}, "ClusterRole/admin", "ClusterRole/admin", "ClusterRole admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ref.String(); got != tc.str {
				t.Errorf("String = %q, want %q", got, tc.str)
			}
			if got := tc.ref.KindName(); got != tc.kindName {
				t.Errorf("KindName = %q, want %q", got, tc.kindName)
			}
			if got := tc.ref.Path(); got != tc.path {
				t.Errorf("Path = %q, want %q", got, tc.path)
			}
		})
	}
}

func TestRefOf(t *testing.T) {
	o := &unstructured.Unstructured{}
	o.SetKind("Pod")
	o.SetNamespace("ns")
	o.SetGenerateName("job-")
	if got := RefOf(o); got != (Ref{Kind: "Pod", Namespace: "ns", Name: "job-*"}) {
		t.Errorf("generateName: %+v", got)
	}
	o.SetName("job-x")
	if got := RefOf(o).String(); got != "Pod/job-x in ns" {
		t.Errorf("named: %q", got)
	}
	if got := RefFor(mapping(false), "ns", "a").String(); got != "ConfigMap/a" {
		t.Errorf("cluster-scoped mapping kept the namespace: %q", got)
	}
	if got := RefFor(mapping(true), "ns", "a").Path(); got != "ConfigMap ns/a" {
		t.Errorf("namespaced mapping: %q", got)
	}
}

func TestChangeSet(t *testing.T) {
	var set ChangeSet
	if got := set.Summary(0); got != "applied 0 objects" {
		t.Errorf("empty: %q", got)
	}
	set.Add(Change{Action: Deleted})
	set.Add(Change{Action: Created})
	if set.Count(Created) != 1 || set.Count(Deleted) != 1 || set.Count(Unchanged) != 0 {
		t.Errorf("counts: %+v", set)
	}
	if got := set.Summary(2); got != "applied 2 objects: 1 created, 1 deleted" {
		t.Errorf("summary: %q", got)
	}
}

func TestDeleteSummaryMessage(t *testing.T) {
	for _, tc := range []struct {
		s    DeleteSummary
		want string
	}{
		{DeleteSummary{}, "nothing to delete"},
		{DeleteSummary{Absent: []string{"a", "b"}}, "nothing to delete: 2 objects already gone"},
		{DeleteSummary{Deleted: []string{"a"}}, "deleted 1 object"},
		{DeleteSummary{Deleted: []string{"a", "b"}, Absent: []string{"c"}, Kept: []string{"namespace x"}}, "deleted 2 objects (1 already gone); left namespace x in place"},
		{DeleteSummary{Deleted: []string{"a"}, Unnamed: []string{"Pod/gen-*"}}, "deleted 1 object; left Pod/gen-* alone (generateName: cannot be found again)"},
	} {
		if got := tc.s.Message(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestNewNamespace(t *testing.T) {
	ns := New(nil, Options{}).newNamespace("team", nil)
	if ns.Name != "team" || ns.Labels[LabelManagedBy] != ManagedBy || len(ns.Labels) != 1 || len(ns.Annotations) != 0 {
		t.Errorf("namespace %+v", ns.ObjectMeta)
	}
	ns = New(nil, Options{CreatedBy: "boot"}).newNamespace("team", nil)
	if ns.Annotations[AnnotationCreatedBy] != "boot" || len(ns.Labels) != 1 {
		t.Errorf("namespace for a spec %+v", ns.ObjectMeta)
	}
	// a helm step's: helm's label besides the policy's, which wins
	ns = New(nil, Options{}).newNamespace("team", map[string]string{"name": "team", LabelManagedBy: "Helm"})
	if len(ns.Labels) != 2 || ns.Labels["name"] != "team" || ns.Labels[LabelManagedBy] != ManagedBy {
		t.Errorf("namespace with labels %+v", ns.ObjectMeta)
	}
}

func TestNew(t *testing.T) {
	if m := New(nil, Options{}); m.FieldManager() != DefaultFieldManager {
		t.Errorf("default field manager %q", m.FieldManager())
	}
	if m := New(nil, Options{FieldManager: "ops"}); m.FieldManager() != "ops" {
		t.Errorf("configured field manager %q", m.FieldManager())
	}
}
