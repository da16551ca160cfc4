//go:build integration

package waiter_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/kube"
	"khook.io/core/spec"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
	"khook.io/core/waiter"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func clients(t testing.TB) *kube.Clients {
	return steptest.Clients(t, testcluster.Get(t).RESTConfig(t))
}

// create creates the object written as YAML in ns.

func mapping(t testing.TB, c *kube.Clients, typ string) waiter.Target {
	t.Helper()
	m, err := c.MappingForType(context.Background(), typ)
	if err != nil {
		t.Fatal(err)
	}
	return waiter.Target{Mapping: m}
}

func named(t testing.TB, c *kube.Clients, typ, ns, name string) waiter.Target {
	tg := mapping(t, c, typ)
	tg.Namespace, tg.Name = ns, name
	return tg
}

func waitFor(t testing.TB, s string) spec.WaitFor {
	t.Helper()
	w, err := spec.ParseWaitFor(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// progressLog collects progress lines.
type progressLog struct {
	mu    sync.Mutex
	lines []string
}

func (p *progressLog) add(s string) {
	p.mu.Lock()
	p.lines = append(p.lines, s)
	p.mu.Unlock()
}

func (p *progressLog) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// untilAsync runs Until in a goroutine and returns its result channel.
func untilAsync(ctx context.Context, c *kube.Clients, targets []waiter.Target, cond spec.WaitFor, p func(string)) <-chan error {
	done := make(chan error, 1)
	go func() { done <- waiter.Until(ctx, c, targets, cond, p) }()
	return done
}

func expectPending(t *testing.T, done <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("Until returned before the condition held: %v", err)
	case <-time.After(d):
	}
}

func expectDone(t *testing.T, done <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Until: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("Until did not return within %s of the condition holding", d)
	}
}

func mergePatch(t testing.TB, c *kube.Clients, typ, ns, name, patch string) {
	t.Helper()
	m, err := c.MappingForType(context.Background(), typ)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Resource(m, ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch %s/%s: %v", typ, name, err)
	}
}

