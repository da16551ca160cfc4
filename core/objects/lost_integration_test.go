//go:build integration

package objects_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/kube"
	"khook.io/core/objects"
	"khook.io/core/testing/testcluster"
)

// TestRevertWhoseAnswerWasLost: destroy's revert of a ConfigMap khook
// configured (a patch carrying the resourceVersion it planned on, which
// also removes khook.io/previous) lands, and its answer is lost: the
// resend meets the revert's own Conflict, which is recognised as the
// revert's work (docs/spec.md 241). The object is given back exactly,
// not planned again from an object whose record of what khook took is
// already gone.
func TestRevertWhoseAnswerWasLost(t *testing.T) {
	direct, ns := setup(t, "objects-lost")
	link := testcluster.Get(t).NewLossyLink(t, testcluster.LossyOptions{Seed: 241})
	lossy, err := kube.NewForConfig(link.RESTConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	team := objects.New(direct, objects.Options{FieldManager: "kubectl-client-side-apply"})
	khook := objects.New(lossy, objects.Options{CreatedBy: "boot"})
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			name := fmt.Sprintf("settings-%v", serverSide)
			if _, err := team.Apply(ctx(t), obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: {team: a}}\ndata: {owner: theirs, k: before}\n", name)), ns, objects.ApplyOptions{}); err != nil {
				t.Fatal(err)
			}
			mine := []*unstructured.Unstructured{obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: {khook: added}}\ndata: {k: khook-value, added: by-khook}\n", name))}
			if _, err := khook.Apply(ctx(t), mine[0], ns, objects.ApplyOptions{ServerSide: serverSide}); err != nil {
				t.Fatal(err)
			}
			before := link.Counts().CutWrites
			link.CutNext(func(r *http.Request) bool {
				return r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/configmaps/"+name) && r.URL.Query().Get("dryRun") == ""
			})
			sum, err := khook.Undo(ctx(t), mine, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatalf("undo: %v", err)
			}
			if link.Counts().CutWrites != before+1 {
				t.Fatalf("the revert's answer was not cut: %s", link.Counts())
			}
			if len(sum.Reverted) != 1 {
				t.Errorf("summary %q, want 1 reverted", sum.Message())
			}
			cm, err := direct.Resource(cmMapping, ns).Get(ctx(t), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
			if !reflect.DeepEqual(data, map[string]string{"owner": "theirs", "k": "before"}) || !reflect.DeepEqual(cm.GetLabels(), map[string]string{"team": "a"}) {
				t.Errorf("after the revert: data %v, labels %v; want them as before khook", data, cm.GetLabels())
			}
			if _, ok := cm.GetAnnotations()["khook.io/previous"]; ok {
				t.Error("khook.io/previous is still there")
			}
		})
	}
}
