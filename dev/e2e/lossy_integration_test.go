//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/state"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/testcluster"
)

// Lost answers end to end (docs/spec.md 240-249): the built binary talks
// to the test cluster through the lossy link, which lets every request
// reach the API server and cuts the connection before the answer with a
// given probability. Each round, in a fresh namespace, applies a spec with
// a state record (60 ConfigMaps, a local chart installed with wait: true
// and then upgraded, a patch, a wait and a job), applies it again, and
// destroys it.

// lossyObjects is how many ConfigMaps the spec's apply step makes.
const lossyObjects = 60

func lossySpec(t *testing.T, ns string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: objects
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
`, ns)
	for i := 0; i < lossyObjects; i++ {
		fmt.Fprintf(&b, "            ---\n            apiVersion: v1\n            kind: ConfigMap\n            metadata: {name: cm-%d}\n            data: {i: \"%d\"}\n", i, i)
	}
	fmt.Fprintf(&b, `  - name: app
    timeout: 2m
    helm: {chart: %[2]s, namespace: %[1]s, wait: true, values: {color: one}}
  - name: app-upgrade
    needs: [app]
    timeout: 2m
    helm: {chart: %[2]s, release: app, namespace: %[1]s, wait: true, values: {color: two}}
  - name: patch
    needs: [objects]
    patch: {target: configmap/cm-0, namespace: %[1]s, patch: {data: {patched: "yes"}}}
  - name: wait
    needs: [patch]
    wait: {for: "jsonpath={.data.patched}=yes", on: configmap/cm-0, namespace: %[1]s}
  - name: job
    needs: [objects]
    timeout: 2m
    job: {image: busybox, namespace: %[1]s, command: [sh, -c, "true"]}
`, ns, chartrepo.ChartDir("cmdeploy"))
	return writeSpec(t, b.String())
}

// lossySteps are the spec's steps.
var lossySteps = []string{"objects", "app", "app-upgrade", "patch", "wait", "job"}

// exact checks, on the API server directly, that the round's apply left
// every object as the spec says, the record ok with every step ok, and no
// Lease.
func exact(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < lossyObjects; i++ {
		d := cmData(t, cs, ns, fmt.Sprintf("cm-%d", i))
		want := fmt.Sprint(i)
		if d == nil || d["i"] != want || (i == 0) != (d["patched"] == "yes") {
			t.Errorf("ConfigMap cm-%d: %v", i, d)
		}
	}
	if d := cmData(t, cs, ns, "app-config"); d == nil || d["color"] != "two" {
		t.Errorf("the upgraded release's ConfigMap: %v", d)
	}
	if dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{}); err != nil || dep.Status.ReadyReplicas < 1 {
		t.Errorf("the release's Deployment: %v", err)
	}
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=app"})
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for _, s := range secrets.Items {
		statuses[s.Labels["version"]] = s.Labels["status"]
	}
	if len(statuses) != 2 || statuses["1"] != "superseded" || statuses["2"] != "deployed" {
		t.Errorf("the release's revisions: %v, want 1 superseded and 2 deployed", statuses)
	}
	job, err := cs.BatchV1().Jobs(ns).Get(ctx, "job", metav1.GetOptions{})
	if err != nil || !jobSucceeded(job) {
		t.Errorf("the job: %v", err)
	}
	rec := readRecord(t, cs, ns, "khook-state-"+ns)
	if rec == nil || rec.RunStatus != "ok" {
		t.Errorf("the record: %s", recordJSON(rec))
	} else {
		for _, s := range lossySteps {
			if e := rec.Steps[s]; e == nil || e.Status != state.StepOK {
				t.Errorf("step %s in the record: %+v", s, e)
			}
		}
	}
	noLease(t, cs, ns)
}

func jobSucceeded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == "True" {
			return true
		}
	}
	return false
}

func noLease(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), "khook-state-"+ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the run lock's Lease is left: %v", err)
	}
}

// gone checks that destroy left nothing of the spec's.
func gone(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" && cm.DeletionTimestamp == nil {
			t.Errorf("after destroy: ConfigMap %s", cm.Name)
		}
	}
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		t.Errorf("after destroy: Secret %s", s.Name)
	}
	if _, err := cs.BatchV1().Jobs(ns).Get(ctx, "job", metav1.GetOptions{}); err == nil {
		t.Error("after destroy: the Job")
	}
	noLease(t, cs, ns)
}

// noSelfConflict fails on the messages a run that took its own lost write
// for another's would print.
func noSelfConflict(t *testing.T, what string, res Result) {
	t.Helper()
	for _, bad := range []string{"another run wrote it", "is in progress: revision"} {
		if strings.Contains(res.Stderr, bad) || strings.Contains(res.Stdout, bad) {
			t.Errorf("%s says %q:\n%s", what, bad, tail(res.Stderr, 30))
		}
	}
}

func TestLostAnswersEndToEnd(t *testing.T) {
	c := testcluster.Get(t)
	cs := typed(t)
	round := func(t *testing.T, link *testcluster.LossyLink, strict bool) {
		ns := c.NewNamespace(t, "lossy")
		spec := lossySpec(t, ns)
		env := []string{"KUBECONFIG=" + link.Kubeconfig}
		before := link.Counts()
		res := run(t, bins.Kubectl, env, "", "apply", "-f", spec)
		noSelfConflict(t, "apply", res)
		if res.Code != 0 {
			if strict {
				t.Fatalf("apply: exit %d\n%s", res.Code, tail(res.Stderr, 40))
			}
			t.Logf("apply: exit %d (%s): the re-run converges", res.Code, tail(res.Stderr, 3))
			res = run(t, bins.Kubectl, env, "", "apply", "-f", spec)
			noSelfConflict(t, "the re-run", res)
			if res.Code != 0 {
				t.Fatalf("the re-run after a failed apply: exit %d\n%s", res.Code, tail(res.Stderr, 40))
			}
		}
		exact(t, cs, ns)
		again := run(t, bins.Kubectl, env, "", "apply", "-f", spec)
		noSelfConflict(t, "the re-run", again)
		if again.Code != 0 {
			t.Fatalf("the re-run: exit %d\n%s", again.Code, tail(again.Stderr, 40))
		}
		exact(t, cs, ns)
		destroy := run(t, bins.Kubectl, env, "", "destroy", "-f", spec, "--yes")
		noSelfConflict(t, "destroy", destroy)
		if destroy.Code != 0 {
			t.Fatalf("destroy: exit %d\n%s", destroy.Code, tail(destroy.Stderr, 40))
		}
		gone(t, cs, ns)
		n := link.Counts()
		t.Logf("round: %d requests, %d answers cut (%d of writes); apply %s, re-run %s, destroy %s",
			n.Requests-before.Requests, n.Cut-before.Cut, n.CutWrites-before.CutWrites,
			res.Elapsed.Round(100e6), again.Elapsed.Round(100e6), destroy.Elapsed.Round(100e6))
	}
	for _, tc := range []struct {
		name   string
		loss   float64
		rounds int
		strict bool // every round ends exit 0; else each converges within one re-run
	}{
		{"10% of answers lost", 0.10, 20, true},
		{"20% of answers lost", 0.20, 6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			link := c.NewLossyLink(t, testcluster.LossyOptions{Loss: tc.loss, Seed: uint64(tc.loss * 1000)})
			for i := 0; i < tc.rounds; i++ {
				if !t.Run(fmt.Sprintf("round %d", i+1), func(t *testing.T) { round(t, link, tc.strict) }) {
					return
				}
			}
		})
	}
}
