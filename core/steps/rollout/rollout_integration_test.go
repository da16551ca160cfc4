//go:build integration

package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"khook.io/core/kube"
	khplan "khook.io/core/plan"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/steps/rollout"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func run(t *testing.T, req *step.Request) (step.Outcome, error) {
	t.Helper()
	return steptest.Run(rollout.New(), req)
}

func plan(t *testing.T, req *step.Request) step.Prediction {
	t.Helper()
	return steptest.Plan(t, rollout.New(), req)
}

func request(t *testing.T, c *kube.Clients, y string, timeout time.Duration) *step.Request {
	t.Helper()
	return steptest.Request(t, c, y, steptest.Options{Timeout: timeout})
}

func workload(kind, name, extraSpec, podSpecExtra string) string {
	s := `apiVersion: apps/v1
kind: ` + kind + `
metadata: {name: ` + name + `}
spec:
  selector: {matchLabels: {app: ` + name + `}}
` + extraSpec + `  template:
    metadata: {labels: {app: ` + name + `}}
    spec:
      containers: [{name: main, image: example.invalid/app:1}]
`
	if podSpecExtra != "" {
		s += "      " + podSpecExtra + "\n"
	}
	return s
}

func restartedAt(t *testing.T, c *kube.Clients, typ, ns, name string) string {
	t.Helper()
	m, err := c.MappingForType(context.Background(), typ)
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.Resource(m, ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", "kubectl.kubernetes.io/restartedAt")
	return v
}

func TestRestartThenStatus(t *testing.T) {
	c, ns := steptest.Setup(t, "rollout")
	for _, tc := range []struct{ kind, short, extra string }{
		{"Deployment", "deployment", "  replicas: 2\n"},
		{"DaemonSet", "ds", ""},
		{"StatefulSet", "sts", "  replicas: 1\n  serviceName: web-sts\n"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			name := strings.ToLower(tc.kind)
			steptest.Create(t, c, ns, workload(tc.kind, name, tc.extra, ""))
			status := request(t, c, "name: s\nrollout:\n  status: "+tc.short+"/"+name+"\n  namespace: "+ns, time.Minute)
			if _, err := run(t, status); err != nil {
				t.Fatalf("first rollout: %v", err)
			}
			if p := plan(t, status); p.Action.Word != khplan.ActionNoOp {
				t.Errorf("plan of status after the rollout = %+v, want no-op", p)
			}
			restart := request(t, c, "name: r\nrollout:\n  restart: "+tc.short+"/"+name+"\n  namespace: "+ns, time.Minute)
			if p := plan(t, restart); p.Action.Word != khplan.ActionRestart {
				t.Errorf("plan of restart = %+v", p)
			}
			out, err := run(t, restart)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.kind + " " + ns + "/" + name + " restarted"; out.Message != want {
				t.Errorf("message = %q, want %q", out.Message, want)
			}
			if at := restartedAt(t, c, tc.short, ns, name); at == "" {
				t.Fatal("no kubectl.kubernetes.io/restartedAt annotation on the pod template")
			}
			began := time.Now()
			out, err = run(t, status)
			if err != nil {
				t.Fatalf("rollout after the restart: %v", err)
			}
			t.Logf("%s after %s", out.Message, time.Since(began).Round(time.Millisecond))
			if p := plan(t, status); p.Action.Word != khplan.ActionNoOp {
				t.Errorf("plan of status after the restart = %+v, want no-op", p)
			}
		})
	}
}

