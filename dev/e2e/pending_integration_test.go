//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/testcluster"
)

// Pending releases: a run never tears down a release another operation
// is working on; it takes over only what is provably abandoned.

// pendingSpec: one helm step without state (so no run lock), installing
// a Deployment whose Pod nobody schedules (the test binds it) with
// wait: true unless WAIT says otherwise, with the step timeout T.
func pendingSpec(t *testing.T, ns string) string {
	return writeSpec(t, pendingSpecText(ns, ""))
}

func pendingSpecText(ns, extra string) string {
	return fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: pending}
%s
steps:
  - name: app
    timeout: ${T:-2m}
    helm:
      chart: %s
      namespace: %s
      wait: ${WAIT:-true}
      values: {schedulerName: khook-nobody}
`, extra, chartrepo.ChartDir("cmdeploy"), ns)
}

// releaseSecret is the storage Secret of the release's revision, nil
// while there is none.
func releaseSecret(t *testing.T, c kubernetes.Interface, ns, name string, revision int) *corev1.Secret {
	t.Helper()
	s, err := c.CoreV1().Secrets(ns).Get(context.Background(), fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, revision), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pendingInstall waits until revision 1 of release app is stored
// pending-install, and returns its Secret.
func pendingInstall(t *testing.T, c kubernetes.Interface, ns string, first *background) *corev1.Secret {
	t.Helper()
	var sec *corev1.Secret
	eventually(t, failAfter, "the first run's install stored pending-install", func() bool {
		sec = releaseSecret(t, c, ns, "app", 1)
		return sec != nil && sec.Labels["status"] == "pending-install"
	})
	return sec
}

// bindPod binds the release's Pod to a node once it exists: the
// Deployment gets ready.
func bindPod(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no node to bind to: %v", err)
	}
	var pod *corev1.Pod
	eventually(t, failAfter, "the release's Pod exists", func() bool {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=app"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName == "" && pods.Items[i].DeletionTimestamp == nil {
				pod = &pods.Items[i]
				return true
			}
		}
		return false
	})
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: nodes.Items[0].Name}}
	if err := c.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind Pod %s: %v", pod.Name, err)
	}
}

// TestSecondRunLeavesPendingInstallAlone: while one run installs a
// release with wait: true, a second run of the same spec (no state, so
// no lock between them) fails at once naming the release, and so does a
// destroy; the first run's release is untouched, and the first run
// succeeds once its Deployment gets ready.
func TestSecondRunLeavesPendingInstallAlone(t *testing.T) {
	c := typed(t)
	ns := testcluster.Get(t).NewNamespace(t, "pending-live")
	spec := pendingSpec(t, ns)
	first := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", spec, "-o", "json")
	sec := pendingInstall(t, c, ns, first)
	dep, err := c.AppsV1().Deployments(ns).Get(context.Background(), "app", metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}

	want := "release app (" + ns + "): another operation (install/upgrade/rollback) is in progress: revision 1 has been pending-install for "
	for _, cmd := range []string{"apply", "destroy"} {
		r, res := applyJSON(t, cmd, spec, kubeEnv(t))
		if res.Code != 1 {
			t.Errorf("second %s: exit %d, want 1\n%s", cmd, res.Code, res.Stderr)
		}
		status, _, errText, _ := r.step(t, "app")
		t.Logf("second %s: exit %d: step app %s: %s", cmd, res.Code, status, errText)
		if status != "failed" || !strings.Contains(errText, want) {
			t.Errorf("second %s: step app %s: %q, want it failed with %q", cmd, status, errText, want)
		}
	}
	now := releaseSecret(t, c, ns, "app", 1)
	if now == nil || now.ResourceVersion != sec.ResourceVersion || releaseSecret(t, c, ns, "app", 2) != nil {
		t.Fatalf("the second runs touched the first run's release: %v", now)
	}
	if dep != nil && dep.UID != "" {
		if d, err := c.AppsV1().Deployments(ns).Get(context.Background(), "app", metav1.GetOptions{}); err != nil || d.UID != dep.UID {
			t.Fatalf("the first run's Deployment was replaced or deleted: %v", err)
		}
	}

	bindPod(t, c, ns)
	if code := first.exit(t, "the first apply"); code != 0 {
		t.Fatalf("the first apply: exit %d\n%s", code, first.output())
	}
	var r report
	if err := json.Unmarshal(first.stdout.Bytes(), &r); err != nil {
		t.Fatalf("the first apply's report: %v\n%s", err, first.output())
	}
	status, _, errText, _ := r.step(t, "app")
	t.Logf("the first apply: step app %s %s", status, errText)
	if status != "ok" {
		t.Errorf("the first apply: step app %s: %s", status, errText)
	}
	if s := releaseSecret(t, c, ns, "app", 1); s == nil || s.Labels["status"] != "deployed" || releaseSecret(t, c, ns, "app", 2) != nil {
		t.Errorf("after the first run: revision 1 is %v, want the only one, deployed", s.Labels)
	}
}

// TestKilledRunsPendingInstallIsRecoveredAfterTheTimeout: a run killed
// while installing leaves its release pending-install; a later run
// refuses it while it is younger than the step timeout, and once it is
// older, uninstalls it and installs again, as after any interrupted run.
func TestKilledRunsPendingInstallIsRecoveredAfterTheTimeout(t *testing.T) {
	c := typed(t)
	ns := testcluster.Get(t).NewNamespace(t, "pending-killed")
	spec := pendingSpec(t, ns)
	first := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", spec)
	sec := pendingInstall(t, c, ns, first)
	if first.kill() {
		t.Fatalf("the first apply ended before it was killed:\n%s", first.output())
	}

	if r, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 1 {
		t.Errorf("apply within the timeout: exit %d, want 1\n%s", res.Code, res.Stderr)
	} else if _, _, errText, _ := r.step(t, "app"); !strings.Contains(errText, "is in progress: revision 1 has been pending-install") {
		t.Errorf("apply within the timeout: %q", errText)
	}

	// The release's time (LastDeployed) is the killed run's, before its
	// Secret was created: once the step timeout has passed since the
	// Secret's creation, the release is older than the timeout.
	const timeout = 10 * time.Second
	<-time.After(time.Until(sec.CreationTimestamp.Add(timeout + time.Second)))
	env := kubeEnv(t, "KHOOK_VAR_T=10s", "KHOOK_VAR_WAIT=false")
	r, res := applyJSON(t, "apply", spec, env)
	if res.Code != 0 {
		t.Fatalf("apply after the timeout: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	var msg string
	for _, s := range r.Steps {
		if s.Name == "app" {
			msg = s.Message
		}
	}
	if !strings.Contains(msg, "recovered: revision 1 was left pending-install ") || !strings.Contains(msg, "longer than the step's timeout (10s): uninstalled it and installed again") {
		t.Errorf("apply after the timeout: %q", msg)
	}
	if s := releaseSecret(t, c, ns, "app", 1); s == nil || s.Labels["status"] != "deployed" || s.UID == sec.UID {
		t.Errorf("after the recovery: revision 1 is %v, want a new one, deployed", s)
	}
}

// TestTakenOverRunsPendingInstallIsRecoveredAtOnce: with a state record,
// a run killed while installing leaves its release pending-install and
// its run lock to expire; the run that takes the lock over knows that run
// is gone, and recovers the release at once, long before the step
// timeout.
func TestTakenOverRunsPendingInstallIsRecoveredAtOnce(t *testing.T) {
	c := typed(t)
	ns := testcluster.Get(t).NewNamespace(t, "pending-taken")
	spec := writeSpec(t, pendingSpecText(ns, "state: {namespace: "+ns+"}"))
	first := startBackground(t, bins.Kubectl, kubeEnv(t), "apply", "-f", spec)
	sec := pendingInstall(t, c, ns, first)
	if first.kill() {
		t.Fatalf("the first apply ended before it was killed:\n%s", first.output())
	}
	run := sec.Labels["khook.io/run"]
	if run == "" || sec.Labels["khook.io/run-revision"] != "1" {
		t.Fatalf("the pending revision does not name its run: %v", sec.Labels)
	}
	// the step timeout stays 2m: only the lock says the first run is gone
	r, res := applyJSON(t, "apply", spec, kubeEnv(t, "KHOOK_VAR_WAIT=false"), "--lock-timeout", "1m")
	if res.Code != 0 {
		t.Fatalf("apply after the takeover: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	var msg string
	for _, s := range r.Steps {
		if s.Name == "app" {
			msg = s.Message
		}
	}
	if want := "recovered: revision 1 was left pending-install by khook run " + run + ", which is gone (its run lock expired): uninstalled it and installed again"; !strings.Contains(msg, want) {
		t.Errorf("apply after the takeover: %q, want %q", msg, want)
	}
	if s := releaseSecret(t, c, ns, "app", 1); s == nil || s.Labels["status"] != "deployed" || s.UID == sec.UID {
		t.Errorf("after the recovery: revision 1 is %v, want a new one, deployed", s)
	}
}