func TestConditionOnDeployment(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-cond")
	steptest.Create(t, c, ns, deploymentYAML("web", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var p progressLog
	err := waiter.Until(ctx, c, []waiter.Target{named(t, c, "deployment", ns, "web")}, waitFor(t, "condition=Available"), p.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("progress: %q", p.all())
}

func TestNamedTargetWaitsToExist(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-exist")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var p progressLog
	done := untilAsync(ctx, c, []waiter.Target{named(t, c, "configmaps", ns, "late")}, waitFor(t, "jsonpath={.data.k}"), p.add)
	expectPending(t, done, 500*time.Millisecond)
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late}\ndata: {k: v}")
	expectDone(t, done, 5*time.Second)
	lines := p.all()
	if len(lines) == 0 || !strings.Contains(lines[0], "ConfigMap "+ns+"/late: does not exist") {
		t.Errorf("progress = %q, want a line saying the ConfigMap does not exist", lines)
	}
}

func TestJSONPathForms(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-jsonpath")
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {phase: Pending}")
	for _, tc := range []struct{ for_, patch string }{
		{"jsonpath={.data.phase}=Ready", `{"data":{"phase":"Ready"}}`},
		{"jsonpath=.data.phase=Done", `{"data":{"phase":"Done"}}`},
		{"jsonpath=data.phase=Again", `{"data":{"phase":"Again"}}`},
		// a missing path is "not yet", not an error
		{"jsonpath={.data.added}", `{"data":{"added":"x"}}`},
		{"jsonpath={.metadata.labels.stage}=two", `{"metadata":{"labels":{"stage":"two"}}}`},
	} {
		t.Run(tc.for_, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := untilAsync(ctx, c, []waiter.Target{named(t, c, "cm", ns, "cm")}, waitFor(t, tc.for_), nil)
			expectPending(t, done, 300*time.Millisecond)
			mergePatch(t, c, "configmaps", ns, "cm", tc.patch)
			expectDone(t, done, 5*time.Second)
		})
	}
}

func TestJSONPathFilterOnPods(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-filter")
	steptest.Create(t, c, ns, podYAML("p1", "app: web"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tg := mapping(t, c, "pods")
	tg.Namespace = ns
	err := waiter.Until(ctx, c, []waiter.Target{tg}, waitFor(t, `jsonpath={.status.conditions[?(@.type=="Ready")].status}=True`), nil)
	if err != nil {
		t.Fatal(err)
	}
}

func TestTypeTargetSelectors(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-sel")
	// a pod kwok can never run (no node matches) outside the selector
	steptest.Create(t, c, ns, podYAML("stuck", "app: other", "nodeSelector: {khook.io/none: \"true\"}"))
	steptest.Create(t, c, ns, podYAML("a", "app: web"))
	steptest.Create(t, c, ns, podYAML("b", "app: web"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	tg := mapping(t, c, "pods")
	tg.Namespace, tg.LabelSelector = ns, "app=web"
	if err := waiter.Until(ctx, c, []waiter.Target{tg}, waitFor(t, "condition=Ready"), nil); err != nil {
		t.Fatalf("label selector: %v", err)
	}
	tg = mapping(t, c, "pods")
	tg.Namespace, tg.FieldSelector = ns, "metadata.name=a"
	if err := waiter.Until(ctx, c, []waiter.Target{tg}, waitFor(t, "condition=Ready"), nil); err != nil {
		t.Fatalf("field selector: %v", err)
	}
	// without a selector the stuck pod keeps the wait from succeeding
	short, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	tg = mapping(t, c, "pods")
	tg.Namespace = ns
	err := waiter.Until(short, c, []waiter.Target{tg}, waitFor(t, "condition=Ready"), nil)
	// and says why, in the scheduler's words
	want := "timed out waiting for condition Ready on 1 of 3 pods: Pod " + ns + "/stuck: no Ready condition yet; cause: Pod " + ns + "/stuck: Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v\nwant %s...", err, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the timeout error does not wrap context.DeadlineExceeded")
	}
}

func TestTypeTargetWaitsForAMatch(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-none")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tg := mapping(t, c, "configmaps")
	tg.Namespace, tg.LabelSelector = ns, "role=late"
	done := untilAsync(ctx, c, []waiter.Target{tg}, waitFor(t, "jsonpath={.data.k}"), nil)
	expectPending(t, done, 500*time.Millisecond)
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {role: late}}\ndata: {k: v}")
	expectDone(t, done, 5*time.Second)
}

func TestAllNamespaces(t *testing.T) {
	c := clients(t)
	cl := testcluster.Get(t)
	ns1, ns2 := cl.NewNamespace(t, "waiter-all1"), cl.NewNamespace(t, "waiter-all2")
	label := "khook.io/waiter-all=" + ns1
	for _, ns := range []string{ns1, ns2} {
		steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, labels: {khook.io/waiter-all: "+ns1+"}}\ndata: {ready: \"no\"}")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tg := mapping(t, c, "configmaps")
	tg.AllNamespaces, tg.LabelSelector = true, label
	var p progressLog
	done := untilAsync(ctx, c, []waiter.Target{tg}, waitFor(t, "jsonpath={.data.ready}=yes"), p.add)
	expectPending(t, done, 300*time.Millisecond)
	mergePatch(t, c, "configmaps", ns1, "cm", `{"data":{"ready":"yes"}}`)
	expectPending(t, done, 300*time.Millisecond) // one of two
	mergePatch(t, c, "configmaps", ns2, "cm", `{"data":{"ready":"yes"}}`)
	expectDone(t, done, 5*time.Second)
	lines := p.all()
	if len(lines) < 2 || !strings.Contains(lines[0], "on 2 of 2 configmaps") || !strings.Contains(lines[1], "on 1 of 2 configmaps: ConfigMap "+ns2+"/cm") {
		t.Errorf("progress = %q, want 2 of 2 then 1 of 2 not ready", lines)
	}
}

func TestDelete(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-delete")
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: doomed, finalizers: [khook.io/test]}")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var p progressLog
	done := untilAsync(ctx, c, []waiter.Target{named(t, c, "configmap", ns, "doomed")}, waitFor(t, "delete"), p.add)
	expectPending(t, done, 300*time.Millisecond)
	if err := c.Typed.CoreV1().ConfigMaps(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectPending(t, done, 300*time.Millisecond) // held by its finalizer
	mergePatch(t, c, "configmaps", ns, "doomed", `{"metadata":{"finalizers":null}}`)
	expectDone(t, done, 5*time.Second)
	lines := p.all()
	if len(lines) < 2 || !strings.HasSuffix(lines[len(lines)-1], "being deleted, waiting for finalizers khook.io/test") {
		t.Errorf("progress = %q, want the last line to name the finalizer", lines)
	}

	// already gone: at once
	if err := waiter.Until(ctx, c, []waiter.Target{named(t, c, "configmap", ns, "never")}, waitFor(t, "delete"), nil); err != nil {
		t.Fatal(err)
	}
	// by type and selector: until none matches
	for _, n := range []string{"s1", "s2"} {
		steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+n+", labels: {set: s}}")
	}
	tg := mapping(t, c, "configmaps")
	tg.Namespace, tg.LabelSelector = ns, "set=s"
	done = untilAsync(ctx, c, []waiter.Target{tg}, waitFor(t, "delete"), nil)
	expectPending(t, done, 300*time.Millisecond)
	if err := c.Typed.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "set=s"}); err != nil {
		t.Fatal(err)
	}
	expectDone(t, done, 5*time.Second)
}

