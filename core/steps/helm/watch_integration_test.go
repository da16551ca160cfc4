//go:build integration

package helm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"khook.io/core/step"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/steptest"
	"khook.io/core/waiter"
)

// flipBound is how long after the release's last resource became ready
// (as a watch of the test's own first saw it) its helm step may end. The
// issue asks for a step that ends within 100 ms of the flip; the bound is
// measured from when a watch could first see the flip, not from the
// test's action that causes it (kwok and the Deployment controller take
// their own time to react), so load on the machine delays both sides
// alike.
const flipBound = 100 * time.Millisecond

// TestWaitEndsWithTheFlip: a release whose Deployment becomes ready only
// when the test binds its Pod (its schedulerName is served by nobody)
// finishes its helm step (wait: true) within flipBound of the Deployment
// turning Current, and not before.
func TestWaitEndsWithTheFlip(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-flip")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nodes, err := f.clients.Typed.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no node to bind to: %v", err)
	}
	node := nodes.Items[0].Name

	// The test's own watch of the Deployment: when it is first seen
	// Current by kstatus.
	dw, err := f.clients.Typed.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=app"})
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Stop()
	current := make(chan time.Time, 1)
	go func() {
		for ev := range dw.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			seen := time.Now()
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev.Object)
			if err != nil {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetKind("Deployment")
			u.SetAPIVersion("apps/v1")
			if ok, _, _ := waiter.KStatus(u); ok {
				current <- seen
				return
			}
		}
	}()

	r := f.request(fmt.Sprintf("name: app\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true\n  values: {schedulerName: khook-nobody}", chartrepo.ChartDir("cmdeploy"), ns), steptest.Options{Timeout: 90 * time.Second})
	type result struct {
		out step.Outcome
		err error
		end time.Time
	}
	done := make(chan result, 1)
	go func() {
		out, err := step.RunStep(ctx, f.exec, r.req)
		done <- result{out, err, time.Now()}
	}()

	// Bind the Pod once it exists; the step must still be waiting then.
	var bound time.Time
	for bound.IsZero() {
		select {
		case res := <-done:
			t.Fatalf("the step ended before the flip: %q, %v", res.out.Message, res.err)
		case <-ctx.Done():
			t.Fatal("no Pod to bind")
		case <-time.After(20 * time.Millisecond):
		}
		// the step's wait says what it waits for once its watches listed
		if !strings.Contains(r.logs(), "waiting for readiness on") {
			continue
		}
		pods := f.pods(ns, "app.kubernetes.io/instance=app")
		if len(pods) == 0 || pods[0].Spec.NodeName != "" {
			continue
		}
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pods[0].Name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
		if err := f.clients.Typed.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatalf("bind Pod %s: %v", pods[0].Name, err)
		}
		bound = time.Now()
	}

	res := <-done
	if res.err != nil {
		t.Fatalf("the step failed: %v", res.err)
	}
	var seen time.Time
	select {
	case seen = <-current:
	case <-time.After(10 * time.Second):
		t.Fatal("the test's watch never saw the Deployment Current")
	}
	t.Logf("bound the Pod; %s later the Deployment was Current, %s after that the step ended (%s)",
		seen.Sub(bound).Round(time.Millisecond), res.end.Sub(seen).Round(time.Millisecond), res.out.Message)
	if res.end.Before(bound) {
		t.Errorf("the step ended before the flip")
	}
	if lag := res.end.Sub(seen); lag > flipBound {
		t.Errorf("the step ended %s after the Deployment was Current, want at most %s", lag.Round(time.Millisecond), flipBound)
	}
}

