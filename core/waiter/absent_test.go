package waiter

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"

	"khook.io/core/kube"
)

// TestConfirmAbsent: a named target whose gone-judgement would take it as
// never there is read from the API server first (a watch's first list may
// lag a create that has just returned). Pure logic over a fake client:
// the not-found answer is proven on the test cluster
// (TestDeletedTargetsJudgedByTheirFinalState's "never").
func TestConfirmAbsent(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	mapping := &meta.RESTMapping{Resource: gvr, GroupVersionKind: gvr.GroupVersion().WithKind("ConfigMap"), Scope: meta.RESTScopeNamespace}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "there", "namespace": "ns"}, "data": map[string]any{"state": "running"}}}
	for _, tc := range []struct {
		name, target string
		failGet      bool
		wantDeleted  bool   // the gone-judgement ran
		wantCurrent  string // what the wait shows as pending ("" when nothing is)
	}{
		{name: "behind the watch cache, there", target: "there", wantCurrent: "running"},
		{name: "not there", target: "gone", wantDeleted: true},
		{name: "unreadable", target: "gone", failGet: true, wantCurrent: "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"}, cm.DeepCopy())
			if tc.failGet {
				client.PrependReactor("get", "configmaps", func(ktesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			}
			deleted := false
			tg := Target{Mapping: mapping, Namespace: "ns", Name: tc.target, Deleted: func(*unstructured.Unstructured) (bool, string, error) {
				deleted = true
				return true, "", nil
			}}
			opts := Options{Targets: []Target{tg}, Check: func(u *unstructured.Unstructured) (bool, string, error) {
				s, _, _ := unstructured.NestedString(u.Object, "data", "state")
				return false, s, nil
			}}
			w := &waiting{ctx: context.Background(), c: &kube.Clients{Dynamic: client}, opts: opts, absent: map[int]bool{}}
			found := []targetObjects{{t: tg, subject: "ConfigMap ns/" + tc.target}}
			w.confirmAbsent(found)
			ev, err := evaluate(found, opts)
			if err != nil {
				t.Fatal(err)
			}
			if deleted != tc.wantDeleted {
				t.Errorf("gone-judgement ran: %v, want %v", deleted, tc.wantDeleted)
			}
			cur := ""
			if len(ev.pending) > 0 {
				cur = ev.pending[0].current
			}
			if cur != tc.wantCurrent {
				t.Errorf("pending %q, want %q", cur, tc.wantCurrent)
			}
			if tc.wantDeleted && !w.absent[0] {
				t.Error("a target the server says is gone is read again at the next look")
			}
		})
	}
}