func TestDeleteWithUIDTreatsARecreatedObjectAsGone(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-uid")
	old := steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Typed.CoreV1().ConfigMaps(ns).Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}")
	tg := named(t, c, "configmap", ns, "cm")
	tg.UID = old.GetUID()
	if err := waiter.Until(ctx, c, []waiter.Target{tg}, waitFor(t, "delete"), nil); err != nil {
		t.Fatal(err)
	}
	// without the UID, the new object is still there
	short, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	err := waiter.Until(short, c, []waiter.Target{named(t, c, "configmap", ns, "cm")}, waitFor(t, "delete"), nil)
	if want := "timed out waiting for deletion on ConfigMap " + ns + "/cm: still exists"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestTimeoutNamesTheObjectAndItsValue(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-timeout")
	// no node matches: the pod stays Pending, the Deployment unavailable
	steptest.Create(t, c, ns, deploymentYAML("web", "nodeSelector: {khook.io/none: \"true\"}"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	began := time.Now()
	err := waiter.Until(ctx, c, []waiter.Target{named(t, c, "deploy", ns, "web")}, waitFor(t, "condition=Available"), nil)
	// and why: the Deployment's current ReplicaSet's Pod, in the
	// scheduler's words
	want := "timed out waiting for condition Available on Deployment " + ns + "/web: status False (MinimumReplicasUnavailable); cause: Pod " + ns + "/web-"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), ": Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.") {
		t.Fatalf("err = %v\nwant %s...: Unschedulable: ...", err, want)
	}
	if d := time.Since(began); d > 4*time.Second {
		t.Errorf("the wait took %s with a 3s deadline", d)
	}

	// several objects: each with its value
	tctx, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {g: x}}\ndata: {v: one}")
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, labels: {g: x}}")
	tg := mapping(t, c, "configmaps")
	tg.Namespace, tg.LabelSelector = ns, "g=x"
	err = waiter.Until(tctx, c, []waiter.Target{tg}, waitFor(t, "jsonpath={.data.v}=two"), nil)
	want = `timed out waiting for jsonpath {.data.v}=two on 2 of 2 configmaps: ConfigMap ` + ns + `/a: value "one"; ConfigMap ` + ns + `/b: {.data.v} not found`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
}

func TestForbiddenFailsAtOnce(t *testing.T) {
	cl := testcluster.Get(t)
	c := steptest.Clients(t, cl.LimitedRESTConfig(t))
	admin := clients(t)
	ns := cl.NewNamespace(t, "waiter-forbidden")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	err := waiter.Until(ctx, c, []waiter.Target{named(t, admin, "configmaps", ns, "x")}, waitFor(t, "jsonpath={.data}"), nil)
	if err == nil {
		t.Fatal("Until succeeded for a user without rights")
	}
	want := `configmaps "x" is forbidden: User "khook-limited" cannot list resource "configmaps" in API group "" in the namespace "` + ns + `"`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want the server's wording %q", err, want)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("a forbidden wait took %s to fail", d)
	}
}

func TestUnservedTypeFailsAtOnce(t *testing.T) {
	c := clients(t)
	m := mapping(t, c, "configmaps").Mapping
	bogus := *m
	bogus.Resource = schema.GroupVersionResource{Group: "khook.io", Version: "v1", Resource: "nothings"}
	bogus.GroupVersionKind = schema.GroupVersionKind{Group: "khook.io", Version: "v1", Kind: "Nothing"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := waiter.Until(ctx, c, []waiter.Target{{Mapping: &bogus, Namespace: "default", Name: "x"}}, waitFor(t, "condition=Ready"), nil)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want an immediate failure", err)
	}
	t.Logf("error: %v", err)
}

