//go:build integration

package objects_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"khook.io/core/kube"
	"khook.io/core/objects"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
	"khook.io/core/waiter"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

var cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func configMap(t *testing.T, name, value string) *unstructured.Unstructured {
	return obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {v: %q}\n", name, value))
}

func setup(t *testing.T, prefix string) (*kube.Clients, string) {
	t.Helper()
	return steptest.Setup(t, prefix)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// Apply: created, unchanged, configured, client-side and server-side, the
// configured field manager on every write, and a dry run that persists
// nothing.
func TestApply(t *testing.T) {
	c, ns := setup(t, "objects-apply")
	m := objects.New(c, objects.Options{FieldManager: "ops-team"})
	for _, serverSide := range []bool{false, true} {
		name := fmt.Sprintf("cm-%v", serverSide)
		opts := objects.ApplyOptions{ServerSide: serverSide}
		steps := []struct {
			value string
			want  objects.Action
		}{{"1", objects.Created}, {"1", objects.Unchanged}, {"2", objects.Configured}}
		for _, s := range steps {
			res, err := m.Apply(ctx(t), configMap(t, name, s.value), ns, opts)
			if err != nil {
				t.Fatalf("serverSide=%v value %s: %v", serverSide, s.value, err)
			}
			if res.Action != s.want || res.Object.GetNamespace() != ns {
				t.Errorf("serverSide=%v value %s: %s in %q, want %s in %s", serverSide, s.value, res.Action, res.Object.GetNamespace(), s.want, ns)
			}
		}
		live, err := c.Resource(&meta.RESTMapping{Resource: cmGVR, Scope: meta.RESTScopeNamespace}, ns).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		managers := []string{}
		for _, f := range live.GetManagedFields() {
			managers = append(managers, f.Manager)
		}
		if !slices.Contains(managers, "ops-team") || slices.Contains(managers, objects.DefaultFieldManager) {
			t.Errorf("serverSide=%v: field managers %v, want ops-team and not %s", serverSide, managers, objects.DefaultFieldManager)
		}
		// a dry run reports what would change and persists nothing
		res, err := m.Apply(ctx(t), configMap(t, name, "3"), ns, objects.ApplyOptions{ServerSide: serverSide, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(res.Object.Object, "data", "v"); v != "3" || res.Live == nil {
			t.Errorf("serverSide=%v: dry run merged %v, live %v", serverSide, res.Object.Object["data"], res.Live)
		}
		again, err := c.Resource(res.Mapping, ns).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(again.Object, "data", "v"); v != "2" {
			t.Errorf("serverSide=%v: the dry run persisted v=%s", serverSide, v)
		}
	}
	if _, err := m.Apply(ctx(t), configMap(t, "dry-new", "1"), ns, objects.ApplyOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Typed.CoreV1().ConfigMaps(ns).Get(ctx(t), "dry-new", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a dry-run create persisted the object: %v", err)
	}
}

// EnsureNamespace: one labelling policy (decision 120), an existing
// namespace left untouched, a dry run that creates nothing, and a user who
// may neither read nor create namespaces.
func TestEnsureNamespace(t *testing.T) {
	c, existing := setup(t, "objects-ns")
	m := objects.New(c, objects.Options{})
	fresh := existing + "-new"
	t.Cleanup(func() { _ = c.Typed.CoreV1().Namespaces().Delete(context.Background(), fresh, metav1.DeleteOptions{}) })

	if ok, err := m.NamespaceExists(ctx(t), fresh); ok || err != nil {
		t.Fatalf("NamespaceExists(%s) = %v, %v before it was created", fresh, ok, err)
	}
	dry, err := m.DryRunNamespace(ctx(t), fresh)
	if err != nil {
		t.Fatal(err)
	}
	if dry.GetKind() != "Namespace" || dry.GetLabels()[objects.LabelManagedBy] != objects.ManagedBy {
		t.Errorf("dry run: %s labels %v", dry.GetKind(), dry.GetLabels())
	}
	if ok, _ := m.NamespaceExists(ctx(t), fresh); ok {
		t.Fatal("the dry run created the namespace")
	}
	created, err := m.EnsureNamespace(ctx(t), fresh)
	if err != nil || !created {
		t.Fatalf("EnsureNamespace(%s) = %v, %v", fresh, created, err)
	}
	got, err := c.Typed.CoreV1().Namespaces().Get(ctx(t), fresh, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[objects.LabelManagedBy] != objects.ManagedBy {
		t.Errorf("created namespace labels %v, want %s=%s", got.Labels, objects.LabelManagedBy, objects.ManagedBy)
	}
	if created, err := m.EnsureNamespace(ctx(t), fresh); created || err != nil {
		t.Errorf("second EnsureNamespace = %v, %v", created, err)
	}

	before, err := c.Typed.CoreV1().Namespaces().Get(ctx(t), existing, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created, err := m.EnsureNamespace(ctx(t), existing); created || err != nil {
		t.Errorf("EnsureNamespace of an existing namespace = %v, %v", created, err)
	}
	after, err := c.Typed.CoreV1().Namespaces().Get(ctx(t), existing, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("an existing namespace was modified: labels %v -> %v", before.Labels, after.Labels)
	}

	cl := testcluster.Get(t)
	limited := objects.New(steptest.Clients(t, cl.LimitedRESTConfig(t)), objects.Options{})
	if _, err := limited.NamespaceExists(ctx(t), cl.LimitedNamespace); !apierrors.IsForbidden(err) {
		t.Errorf("limited NamespaceExists: %v, want forbidden", err)
	}
	_, err = limited.EnsureNamespace(ctx(t), cl.LimitedNamespace)
	var unknown *objects.NamespaceUnknownError
	if !errors.As(err, &unknown) || !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), "namespace "+cl.LimitedNamespace+": create failed: ") {
		t.Errorf("limited EnsureNamespace: %v, want a *NamespaceUnknownError around the refusal", err)
	}
}

// Delete and WaitGone: the UID precondition spares a replacement, and the
// wait ends once the object read is gone.
func TestDeleteAndWaitGone(t *testing.T) {
	c, ns := setup(t, "objects-delete")
	m := objects.New(c, objects.Options{})
	if _, err := m.Apply(ctx(t), configMap(t, "a", "1"), ns, objects.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := m.Resolve(ctx(t), configMap(t, "a", "1"), ns)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Ref().String(); got != "ConfigMap/a in "+ns {
		t.Errorf("ref %q", got)
	}
	stale, err := m.Get(ctx(t), r)
	if err != nil {
		t.Fatal(err)
	}
	// replace it: the one read is gone, the replacement must survive
	if err := c.Typed.CoreV1().ConfigMaps(ns).Delete(ctx(t), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(ctx(t), configMap(t, "a", "2"), ns, objects.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Delete(ctx(t), r.Mapping, stale); !apierrors.IsNotFound(err) {
		t.Errorf("delete of a replaced object: %v, want NotFound", err)
	}
	live, err := m.Get(ctx(t), r)
	if err != nil {
		t.Fatalf("the replacement was deleted: %v", err)
	}
	target, err := m.Delete(ctx(t), r.Mapping, live)
	if err != nil {
		t.Fatal(err)
	}
	if target.UID != live.GetUID() || target.Name != "a" || target.Namespace != ns {
		t.Errorf("target %+v", target)
	}
	var lines []string
	if err := m.WaitGone(ctx(t), []waiter.Target{target}, func(l string) { lines = append(lines, l) }); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || lines[0] != "waiting until 1 object is gone" {
		t.Errorf("progress %q", lines)
	}
	if _, err := m.Get(ctx(t), r); !apierrors.IsNotFound(err) {
		t.Errorf("after WaitGone: %v", err)
	}
	if err := m.WaitGone(ctx(t), nil, func(string) { t.Error("progress without targets") }); err != nil {
		t.Error(err)
	}
}

// DeleteAll: custom resources before their CRD, Namespace objects kept,
// generateName and unserved kinds reported, absent objects an error
// unless ignored.
func TestDeleteAll(t *testing.T) {
	c, ns := setup(t, "objects-deleteall")
	m := objects.New(c, objects.Options{})
	for _, name := range []string{"a", "b"} {
		if _, err := m.Apply(ctx(t), configMap(t, name, "1"), ns, objects.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	objs := []*unstructured.Unstructured{
		obj(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"),
		configMap(t, "a", "1"),
		configMap(t, "b", "1"),
		configMap(t, "gone", "1"),
		obj(t, "apiVersion: v1\nkind: Pod\nmetadata: {generateName: p-}\n"),
		obj(t, "apiVersion: nothing.khook.test/v1\nkind: Nothing\nmetadata: {name: nothing}\n"),
	}
	var lines []string
	sum, err := m.DeleteAll(ctx(t), objs, objects.DeleteOptions{Namespace: ns, KeepNamespaces: true, Progress: func(l string) { lines = append(lines, l) }})
	var nf *objects.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("err %v, want a *NotFoundError", err)
	}
	wantDeleted := []string{"ConfigMap/b in " + ns, "ConfigMap/a in " + ns}
	if !slices.Equal(sum.Deleted, wantDeleted) || !slices.Equal(sum.Kept, []string{"namespace " + ns}) ||
		!slices.Equal(sum.Unnamed, []string{"Pod/p-*"}) || !slices.Equal(sum.Absent, []string{"Nothing/nothing", "ConfigMap/gone in " + ns}) {
		t.Errorf("summary %+v", sum)
	}
	if len(lines) == 0 || lines[0] != "waiting until 2 objects are gone" {
		t.Errorf("progress %q", lines)
	}
	existing, absent, err := m.Existing(ctx(t), objs[1:3], ns)
	if err != nil || len(existing) != 0 || len(absent) != 2 {
		t.Errorf("Existing after DeleteAll: %v %v %v", existing, absent, err)
	}
	if _, err := m.DeleteAll(ctx(t), objs[1:2], objects.DeleteOptions{Namespace: ns, IgnoreNotFound: true}); err != nil {
		t.Errorf("ignoreNotFound: %v", err)
	}
}

// Mapping remembers an unserved kind; Establish of a CRD applied since
// makes its kind resolvable at once.
func TestResolveAndEstablish(t *testing.T) {
	c, ns := setup(t, "objects-crd")
	m := objects.New(c, objects.Options{})
	group := fmt.Sprintf("t%06d.khook.test", rand.IntN(1_000_000))
	crd := obj(t, fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, group))
	t.Cleanup(func() {
		_ = c.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
			Delete(context.Background(), "gadgets."+group, metav1.DeleteOptions{})
	})
	gadget := obj(t, "apiVersion: "+group+"/v1\nkind: Gadget\nmetadata: {name: g}\n")
	if _, err := m.Resolve(ctx(t), gadget, ns); !meta.IsNoMatchError(err) {
		t.Fatalf("unserved kind: %v", err)
	}
	res, err := m.Apply(ctx(t), crd, "", objects.ApplyOptions{})
	if err != nil || res.Action != objects.Created {
		t.Fatalf("apply CRD: %v %v", res.Action, err)
	}
	// the kind is remembered unserved until the CRD is established
	if _, err := m.Resolve(ctx(t), gadget, ns); !meta.IsNoMatchError(err) {
		t.Fatalf("remembered unserved kind: %v", err)
	}
	if err := m.Establish(ctx(t), res, nil); err != nil {
		t.Fatal(err)
	}
	r, err := m.Resolve(ctx(t), gadget, ns)
	if err != nil {
		t.Fatalf("after Establish: %v", err)
	}
	if !r.Namespaced() || r.Object.GetNamespace() != ns {
		t.Errorf("resolved %v in %q", r.Mapping.GroupVersionKind, r.Object.GetNamespace())
	}
	if res, err := m.Apply(ctx(t), gadget, ns, objects.ApplyOptions{}); err != nil || res.Action != objects.Created {
		t.Errorf("apply custom resource: %v %v", res.Action, err)
	}
}
