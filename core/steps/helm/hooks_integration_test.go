//go:build integration

package helm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/testing/steptest"
)

// hookJob is a hook Job of the chart: name, its hook annotations, and the
// lines its spec and its pod's spec add.
func hookJob(name, hooks, weight, jobExtra, podExtra string) string {
	return "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: " + name + "\n  annotations:\n    helm.sh/hook: " + hooks +
		"\n    helm.sh/hook-weight: \"" + weight + "\"\n    helm.sh/hook-delete-policy: before-hook-creation\nspec:\n  backoffLimit: 0\n" + jobExtra +
		"  template:\n    spec:\n      restartPolicy: Never\n" + podExtra +
		"      containers:\n      - name: run\n        image: registry.invalid/run:1\n"
}

// TestHookDeletedWhileWaitedFor: a hook Job that is deleted while Helm
// waits for it ends that wait, as Helm 3 ended it on the delete event
// (Helm 4's status watcher waits for it until its timeout). The Jobs of
// ingress-nginx's admission webhook set ttlSecondsAfterFinished: 0, so
// the TTL controller deletes them the moment they complete, often before
// a wait has seen them complete. A Job deleted Failed still fails the
// hook, by the final state its delete event carries.
func TestHookDeletedWhileWaitedFor(t *testing.T) {
	f := newFixture(t)
	ttl := "  ttlSecondsAfterFinished: 0\n"
	{ // completed and deleted at once
		ns := f.cluster.NewNamespace(t, "hook-ttl")
		var jobs []string
		for i := range 4 {
			jobs = append(jobs, hookJob(fmt.Sprintf("ttl-%d", i), "post-install,post-upgrade", fmt.Sprint(i), ttl, ""))
		}
		dir := localChart(t, "ttl", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {v: \"{{ .Values.v }}\"}\n---\n"+strings.Join(jobs, "---\n"), "")
		for _, v := range []string{"1", "2"} { // an install, then an upgrade
			r := f.request(driftStep("ttl", dir, ns)+"\n  values: {v: \""+v+"\"}", steptest.Options{Timeout: 60 * time.Second})
			f.apply(r)
		}
		if st := f.status(ns, "ttl"); st == nil || st.Status != "deployed" || st.Revision != 2 {
			t.Errorf("release: %+v, want revision 2 deployed", st)
		}
	}
	{ // deleted before it could run
		ns := f.cluster.NewNamespace(t, "hook-gone")
		// no pod can be created for it: its wait would last to the timeout
		dir := localChart(t, "gone", hookJob("stuck", "post-install", "0", "", "      serviceAccountName: no-such-account\n"), "")
		r := f.request(driftStep("gone", dir, ns), steptest.Options{Timeout: 60 * time.Second})
		// once the wait for it shows, so that the wait sees it deleted
		deleted := f.deleteJobOnce(r, ns, "stuck", "waiting for completion of the hook on Job "+ns+"/stuck")
		began := time.Now()
		f.apply(r)
		if err := <-deleted; err != nil {
			t.Fatalf("delete the hook Job: %v", err)
		}
		t.Logf("the install took %s, the hook Job deleted while it waited", time.Since(began).Round(100*time.Millisecond))
	}
	{ // failed and deleted at once
		ns := f.cluster.NewNamespace(t, "hook-ttl-fail")
		fails := "      containers:\n      - name: run\n        image: registry.invalid/run:1\n        env: [{name: KHOOK_TEST_EXIT_CODE, value: \"3\"}]\n"
		job := strings.SplitAfter(hookJob("migrate", "post-install", "0", ttl, ""), "      containers:\n")[0]
		job = strings.TrimSuffix(job, "      containers:\n") + fails
		dir := localChart(t, "fails", job, "")
		err := f.applyErr(f.request(driftStep("fails", dir, ns), steptest.Options{Timeout: 60 * time.Second}))
		if want := "Job " + ns + "/migrate failed: BackoffLimitExceeded"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	{ // a release's own Job with a TTL, under wait: true
		ns := f.cluster.NewNamespace(t, "job-ttl")
		// it completes, and is deleted at once
		done := strings.Replace(hookJob("done", "x", "0", ttl, ""), "    helm.sh/hook: x\n", "", 1)
		// suspended, it never starts (kstatus: "Job not started", not
		// ready), and is deleted while waited for: the TTL controller
		// deletes only finished Jobs, so a Job with a TTL that is gone is
		// taken as finished
		stuck := strings.Replace(hookJob("stuck", "x", "0", ttl+"  suspend: true\n", ""), "    helm.sh/hook: x\n", "", 1)
		dir := localChart(t, "jobttl", done+"---\n"+stuck, "")
		r := f.request(driftStep("jobttl", dir, ns)+"\n  wait: true", steptest.Options{Timeout: 60 * time.Second})
		deleted := f.deleteJobOnce(r, ns, "stuck", "Job "+ns+"/stuck")
		f.apply(r)
		if err := <-deleted; err != nil {
			t.Fatalf("delete the Job: %v", err)
		}
	}
}

// deleteJobOnce deletes Job ns/name once r's progress shows line (within
// a minute), and sends the delete's error.
func (f *fixture) deleteJobOnce(r *run, ns, name, line string) <-chan error {
	deleted := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for ctx.Err() == nil && !strings.Contains(r.logs(), line) {
			time.Sleep(50 * time.Millisecond)
		}
		bg := metav1.DeletePropagationBackground
		deleted <- f.clients.Typed.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	}()
	return deleted
}
