//go:build integration

package testcluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// waitFor watches the objects lw lists until cond holds for one of them.
func waitFor[T runtime.Object](t *testing.T, what string, lw cache.ListerWatcher, objType T, cond func(T) bool) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ev, err := watchtools.UntilWithSync(ctx, lw, objType, nil, func(ev watch.Event) (bool, error) {
		obj, ok := ev.Object.(T)
		return ok && ev.Type != watch.Deleted && cond(obj), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return ev.Object.(T)
}

func byName(name string) fields.Selector { return fields.OneTermEqualSelector("metadata.name", name) }

func TestSmoke(t *testing.T) {
	c := testcluster.Get(t)
	cs, err := kubernetes.NewForConfig(c.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := c.NewNamespace(t, t.Name())

	t.Run("version", func(t *testing.T) {
		t.Parallel()
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != "v1.35.4" {
			t.Errorf("server version %q, want v1.35.4", v.GitVersion)
		}
	})

	t.Run("deployment available", func(t *testing.T) {
		t.Parallel()
		labels := map[string]string{"app": "web"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}}},
				},
			},
		}
		if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		lw := cache.NewListWatchFromClient(cs.AppsV1().RESTClient(), "deployments", ns, byName("web"))
		waitFor(t, "deployment web Available", lw, &appsv1.Deployment{}, func(d *appsv1.Deployment) bool {
			for _, c := range d.Status.Conditions {
				if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
					return d.Status.AvailableReplicas == 2 && d.Status.ObservedGeneration == d.Generation
				}
			}
			return false
		})
	})

	t.Run("job complete", func(t *testing.T) {
		t.Parallel()
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "once"},
			Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "once", Image: "registry.invalid/once:1"}},
				}},
			},
		}
		if _, err := cs.BatchV1().Jobs(ns).Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		lw := cache.NewListWatchFromClient(cs.BatchV1().RESTClient(), "jobs", ns, byName("once"))
		waitFor(t, "job once Complete", lw, &batchv1.Job{}, func(j *batchv1.Job) bool {
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					return j.Status.Succeeded == 1
				}
			}
			return false
		})
	})

	t.Run("crd and custom resource", func(t *testing.T) {
		t.Parallel()
		testCRD(t, c, ns)
	})

	t.Run("server-side apply and dry run", func(t *testing.T) {
		t.Parallel()
		cms := cs.CoreV1().ConfigMaps(ns)
		if _, err := cms.Apply(t.Context(), applycorev1.ConfigMap("ssa", ns).WithData(map[string]string{"k": "1"}), metav1.ApplyOptions{FieldManager: "smoke"}); err != nil {
			t.Fatalf("apply: %v", err)
		}
		_, err := cms.Apply(t.Context(), applycorev1.ConfigMap("ssa", ns).WithData(map[string]string{"k": "2"}), metav1.ApplyOptions{FieldManager: "intruder"})
		if !apierrors.IsConflict(err) {
			t.Errorf("apply of a field owned by another manager: %v, want a conflict", err)
		}
		dry, err := cms.Apply(t.Context(), applycorev1.ConfigMap("ssa", ns).WithData(map[string]string{"k": "3"}), metav1.ApplyOptions{FieldManager: "smoke", DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("dry-run apply: %v", err)
		}
		if dry.Data["k"] != "3" {
			t.Errorf("dry-run apply returned %q, want the would-be value 3", dry.Data["k"])
		}
		_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("dry-run create: %v", err)
		}
		stored, err := cms.Get(t.Context(), "ssa", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if stored.Data["k"] != "1" {
			t.Errorf("stored value %q after a dry run, want 1", stored.Data["k"])
		}
		if _, err := cms.Get(t.Context(), "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("object of a dry-run create: %v, want NotFound", err)
		}
	})

	t.Run("watch delivers an event", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: byName("watched").String()})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed without an event")
			}
			cm, _ := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Added || cm == nil || cm.Name != "watched" {
				t.Errorf("event %s %T, want ADDED of configmap watched", ev.Type, ev.Object)
			}
		case <-ctx.Done():
			t.Fatal("no watch event")
		}
	})

	t.Run("least-privilege user", func(t *testing.T) {
		t.Parallel()
		lcs, err := kubernetes.NewForConfig(c.LimitedRESTConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		_, err = lcs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "forbidden-"}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("limited user creating a namespace: %v, want Forbidden", err)
		}
		if _, err := lcs.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("limited user listing configmaps outside its namespace: %v, want Forbidden", err)
		}
		cm, err := lcs.CoreV1().ConfigMaps(c.LimitedNamespace).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "smoke-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("limited user creating a configmap in %s: %v", c.LimitedNamespace, err)
		}
		if err := lcs.CoreV1().ConfigMaps(c.LimitedNamespace).Delete(t.Context(), cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("limited user deleting its configmap: %v", err)
		}
	})
}

func testCRD(t *testing.T, c *testcluster.Cluster, ns string) {
	dyn, err := dynamic.NewForConfig(c.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	// CRDs are cluster-scoped and the cluster may be shared: a unique group.
	group := fmt.Sprintf("smoke%d.khook.io", rand.Uint32())
	crdName := "widgets." + group
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": crdName},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}},
					},
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(crdGVR).Delete(context.Background(), crdName, metav1.DeleteOptions{})
	})
	sel := byName(crdName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return dyn.Resource(crdGVR).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return dyn.Resource(crdGVR).Watch(ctx, o)
		},
	}
	waitFor(t, "CRD "+crdName+" Established", lw, &unstructured.Unstructured{}, func(u *unstructured.Unstructured) bool {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true
			}
		}
		return false
	})

	widgets := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns)
	widget := func(size any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Widget",
			"metadata": map[string]any{"generateName": "w-"},
			"spec":     map[string]any{"size": size},
		}}
	}
	got, err := widgets.Create(t.Context(), widget(int64(3)), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create custom resource: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
		t.Errorf("custom resource size %d, want 3", size)
	}
	if _, err := widgets.Create(t.Context(), widget("big"), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("custom resource violating the schema: %v, want Invalid", err)
	}
}