func TestProgressDeadlineFailsAtOnce(t *testing.T) {
	c, ns := steptest.Setup(t, "rollout-deadline")
	// no node matches: the pods stay Pending, the rollout cannot progress
	steptest.Create(t, c, ns, workload("Deployment", "stuck", "  progressDeadlineSeconds: 1\n", `nodeSelector: {khook.io/none: "true"}`))
	// the controller may declare the deadline exceeded at once (see
	// below), before the scheduler has said why the pod waits: the step
	// starts once the cluster has said it, which a real deadline allows
	unschedulable(t, c, ns)
	req := request(t, c, "name: s\nrollout:\n  status: deployment/stuck\n  namespace: "+ns, time.Minute)
	began := time.Now()
	_, err := run(t, req)
	took := time.Since(began)
	if err == nil {
		t.Fatal("the rollout of a Deployment that cannot progress succeeded")
	}
	if errors.Is(err, context.DeadlineExceeded) || took > 20*time.Second {
		t.Fatalf("the step waited %s (err %v) instead of failing at the progress deadline", took, err)
	}
	want := "Deployment " + ns + "/stuck exceeded its progress deadline (progressDeadlineSeconds: 1): ReplicaSet "
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "has timed out progressing.; cause: Pod "+ns+"/stuck-") ||
		!strings.Contains(err.Error(), "Unschedulable: 0/1 nodes are available") {
		t.Errorf("err = %v\nwant it to start with %q and name the unschedulable pod", err, want)
	}
	t.Logf("failed after %s: %v", took.Round(time.Millisecond), err)
	// The controller compares the deadline with a lastUpdateTime kept in
	// whole seconds, so it may declare the deadline exceeded at once, then
	// reset the condition when the ReplicaSet's status next changes, and
	// declare it again a second later: the plan must say so once the
	// condition holds, within a few seconds.
	var p step.Prediction
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		p = plan(t, req)
		if p.Action.Word == khplan.ActionWait && strings.Contains(p.Reason, "exceeded its progress deadline") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("plan = %+v, want a wait naming the exceeded progress deadline", p)
		}
	}
}

func TestStatusTimeout(t *testing.T) {
	c, ns := steptest.Setup(t, "rollout-timeout")
	steptest.Create(t, c, ns, workload("Deployment", "slow", "", `nodeSelector: {khook.io/none: "true"}`))
	req := request(t, c, "name: s\nrollout:\n  status: deployment/slow\n  namespace: "+ns, 2*time.Second)
	_, err := run(t, req)
	want := `timed out waiting for rollout on Deployment ` + ns + `/slow: Waiting for deployment "slow" rollout to finish: 0 of 1 updated replicas are available...; cause: Pod ` + ns + `/slow-`
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v\nwant %s...", err, want)
	}
}

func TestMissingWorkload(t *testing.T) {
	c, ns := steptest.Setup(t, "rollout-missing")
	for _, y := range []string{
		"name: r\nrollout:\n  restart: deployment/nope\n  namespace: " + ns,
		"name: r\nrollout:\n  status: deployment/nope\n  namespace: " + ns,
	} {
		req := request(t, c, y, 10*time.Second)
		if _, err := run(t, req); err == nil || err.Error() != "Deployment "+ns+"/nope not found" {
			t.Errorf("err = %v", err)
		}
		if p := plan(t, req); p.Action.Word != khplan.ActionUnknown {
			t.Errorf("plan = %+v, want unknown", p)
		}
	}
}

func TestPausedDeploymentIsRefused(t *testing.T) {
	c, ns := steptest.Setup(t, "rollout-paused")
	steptest.Create(t, c, ns, workload("Deployment", "held", "  paused: true\n", ""))
	_, err := run(t, request(t, c, "name: r\nrollout:\n  restart: deploy/held\n  namespace: "+ns, 10*time.Second))
	if err == nil || !strings.HasPrefix(err.Error(), "Deployment "+ns+"/held: the Deployment is paused") {
		t.Errorf("err = %v", err)
	}
}