// TestAtomicNamesWhatWasNotReady: atomic rolls back an upgrade whose
// Deployment never gets ready, and the error names the Deployment and
// kstatus's reason.
func TestAtomicNamesWhatWasNotReady(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-atomic-ks")
	base := fmt.Sprintf("name: app\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true\n  atomic: true", chartrepo.ChartDir("cmdeploy"), ns)
	f.apply(f.request(base, steptest.Options{}))
	err := f.applyErr(f.request(base+"\n  values: {schedulerName: khook-nobody}", steptest.Options{Timeout: 12 * time.Second}))
	for _, want := range []string{
		"has been rolled back due to atomic being set",
		"Deployment " + ns + "/app: InProgress",
		"waited ", "for the resources to be ready",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got := f.revisions(ns, "app"); strings.Join(got, ",") != "1:superseded,2:failed,3:deployed" {
		t.Errorf("revisions = %v, want the rollback as revision 3", got)
	}
	d, err := f.clients.Typed.AppsV1().Deployments(ns).Get(context.Background(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.SchedulerName != "default-scheduler" {
		t.Errorf("not rolled back: schedulerName %q", d.Spec.Template.Spec.SchedulerName)
	}
}

// TestKStatusKinds: a release of three Deployments, a StatefulSet, a
// DaemonSet, Services, a PVC bound to its PV and a post-install hook Job
// is ready when kstatus says every object is Current (and the hook Job
// completed); the same release whose PVC has no volume never is, and the
// error names the PVC as kstatus judges it.
func TestKStatusKinds(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-kinds")
	chart := chartrepo.ChartDir("platform")
	out := f.apply(f.request(fmt.Sprintf("name: good\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true", chart, ns), steptest.Options{}))
	if !strings.Contains(out.Message, "installed") {
		t.Errorf("install: %q", out.Message)
	}
	if st := f.status(ns, "good"); st == nil || st.Status != "deployed" {
		t.Errorf("release good: %v", st)
	}
	ctx := context.Background()
	sts, err := f.clients.Typed.AppsV1().StatefulSets(ns).Get(ctx, "good-db", metav1.GetOptions{})
	if err != nil || sts.Status.ReadyReplicas != 1 {
		t.Errorf("StatefulSet good-db: ready %d, %v", sts.Status.ReadyReplicas, err)
	}
	ds, err := f.clients.Typed.AppsV1().DaemonSets(ns).Get(ctx, "good-agent", metav1.GetOptions{})
	if err != nil || ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
		t.Errorf("DaemonSet good-agent: %d of %d ready, %v", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled, err)
	}
	pvc, err := f.clients.Typed.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "good-data", metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("PVC good-data: %s, %v", pvc.Status.Phase, err)
	}
	// the hook Job ran to completion: its delete policy removed it
	if _, err := f.clients.Typed.BatchV1().Jobs(ns).Get(ctx, "good-migrate", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("hook Job good-migrate: %v, want it deleted after it succeeded", err)
	}

	err = f.applyErr(f.request(fmt.Sprintf("name: nopv\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true\n  values: {pv: false}", chart, ns), steptest.Options{Timeout: 12 * time.Second}))
	if !strings.Contains(err.Error(), "PersistentVolumeClaim "+ns+"/nopv-data: InProgress") {
		t.Errorf("error %q does not name the unbound PVC as kstatus judges it", err)
	}
	for _, other := range []string{"StatefulSet", "DaemonSet", "Deployment"} {
		if strings.Contains(err.Error(), other+" ") {
			t.Errorf("error %q names a %s, which was ready", err, other)
		}
	}
}

// TestDestroyWaitsUntilGone: destroy waits until the release's objects
// are gone (a finalizer holds the ConfigMap), and a ConfigMap re-created
// under the same name meanwhile is another object: the destroy ends
// without waiting for it, and leaves it alone.
func TestDestroyWaitsUntilGone(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-gone")
	r := f.request(fmt.Sprintf("name: app\nhelm:\n  chart: %s\n  namespace: %s", chartrepo.ChartDir("cmdeploy"), ns), steptest.Options{})
	f.apply(r)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cms := f.clients.Typed.CoreV1().ConfigMaps(ns)
	const finalizer = "khook.io/test-hold"
	patch := fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, finalizer)
	if _, err := cms.Patch(ctx, "app-config", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	type result struct {
		out step.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := step.DestroyStep(ctx, f.exec, r.req)
		done <- result{out, err}
	}()
	// the ConfigMap is being deleted, held by the finalizer
	var old *corev1.ConfigMap
	for old == nil || old.DeletionTimestamp == nil {
		select {
		case res := <-done:
			t.Fatalf("destroy ended while the ConfigMap was not being deleted yet: %q, %v", res.out.Message, res.err)
		case <-ctx.Done():
			t.Fatal("the ConfigMap was never deleted")
		case <-time.After(20 * time.Millisecond):
		}
		cm, err := cms.Get(ctx, "app-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old = cm
	}
	select {
	case res := <-done:
		t.Fatalf("destroy ended while the ConfigMap was held by a finalizer: %q, %v", res.out.Message, res.err)
	case <-time.After(time.Second):
	}

	// release it and re-create one of the same name at once
	if _, err := cms.Patch(ctx, "app-config", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var fresh *corev1.ConfigMap
	for fresh == nil {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Finalizers: []string{finalizer}}}, metav1.CreateOptions{})
		switch {
		case err == nil:
			fresh = cm
		case apierrors.IsAlreadyExists(err): // the old one is not gone yet
			time.Sleep(5 * time.Millisecond)
		default:
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = cms.Patch(context.Background(), "app-config", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	})
	if fresh.UID == old.UID {
		t.Fatal("the re-created ConfigMap has the old UID")
	}
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatalf("destroy: %v", res.err)
		}
		if !strings.HasPrefix(res.out.Message, "uninstalled release app") {
			t.Errorf("destroy: %q", res.out.Message)
		}
	case <-ctx.Done():
		t.Fatal("destroy waited for the re-created ConfigMap")
	}
	if !f.gone(ns, "Deployment", "app") {
		t.Error("destroy ended with the Deployment still there")
	}
	cm, err := cms.Get(context.Background(), "app-config", metav1.GetOptions{})
	if err != nil || cm.UID != fresh.UID {
		t.Errorf("the re-created ConfigMap: %v, %v", cm, err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("destroy used up its time")
	}
}
