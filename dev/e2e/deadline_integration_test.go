//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"khook.io/core/state"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/testcluster"
)

// The bounds of the deadline test (docs/spec.md 242): generous by design,
// they are what the user was promised, not a measure of speed.
const (
	// a helm step with a 5 s timeout fails within stepBound of the run's
	// start, however long the API server is down (the step's 5 s, kube.Grace
	// for helm's last write, and slack for a loaded machine)
	stepBound = 10 * time.Second
	// a run interrupted (SIGINT) while the API server is down ends within
	// interruptBound (kube.Grace for the steps, kube.Grace for the run's
	// last record write and lock release, and slack)
	interruptBound = 5 * time.Second
)

// deadlineSpec is a state-enabled spec in ns whose helm step "app"
// (timeout) installs a Deployment whose Pod nobody schedules, and with
// wait waits for it.
func deadlineSpec(t *testing.T, ns, timeout string, wait bool) string {
	t.Helper()
	return writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: app
    timeout: %[3]s
    helm: {chart: %[2]s, namespace: %[1]s, wait: %[4]v, values: {schedulerName: khook-nobody}}
`, ns, chartrepo.ChartDir("cmdeploy"), timeout, wait))
}

// claimsNoMore checks the record a run left when it could not write its
// end: the helm step is not recorded ok.
func claimsNoMore(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	rec := readRecord(t, cs, ns, "khook-state-"+ns)
	if rec == nil {
		t.Fatal("no record")
	}
	if e := rec.Steps["app"]; e != nil && e.Status == state.StepOK || rec.RunStatus == "ok" {
		t.Errorf("the record claims more than happened: %s", recordJSON(rec))
	}
}

// deadlinesThroughAnOutage: during a 30 s outage, a helm step with a 5 s
// timeout fails within stepBound, and SIGINT ends a run within
// interruptBound (helm 4 writes with context.Background(): its writes are
// bound to the step's context); neither leaves a record that claims more
// than happened, and the next run, once the server is back, takes over
// the run lock and the release each left pending.
func deadlinesThroughAnOutage(t *testing.T, c *testcluster.Cluster, cs kubernetes.Interface, env []string) {
	timed := plainNamespace(t, cs, "deadline")
	timedSpec := deadlineSpec(t, timed, "5s", true)
	cut := plainNamespace(t, cs, "sigint")
	cutSpec := deadlineSpec(t, cut, "5m", true)

	cutRun := startBackground(t, bins.Kubectl, env, "apply", "-f", cutSpec)
	holding(t, cs, cut, cutRun)
	pendingInstall(t, cs, cut, cutRun)
	started := time.Now()
	timedRun := startBackground(t, bins.Kubectl, env, "apply", "-f", timedSpec)
	holding(t, cs, timed, timedRun)
	pendingInstall(t, cs, timed, timedRun)

	outage := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		took, err := c.Outage(ctx, 30*time.Second, 5*time.Second)
		t.Logf("the API server was down and ready again after %s", took.Round(100*time.Millisecond))
		outage <- err
	}()
	if err := waitRefused(c.Ports.APIServer); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	interrupted := time.Now()
	if err := cutRun.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := cutRun.exit(t, "the interrupted run")
	if took := time.Since(interrupted); took > interruptBound {
		t.Errorf("SIGINT during the outage ended the run after %s, want within %s:\n%s", took.Round(10*time.Millisecond), interruptBound, tail(cutRun.Stderr(), 20))
	} else {
		t.Logf("SIGINT during the outage ended the run after %s (exit %d)", took.Round(10*time.Millisecond), code)
	}
	if code != 1 {
		t.Errorf("the interrupted run: exit %d, want 1", code)
	}

	timedRun.waitStderr(t, "app  failed after")
	if took := time.Since(started); took > stepBound {
		t.Errorf("the helm step with a 5s timeout failed %s after the run began, want within %s", took.Round(10*time.Millisecond), stepBound)
	} else {
		t.Logf("the helm step with a 5s timeout failed %s after the run began", took.Round(10*time.Millisecond))
	}
	if code := timedRun.exit(t, "the run whose step timed out"); code != 1 {
		t.Errorf("the run whose step timed out: exit %d, want 1", code)
	}
	if err := <-outage; err != nil {
		t.Fatal(err)
	}

	for _, ns := range []string{timed, cut} {
		claimsNoMore(t, cs, ns)
		// the next run, on the same record and lock (without the wait:
		// after a restart the controllers take their time to make Pods):
		// it takes over the release the run left pending-install at once,
		// either as left by a run whose lock it took over (a run that
		// could not release its lock during the outage) or as left by a
		// run that held the lock it holds now
		next := startBackground(t, bins.Kubectl, env, "apply", "-f", deadlineSpec(t, ns, "2m", false))
		if code := next.exit(t, "the next run"); code != 0 {
			t.Fatalf("the next run in %s: exit %d\n%s", ns, code, tail(next.Stderr(), 40))
		}
		if !strings.Contains(next.Stderr(), "was left pending-install by khook run") {
			t.Errorf("the next run in %s does not say it took over the pending release:\n%s", ns, next.Stderr())
		}
		consistent(t, cs, ns, "app")
	}
}