// TestTargetFormsAsKubectl: every spelling kubectl resolves to a
// Deployment, DaemonSet or StatefulSet (against this cluster's discovery,
// with kubectl's builder) is a valid rollout target offline, as that kind;
// a spelling accepted offline resolves to the kind it was accepted as, or
// names a version the cluster does not serve. Restart and status run with
// the versioned forms.
func TestTargetFormsAsKubectl(t *testing.T) {
	c, ns := steptest.Setup(t, "rollout-forms")
	var types []string
	for _, k := range []struct{ kind, plural, short string }{
		{"Deployment", "deployments", "deploy"}, {"DaemonSet", "daemonsets", "ds"}, {"StatefulSet", "statefulsets", "sts"},
	} {
		singular := strings.ToLower(k.kind)
		for _, name := range []string{k.plural, singular, k.kind, k.short, strings.ToUpper(k.plural), strings.ToUpper(k.short),
			strings.ToUpper(k.kind[:1]) + k.plural[1:], strings.ToUpper(k.short[:1]) + k.short[1:]} {
			for _, suffix := range []string{"", ".apps", ".v1.apps", ".v1beta2.apps", ".v1", ".extensions", ".v1beta1.extensions", ".apps.example.com"} {
				types = append(types, name+suffix)
			}
		}
	}
	types = append(types, "pods", "pod", "po", "replicasets", "rs", "ReplicaSet.apps", "cronjobs.batch", "jobs", "svc", "all")
	count := 0
	defer func() { t.Logf("%d of %d spellings name a rollout kind", count, len(types)) }()
	for _, typ := range types {
		kind, offline := spec.RolloutKind(typ)
		m, err := c.MappingForType(context.Background(), typ)
		resolved := ""
		if err == nil && m.GroupVersionKind.Group == "apps" {
			switch m.GroupVersionKind.Kind {
			case "Deployment", "DaemonSet", "StatefulSet":
				resolved = m.GroupVersionKind.Kind
			}
		}
		if resolved != "" {
			count++
		}
		switch {
		case resolved != "" && !offline:
			t.Errorf("%s: kubectl resolves it to %s, but it is refused offline", typ, resolved)
		case resolved != "" && kind != resolved:
			t.Errorf("%s: kubectl resolves it to %s, offline to %s", typ, resolved, kind)
		case resolved == "" && offline && !meta.IsNoMatchError(err):
			t.Errorf("%s: accepted offline as %s, but kubectl resolves it to %v (%v)", typ, kind, m, err)
		}
	}

	steptest.Create(t, c, ns, workload("Deployment", "web", "  replicas: 1\n", ""))
	for _, y := range []string{"restart: Deployment.v1.apps/web", "status: deployments.v1.apps/web", "restart: deploy.apps/web", "status: DEPLOYMENT/web"} {
		req := request(t, c, "name: r\nrollout:\n  "+y+"\n  namespace: "+ns, time.Minute)
		if _, err := run(t, req); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
	req := request(t, c, "name: r\nrollout:\n  status: deployments.v1beta2.apps/web\n  namespace: "+ns, time.Minute)
	if _, err := run(t, req); err == nil || !strings.Contains(err.Error(), `the server doesn't have a resource type "deployments"`) {
		t.Errorf("an unserved version: %v", err)
	}
}

// unschedulable waits until a pod of ns has PodScheduled=False (the
// scheduler's verdict).
func unschedulable(t *testing.T, c *kube.Clients, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Typed.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no pod of %s was found unschedulable: %v", ns, err)
	}
}

// TestStatusOfADeletedWorkload: the workload is deleted while its rollout
// is waited for: the step fails at once, as kubectl rollout status does
// ("object has been deleted"), instead of waiting to its timeout.
func TestStatusOfADeletedWorkload(t *testing.T) {
	c, ns := steptest.Setup(t, "rollout-deleted")
	steptest.Create(t, c, ns, workload("Deployment", "gone", "", `nodeSelector: {khook.io/none: "true"}`))
	req := request(t, c, "name: s\nrollout:\n  status: deployment/gone\n  namespace: "+ns, time.Minute)
	var mu sync.Mutex
	waiting := false
	req.Log = func(format string, args ...any) {
		mu.Lock()
		waiting = waiting || strings.Contains(fmt.Sprintf(format, args...), "waiting for rollout on Deployment "+ns+"/gone")
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deleted := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			mu.Lock()
			w := waiting
			mu.Unlock()
			if w {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		deleted <- c.Typed.AppsV1().Deployments(ns).Delete(ctx, "gone", metav1.DeleteOptions{})
	}()
	began := time.Now()
	_, err := run(t, req)
	if derr := <-deleted; derr != nil {
		t.Fatalf("delete: %v", derr)
	}
	if want := "Deployment " + ns + "/gone was deleted while its rollout was waited for"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant %q", err, want)
	}
	t.Logf("failed after %s: %v", time.Since(began).Round(100*time.Millisecond), err)
}