func TestCustomCheckErrorEndsTheWait(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-check")
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {state: running}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- waiter.Wait(ctx, c, waiter.Options{
			Targets: []waiter.Target{named(t, c, "configmap", ns, "cm")},
			What:    "completion",
			Check: func(u *unstructured.Unstructured) (bool, string, error) {
				s, _, _ := unstructured.NestedString(u.Object, "data", "state")
				if s == "failed" {
					return false, s, errors.New("it failed")
				}
				return s == "done", s, nil
			},
		})
	}()
	expectPending(t, done, 300*time.Millisecond)
	mergePatch(t, c, "configmaps", ns, "cm", `{"data":{"state":"failed"}}`)
	select {
	case err := <-done:
		if err == nil || err.Error() != "it failed" {
			t.Fatalf("err = %v, want the check's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a failing check did not end the wait")
	}
}

func TestCancelledWait(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-cancel")
	ctx, cancel := context.WithCancel(context.Background())
	done := untilAsync(ctx, c, []waiter.Target{named(t, c, "configmap", ns, "never")}, waitFor(t, "jsonpath={.data}"), nil)
	expectPending(t, done, 300*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "cancelled waiting for jsonpath {.data} on ConfigMap "+ns+"/never: does not exist") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled wait did not return")
	}
}

