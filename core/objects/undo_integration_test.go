//go:build integration

package objects_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/objects"
	"khook.io/core/waiter"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

var cmMapping = &meta.RESTMapping{Resource: cmGVR, Scope: meta.RESTScopeNamespace}

// Undo of an object another owner created, to which khook's apply only
// added a key (the team-settings case): the object survives with the
// owner's keys and without khook's, by client-side and server-side apply;
// an object the spec created is deleted.
func TestUndoRevertsWhatKhookOnlyConfigured(t *testing.T) {
	c, ns := setup(t, "objects-undo")
	owner := c.Resource(cmMapping, ns)
	m := objects.New(c, objects.Options{CreatedBy: "boot"})
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			name := fmt.Sprintf("team-settings-%v", serverSide)
			theirs := obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s, labels: {team: a}}\ndata: {owner: theirs}\n", name, ns))
			if _, err := owner.Create(ctx(t), theirs, metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
				t.Fatal(err)
			}
			mine := obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: {khook: added}}\ndata: {added: by-khook}\n", name))
			created := configMap(t, "created-"+name, "1")
			opts := objects.ApplyOptions{ServerSide: serverSide}
			for _, o := range []*unstructured.Unstructured{mine, created} {
				if _, err := m.Apply(ctx(t), o, ns, opts); err != nil {
					t.Fatal(err)
				}
			}
			live, err := owner.Get(ctx(t), name, metav1.GetOptions{})
			if err != nil || live.GetAnnotations()[objects.AnnotationCreatedBy] != "" {
				t.Fatalf("configured object marked as created (%v): %v", err, live.GetAnnotations())
			}
			items, err := m.PlanUndo(ctx(t), []*unstructured.Unstructured{mine, created}, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			var actions []string
			for _, it := range items {
				actions = append(actions, string(it.Action))
			}
			if !slices.Equal(actions, []string{"delete", "revert"}) {
				t.Errorf("plan %v, want delete (created, last first) then revert", actions)
			}
			sum, err := m.Undo(ctx(t), []*unstructured.Unstructured{mine, created}, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			if len(sum.Deleted) != 1 || len(sum.Reverted) != 1 || !strings.Contains(sum.Message(), "reverted ConfigMap/"+name) {
				t.Errorf("summary %q", sum.Message())
			}
			if _, err := owner.Get(ctx(t), "created-"+name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("created object: %v, want it deleted", err)
			}
			live, err = owner.Get(ctx(t), name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the owner's object: %v, want it left in place", err)
			}
			data, _, _ := unstructured.NestedStringMap(live.Object, "data")
			if data["owner"] != "theirs" || data["added"] != "" || len(data) != 1 {
				t.Errorf("data %v, want only the owner's key", data)
			}
			if l := live.GetLabels(); l["team"] != "a" || l["khook"] != "" {
				t.Errorf("labels %v, want only the owner's", l)
			}
			if _, ok := live.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]; ok {
				t.Errorf("khook's last-applied annotation left: %v", live.GetAnnotations())
			}
			// a second undo finds nothing of khook's: the object is left
			items, err = m.PlanUndo(ctx(t), []*unstructured.Unstructured{mine}, objects.UndoOptions{Namespace: ns})
			if err != nil || len(items) != 1 || items[0].Action != objects.UndoLeave {
				t.Errorf("after the undo: %+v %v, want leave", items, err)
			}
		})
	}
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[1]ss.undo.khook.test}
spec:
  group: undo.khook.test
  scope: Namespaced
  names: {plural: %[1]ss, singular: %[1]s, kind: %[2]s, listKind: %[2]sList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// A CRD the spec created whose kind has a custom resource the spec did
// not create is refused, naming the count and where, before anything is
// deleted; with ForceCRDs it is deleted. A CRD with only the spec's own
// resources is deleted.
func TestUndoCRDWithForeignResources(t *testing.T) {
	c, ns := setup(t, "objects-undo-crd")
	m := objects.New(c, objects.Options{CreatedBy: "boot"})
	for _, force := range []bool{false, true} {
		kind := fmt.Sprintf("Gadget%v", force)
		plural := strings.ToLower(kind)
		crd := obj(t, fmt.Sprintf(widgetCRD, plural, kind))
		own := obj(t, fmt.Sprintf("apiVersion: undo.khook.test/v1\nkind: %s\nmetadata: {name: own}\n", kind))
		spec := []*unstructured.Unstructured{crd, own}
		for _, o := range spec {
			res, err := m.Apply(ctx(t), o, ns, objects.ApplyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Mapping.GroupVersionKind.Kind == "CustomResourceDefinition" {
				if err := m.Establish(ctx(t), res, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		// someone else's custom resource, written by another manager
		other := objects.New(c, objects.Options{FieldManager: "team-b"})
		foreign := obj(t, fmt.Sprintf("apiVersion: undo.khook.test/v1\nkind: %s\nmetadata: {name: theirs}\n", kind))
		if _, err := other.Apply(ctx(t), foreign, ns, objects.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		crdName := plural + "s.undo.khook.test"
		// the caller spells the setting that forces it (the CLI: its flag)
		_, err := m.Undo(ctx(t), spec, objects.UndoOptions{Namespace: ns, ForceCRDs: force, ForceCRDsSetting: "--force-crds"})
		var refused *objects.RefusedError
		if !force {
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), "1 custom resource") || !strings.Contains(err.Error(), ns+"/theirs") || !strings.HasSuffix(err.Error(), "; --force-crds deletes it anyway") {
				t.Fatalf("undo: %v, want a refusal naming 1 custom resource in %s and --force-crds", err, ns)
			}
			// refused before any write: the spec's own resource is still there
			items, _ := m.PlanUndo(ctx(t), spec[1:], objects.UndoOptions{Namespace: ns})
			if len(items) != 1 || items[0].Action != objects.UndoDelete {
				t.Errorf("after the refusal the spec's resource is %+v, want it untouched", items)
			}
			// the foreign resource goes: the CRD has only the spec's own now
			mapping, err := m.Mapping(ctx(t), foreign.GroupVersionKind())
			if err != nil {
				t.Fatal(err)
			}
			live, err := m.Client(mapping, ns).Get(ctx(t), "theirs", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			target, err := m.Delete(ctx(t), mapping, live)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.WaitGone(ctx(t), []waiter.Target{target}, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Undo(ctx(t), spec, objects.UndoOptions{Namespace: ns}); err != nil {
				t.Fatalf("undo of a CRD with only the spec's resources: %v", err)
			}
		} else if err != nil {
			t.Fatalf("undo with ForceCRDs: %v", err)
		}
		if _, err := c.Dynamic.Resource(crdGVR).Get(ctx(t), crdName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("CRD %s: %v, want it deleted", crdName, err)
		}
	}
}

// An object a khook from before the created-by mark created carries no
// mark: destroy deletes it when khook is the only writer of its content
// (controllers' metadata and status aside), and reverts it when anyone
// else wrote any of it.
func TestUndoUnmarkedObjectsOfAnEarlierKhook(t *testing.T) {
	c, ns := setup(t, "objects-unmarked")
	cms := c.Resource(cmMapping, ns)
	old := objects.New(c, objects.Options{}) // an earlier khook: no mark
	m := objects.New(c, objects.Options{CreatedBy: "boot"})
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			opts := objects.ApplyOptions{ServerSide: serverSide}
			alone := configMap(t, fmt.Sprintf("alone-%v", serverSide), "1")
			shared := configMap(t, fmt.Sprintf("shared-%v", serverSide), "1")
			for _, o := range []*unstructured.Unstructured{alone, shared} {
				if _, err := old.Apply(ctx(t), o, ns, opts); err != nil {
					t.Fatal(err)
				}
			}
			// a controller's annotation on alone; another writer's key on
			// shared
			if _, err := cms.Patch(ctx(t), alone.GetName(), types.MergePatchType, []byte(`{"metadata":{"annotations":{"controller/seen":"yes"}}}`), metav1.PatchOptions{FieldManager: "a-controller"}); err != nil {
				t.Fatal(err)
			}
			if _, err := cms.Patch(ctx(t), shared.GetName(), types.MergePatchType, []byte(`{"data":{"theirs":"x"}}`), metav1.PatchOptions{FieldManager: "team-b"}); err != nil {
				t.Fatal(err)
			}
			items, err := m.PlanUndo(ctx(t), []*unstructured.Unstructured{alone, shared}, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]objects.UndoAction{}
			for _, it := range items {
				got[it.Ref] = it.Action
			}
			want := map[string]objects.UndoAction{"ConfigMap/" + alone.GetName() + " in " + ns: objects.UndoDelete, "ConfigMap/" + shared.GetName() + " in " + ns: objects.UndoRevert}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("plan %v, want %v", got, want)
			}
		})
	}
}
