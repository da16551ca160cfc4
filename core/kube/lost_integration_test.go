//go:build integration

package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/kube"
	"khook.io/core/testing/testcluster"
)

// Writes whose answers the lossy link cuts after the API server acted on
// them, through khook's clients on the test cluster: the typed clientsets
// (protobuf) and the dynamic client (JSON) each see the answer the write
// would have had, as the resend rule finds the write's own work; the
// server holds what was written once.
func TestLostAnswersOnTheCluster(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t, "lost")
	link := c.NewLossyLink(t, testcluster.LossyOptions{Seed: 36})
	clients, err := kube.NewForConfig(link.RESTConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := kubernetes.NewForConfig(c.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	leases := clients.Typed.CoordinationV1().Leases(ns)
	cut := func(t *testing.T, suffix string) {
		t.Helper()
		before := link.Counts().CutWrites
		link.CutNext(testcluster.WriteTo(suffix))
		t.Cleanup(func() {
			if link.Counts().CutWrites != before+1 {
				t.Errorf("the link cut %d answers of writes, want 1", link.Counts().CutWrites-before)
			}
		})
	}

	holder := "run-1"
	var lease *coordinationv1.Lease
	t.Run("a typed (protobuf) Lease create", func(t *testing.T) {
		cut(t, "/leases")
		lease, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{FieldManager: "khook"})
		if err != nil {
			t.Fatalf("the create whose answer was lost: %v", err)
		}
	})
	t.Run("a conditional update of the Lease (a renewal)", func(t *testing.T) {
		cut(t, "/leases/lock")
		now := metav1.NowMicro()
		lease.Spec.RenewTime = &now
		updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: "khook"})
		if err != nil {
			t.Fatalf("the update whose answer was lost: %v", err)
		}
		if updated.ResourceVersion == lease.ResourceVersion {
			t.Errorf("the answer is the Lease before the update")
		}
		lease = updated
	})
	t.Run("a conditional Lease delete", func(t *testing.T) {
		cut(t, "/leases/lock")
		err := leases.Delete(ctx, "lock", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}})
		if err != nil {
			t.Fatalf("the delete whose answer was lost: %v", err)
		}
		if _, err := direct.CoordinationV1().Leases(ns).Get(ctx, "lock", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Lease is still there: %v", err)
		}
	})

	cms := clients.Dynamic.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(ns)
	t.Run("a dynamic (JSON) create", func(t *testing.T) {
		cut(t, "/configmaps")
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cm", "annotations": map[string]any{"khook.io/previous": `{"data":{"k":"old"}}`}}, "data": map[string]any{"k": "new"}}}
		if _, err := cms.Create(ctx, u, metav1.CreateOptions{FieldManager: "khook"}); err != nil {
			t.Fatalf("the create whose answer was lost: %v", err)
		}
	})
	t.Run("a revert patch carrying the resourceVersion", func(t *testing.T) {
		live, err := cms.Get(ctx, "cm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cut(t, "/configmaps/cm")
		patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"annotations":{"khook.io/previous":null}},"data":{"k":"old"}}`, live.GetResourceVersion())
		out, err := cms.Patch(ctx, "cm", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "khook"})
		if err != nil {
			t.Fatalf("the patch whose answer was lost: %v", err)
		}
		if v, _, _ := unstructured.NestedString(out.Object, "data", "k"); v != "old" {
			t.Errorf("the answer is not the object patched: %v", out.Object)
		}
	})
	t.Run("a delete without preconditions", func(t *testing.T) {
		cut(t, "/configmaps/cm")
		if err := cms.Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("the delete whose answer was lost: %v", err)
		}
	})
	t.Run("a conflict of another writer stands", func(t *testing.T) {
		sec, err := clients.Typed.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"a": "1"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		other := sec.DeepCopy()
		other.Data = map[string][]byte{"a": []byte("other")}
		if _, err := direct.CoreV1().Secrets(ns).Update(ctx, other, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// the first attempt's answer (the conflict) is lost, the resend
		// meets the conflict again: the Secret does not hold what this
		// update sent
		cut(t, "/secrets/s")
		sec.Data = map[string][]byte{"a": []byte("mine")}
		if _, err := clients.Typed.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("want the other writer's conflict, got %v", err)
		}
	})
}

// TestMapperForFindsANewCRD: the mapper khook gives helm (MapperFor)
// finds a kind whose CRD became Established after the run's discovery
// was cached, where the cached mapper alone reports no match; its
// discovery requests carry its context.
func TestMapperForFindsANewCRD(t *testing.T) {
	c := testcluster.Get(t)
	clients, err := kube.NewForConfig(c.RESTConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := clients.Mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
		t.Fatal(err) // discovery cached
	}
	group := fmt.Sprintf("m%d.khook.test", time.Now().UnixNano())
	crds := clients.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets." + group},
		"spec": map[string]any{"group": group, "scope": "Namespaced",
			"names":    map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}},
	}}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), "widgets."+group, metav1.DeleteOptions{}) })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		got, err := crds.Get(ctx, "widgets."+group, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		established := false
		for _, cd := range conds {
			m, _ := cd.(map[string]any)
			established = established || m["type"] == "Established" && m["status"] == "True"
		}
		if established {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the CRD never became Established")
		}
	}
	gk := schema.GroupKind{Group: group, Kind: "Widget"}
	if _, err := clients.Mapper.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("the cached mapper: %v, want no match (the test's premise)", err)
	}
	m, err := clients.MapperFor(ctx).RESTMapping(gk, "v1")
	if err != nil {
		t.Fatalf("MapperFor: %v", err)
	}
	if m.Resource.Resource != "widgets" {
		t.Errorf("mapping %+v", m)
	}
}