// BenchmarkConditionToReturn measures the time from the patch that makes
// the condition hold to Until returning: from the API server's response
// to the patch (negative when the watch event arrives before the response),
// and from sending the patch (an upper bound that includes the request).
func BenchmarkConditionToReturn(b *testing.B) {
	c := clients(b)
	ns := testcluster.Get(b).NewNamespace(b, "waiter-bench")
	steptest.Create(b, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {count: \"0\"}")
	tg := named(b, c, "configmap", ns, "cm")
	var afterResponse, afterRequest, worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := strconv.Itoa(i + 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ready := make(chan struct{})
		returned := make(chan time.Time, 1)
		go func() {
			var once sync.Once
			err := waiter.Until(ctx, c, []waiter.Target{tg}, waitFor(b, "jsonpath={.data.count}="+n), func(string) { once.Do(func() { close(ready) }) })
			returned <- time.Now()
			if err != nil {
				b.Error(err)
			}
		}()
		<-ready // listed, watching, not ready yet
		sent := time.Now()
		_, err := c.Typed.CoreV1().ConfigMaps(ns).Patch(ctx, "cm", types.MergePatchType, []byte(`{"data":{"count":"`+n+`"}}`), metav1.PatchOptions{})
		patched := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		at := <-returned
		cancel()
		afterResponse += at.Sub(patched)
		afterRequest += at.Sub(sent)
		if d := at.Sub(patched); d > worst {
			worst = d
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(afterResponse)/float64(b.N), "ms-after-response")
	b.ReportMetric(ms(worst), "ms-after-response-worst")
	b.ReportMetric(ms(afterRequest)/float64(b.N), "ms-after-request")
}

func deploymentYAML(name, podSpecExtra string) string {
	extra := ""
	if podSpecExtra != "" {
		extra = "\n      " + podSpecExtra
	}
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `}
spec:
  replicas: 1
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec:
      containers: [{name: main, image: example.invalid/app:1}]` + extra + "\n"
}

func podYAML(name, labels string, specExtra ...string) string {
	extra := ""
	for _, e := range specExtra {
		extra += "\n  " + e
	}
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, labels: {` + labels + `}}
spec:
  containers: [{name: main, image: example.invalid/app:1}]` + extra + "\n"
}

// TestManyNamedTargets covers apply's waitFor on many objects: named
// targets of one type in one namespace share one watch of the namespace,
// and each is still decided by its own object only.
func TestManyNamedTargets(t *testing.T) {
	c := clients(t)
	ns := testcluster.Get(t).NewNamespace(t, "waiter-many")
	const n = 60
	var targets []waiter.Target
	for i := 0; i < n; i++ {
		name := "cm-" + strconv.Itoa(i)
		data := "ready"
		if i%20 == 0 {
			data = "not-yet"
		}
		steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+"}\ndata: {state: "+data+"}")
		targets = append(targets, named(t, c, "configmaps", ns, name))
	}
	// an object of the namespace that is no target does not count
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bystander}\ndata: {state: never}")
	// a target that does not exist yet
	targets = append(targets, named(t, c, "configmaps", ns, "late"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var p progressLog
	done := untilAsync(ctx, c, targets, waitFor(t, "jsonpath={.data.state}=ready"), p.add)
	expectPending(t, done, 500*time.Millisecond)
	if lines := p.all(); len(lines) == 0 || !strings.HasPrefix(lines[0], "waiting for jsonpath {.data.state}=ready on 4 of 61 configmaps: ConfigMap "+ns+"/cm-0: value \"not-yet\" (and 3 more)") {
		t.Errorf("progress = %q", lines)
	}
	for i := 0; i < n; i += 20 {
		mergePatch(t, c, "configmaps", ns, "cm-"+strconv.Itoa(i), `{"data":{"state":"ready"}}`)
	}
	expectPending(t, done, 300*time.Millisecond)
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late}\ndata: {state: ready}")
	expectDone(t, done, 5*time.Second)

	// deletion of several, one re-created meanwhile (another UID)
	var gone []waiter.Target
	for _, name := range []string{"cm-1", "cm-2", "cm-3"} {
		tg := named(t, c, "configmaps", ns, name)
		u, err := c.Typed.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tg.UID = u.UID
		gone = append(gone, tg)
	}
	done = untilAsync(ctx, c, gone, waitFor(t, "delete"), nil)
	for _, name := range []string{"cm-1", "cm-2", "cm-3"} {
		if err := c.Typed.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-2}")
	expectDone(t, done, 5*time.Second)
}

// BenchmarkAlreadyMet measures a wait whose condition holds from the start
// (a re-run): one list, one evaluation.
func BenchmarkAlreadyMet(b *testing.B) {
	c := clients(b)
	ns := testcluster.Get(b).NewNamespace(b, "waiter-bench-met")
	steptest.Create(b, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {count: \"1\"}")
	tg := []waiter.Target{named(b, c, "configmap", ns, "cm")}
	cond := waitFor(b, "jsonpath={.data.count}=1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := waiter.Until(ctx, c, tg, cond, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// A target deleted while waited for is judged by its final state, the one
// its delete event carries, whether or not the wait looked at it before:
// with one watch of its own or a namespace's watch shared with others.
func TestDeletedTargetsJudgedByTheirFinalState(t *testing.T) {
	for _, tc := range []struct {
		name    string
		targets []string // the first fails, then is deleted; "never" is never created
	}{
		{"its own watch", []string{"fails"}},
		{"a shared watch", []string{"fails", "quits", "never"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clients(t)
			ns := testcluster.Get(t).NewNamespace(t, "waiter-deleted")
			var mu sync.Mutex
			judged := map[string]string{}
			deleted := func(last *unstructured.Unstructured) (bool, string, error) {
				mu.Lock()
				defer mu.Unlock()
				if last == nil {
					judged["unseen"] = "nil"
					return true, "", nil
				}
				s, _, _ := unstructured.NestedString(last.Object, "data", "state")
				judged[last.GetName()] = s
				if s == "failed" {
					return false, "", errors.New(last.GetName() + " ended failed")
				}
				return true, "", nil
			}
			var targets []waiter.Target
			for _, n := range tc.targets {
				if n != "never" {
					steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+n+"}\ndata: {state: running}")
				}
				tg := named(t, c, "configmap", ns, n)
				tg.Deleted = deleted
				targets = append(targets, tg)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- waiter.Wait(ctx, c, waiter.Options{
					Targets: targets,
					What:    "completion",
					Check: func(u *unstructured.Unstructured) (bool, string, error) {
						s, _, _ := unstructured.NestedString(u.Object, "data", "state")
						return s == "done", s, nil // never fails while it exists
					},
				})
			}()
			expectPending(t, done, 300*time.Millisecond)
			m, err := c.MappingForType(ctx, "configmap")
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.targets) > 1 {
				if err := c.Resource(m, ns).Delete(ctx, "quits", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				expectPending(t, done, 300*time.Millisecond) // "fails" is still running
			}
			// its last change and its delete, in quick succession
			mergePatch(t, c, "configmaps", ns, "fails", `{"data":{"state":"failed"}}`)
			if err := c.Resource(m, ns).Delete(ctx, "fails", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err == nil || err.Error() != "fails ended failed" {
					t.Fatalf("err = %v, want the failure of its final state", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a deleted target did not end the wait")
			}
			mu.Lock()
			defer mu.Unlock()
			want := map[string]string{"fails": "failed"}
			if len(tc.targets) > 1 {
				want["quits"], want["unseen"] = "running", "nil"
			}
			for k, v := range want {
				if judged[k] != v {
					t.Errorf("%s judged by %q, want %q (all: %v)", k, judged[k], v, judged)
				}
			}
		})
	}
}
