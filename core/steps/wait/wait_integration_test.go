//go:build integration

package wait_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/kube"
	khplan "khook.io/core/plan"
	"khook.io/core/step"
	"khook.io/core/steps/wait"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func request(t *testing.T, c *kube.Clients, stepYAML string, timeout time.Duration) *step.Request {
	t.Helper()
	return steptest.Request(t, c, stepYAML, steptest.Options{Timeout: timeout})
}

// run runs the step with a deadline of the request's timeout, as the
// scheduler does.
func run(t *testing.T, req *step.Request) (step.Outcome, error) {
	t.Helper()
	return steptest.Run(wait.New(), req)
}

func plan(t *testing.T, req *step.Request) step.Prediction {
	t.Helper()
	return steptest.Plan(t, wait.New(), req)
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {tier: front}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: main, image: example.invalid/web:1}]
`

func TestConditionOnKindName(t *testing.T) {
	c, ns := steptest.Setup(t, "wait-cond")
	req := request(t, c, `name: web-ready
wait:
  for: condition=Available
  on: deployment/web
  namespace: `+ns, time.Minute)
	if p := plan(t, req); p.Action.Word != khplan.ActionWait || !strings.Contains(p.Reason, "Deployment "+ns+"/web: does not exist") {
		t.Errorf("plan before = %+v, want wait because the Deployment does not exist", p)
	}
	steptest.Create(t, c, ns, deployment)
	out, err := run(t, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outcome: %s", out.Message)
	if p := plan(t, req); p.Action.Word != khplan.ActionNoOp {
		t.Errorf("plan after = %+v, want no-op", p)
	}
	// the same by short name and by kind, in the request's default namespace
	for _, on := range []string{"deploy/web", "Deployment/web", "deployments.apps/web"} {
		req := request(t, c, "name: again\nwait:\n  for: condition=available\n  on: "+on, 30*time.Second)
		req.DefaultNamespace = ns
		if _, err := run(t, req); err != nil {
			t.Errorf("on: %s: %v", on, err)
		}
	}
}

func TestJSONPathForms(t *testing.T) {
	c, ns := steptest.Setup(t, "wait-jsonpath")
	steptest.Create(t, c, ns, deployment)
	for _, f := range []string{
		"jsonpath={.status.readyReplicas}=2",
		"jsonpath=.status.readyReplicas=2",
		"jsonpath=status.readyReplicas=2",
		"jsonpath={.status.availableReplicas}",
		`jsonpath={.status.conditions[?(@.type=="Available")].status}=True`,
		`jsonpath=.status.conditions[?(@.type=="Available")].status=True`,
	} {
		req := request(t, c, "name: j\nwait:\n  for: '"+f+"'\n  on: deployment/web\n  namespace: "+ns, time.Minute)
		if _, err := run(t, req); err != nil {
			t.Errorf("for: %s: %v", f, err)
		}
	}
	// a missing path means "not yet": the wait ends when the label appears
	req := request(t, c, "name: j\nwait:\n  for: jsonpath={.metadata.labels.late}=yes\n  on: deployment/web\n  namespace: "+ns, time.Minute)
	done := make(chan error, 1)
	go func() { _, err := run(t, req); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("wait on a missing path returned at once: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := c.Typed.AppsV1().Deployments(ns).Patch(context.Background(), "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"late":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end once the path held the value")
	}
}

func TestSelectorsAndAllNamespaces(t *testing.T) {
	c, ns := steptest.Setup(t, "wait-sel")
	ns2 := testcluster.Get(t).NewNamespace(t, "wait-sel2")
	pod := func(name, labels, extra string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", labels: {" + labels + "}}\nspec:\n  containers: [{name: main, image: example.invalid/x:1}]\n" + extra
	}
	steptest.Create(t, c, ns, pod("a", "app: web, run: "+ns, ""))
	steptest.Create(t, c, ns2, pod("b", "app: web, run: "+ns, ""))
	steptest.Create(t, c, ns, pod("stuck", "app: other, run: "+ns, "  nodeSelector: {khook.io/none: \"true\"}\n"))

	for _, tc := range []struct{ name, step string }{
		{"label selector", "wait:\n  for: condition=Ready\n  on: pods\n  namespace: " + ns + "\n  selector: app=web"},
		{"field selector", "wait:\n  for: condition=Ready\n  on: pods\n  namespace: " + ns + "\n  fieldSelector: metadata.name=a"},
		{"all namespaces", "wait:\n  for: condition=Ready\n  on: pods\n  allNamespaces: true\n  selector: app=web,run=" + ns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := run(t, request(t, c, "name: s\n"+tc.step, time.Minute)); err != nil {
				t.Fatal(err)
			}
		})
	}
	// the stuck pod times out, with a message naming it
	req := request(t, c, "name: s\nwait:\n  for: condition=Ready\n  on: pods\n  namespace: "+ns+"\n  selector: app=other", 2*time.Second)
	_, err := run(t, req)
	want := "timed out waiting for condition Ready on Pod " + ns + "/stuck: no Ready condition yet; cause: Pod " + ns + "/stuck: Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v\nwant %s...", err, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("the timeout does not wrap context.DeadlineExceeded")
	}
}

func TestDelete(t *testing.T) {
	c, ns := steptest.Setup(t, "wait-del")
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, finalizers: [khook.io/hold]}")
	req := request(t, c, "name: d\nwait:\n  for: delete\n  on: configmap/old\n  namespace: "+ns, time.Minute)
	if p := plan(t, req); p.Action.Word != khplan.ActionWait {
		t.Errorf("plan = %+v, want wait", p)
	}
	done := make(chan error, 1)
	go func() { _, err := run(t, req); done <- err }()
	ctx := context.Background()
	if err := c.Typed.CoreV1().ConfigMaps(ns).Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the wait ended while a finalizer held the object: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := c.Typed.CoreV1().ConfigMaps(ns).Patch(ctx, "old", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end once the object was gone")
	}
	if p := plan(t, req); p.Action.Word != khplan.ActionNoOp {
		t.Errorf("plan after = %+v, want no-op", p)
	}
	// a type the cluster does not serve has nothing to delete
	req = request(t, c, "name: d\nwait:\n  for: delete\n  on: widgets.example.com\n  namespace: "+ns, time.Minute)
	if _, err := run(t, req); err != nil {
		t.Errorf("delete wait on an unserved type: %v", err)
	}
}

func TestPlanUnknown(t *testing.T) {
	c, _ := steptest.Setup(t, "wait-plan")
	req := request(t, c, "name: p\nwait:\n  for: condition=Ready\n  on: pods\n  namespace: not-there-yet", time.Minute)
	if p := plan(t, req); p.Action.Word != khplan.ActionUnknown || p.Reason != "namespace not-there-yet does not exist yet" {
		t.Errorf("plan = %+v, want unknown: the namespace does not exist", p)
	}
	req = request(t, c, "name: p\nwait:\n  for: condition=Ready\n  on: widgets.example.com/w", time.Minute)
	if p := plan(t, req); p.Action.Word != khplan.ActionUnknown || !strings.Contains(p.Reason, `"widgets.example.com"`) {
		t.Errorf("plan = %+v, want unknown: the type is not served", p)
	}
	// run on an unserved type fails at once
	_, err := run(t, req)
	if err == nil || !strings.Contains(err.Error(), "widgets.example.com") {
		t.Errorf("run on an unserved type: %v", err)
	}
}

func TestForbidden(t *testing.T) {
	cl := testcluster.Get(t)
	c := steptest.Clients(t, cl.LimitedRESTConfig(t))
	req := request(t, c, "name: f\nwait:\n  for: condition=Ready\n  on: pods\n  namespace: kube-system", time.Minute)
	began := time.Now()
	_, err := run(t, req)
	if err == nil || !strings.Contains(err.Error(), `pods is forbidden: User "khook-limited" cannot list resource "pods" in API group "" in the namespace "kube-system"`) {
		t.Fatalf("err = %v, want the server's forbidden message", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("forbidden took %s", d)
	}
}
