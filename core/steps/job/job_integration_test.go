//go:build integration

package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"khook.io/core/kube"
	"khook.io/core/objects"
	khplan "khook.io/core/plan"
	"khook.io/core/step"
	"khook.io/core/steps/job"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func request(t *testing.T, c *kube.Clients, y string, opts steptest.Options) *step.Request {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	return steptest.Request(t, c, y, opts)
}

// run runs the step with ctx bounded by the request's timeout, as the
// scheduler does.
func run(t *testing.T, req *step.Request) (step.Outcome, error) {
	t.Helper()
	return steptest.Run(job.New(), req)
}

func plan(t *testing.T, req *step.Request) (step.Prediction, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return step.PlanStep(ctx, job.New(), req)
}

func destroy(t *testing.T, req *step.Request) (step.Outcome, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return step.DestroyStep(ctx, job.New(), req)
}

func getJob(t *testing.T, c *kube.Clients, ns, name string) *batchv1.Job {
	t.Helper()
	j, err := c.Typed.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestJobSucceedsWithEveryField(t *testing.T) {
	c, ns := steptest.Setup(t, "job-ok")
	ctx := context.Background()
	if _, err := c.Typed.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	req := request(t, c, `name: migrate
job:
  image: example.invalid/tools:1.2
  command: ["sh", "-c"]
  args: ["echo migrating"]
  env:
    REGION: eu-west-1
    A_FIRST: "1"
  serviceAccount: runner`, steptest.Options{Timeout: 90*time.Second + 300*time.Millisecond})
	req.DefaultNamespace = ns
	if p, err := plan(t, req); err != nil || p.Action.Word != khplan.ActionRun {
		t.Errorf("plan = %+v, %v; want run", p, err)
	}
	out, err := run(t, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outcome: %s", out.Message)
	j := getJob(t, c, ns, "migrate")
	if !job.Succeeded(j) || !job.Owned(j) {
		t.Errorf("the Job is not complete or not labelled: %+v", j.Status.Conditions)
	}
	wantLabels := map[string]string{objects.LabelManagedBy: "khook", job.LabelSpec: "steptest", job.LabelStep: "migrate"}
	for k, v := range wantLabels {
		if j.Labels[k] != v || j.Spec.Template.Labels[k] != v {
			t.Errorf("label %s = %q (pod template %q), want %q", k, j.Labels[k], j.Spec.Template.Labels[k], v)
		}
	}
	if *j.Spec.BackoffLimit != 0 || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("backoffLimit %d, restartPolicy %s", *j.Spec.BackoffLimit, j.Spec.Template.Spec.RestartPolicy)
	}
	if d := j.Spec.ActiveDeadlineSeconds; d == nil || *d != 91 {
		t.Errorf("activeDeadlineSeconds = %v, want 91 (90.3s rounded up)", d)
	}
	ps := j.Spec.Template.Spec
	ctr := ps.Containers[0]
	if ps.ServiceAccountName != "runner" || ctr.Image != "example.invalid/tools:1.2" ||
		!reflect.DeepEqual(ctr.Command, []string{"sh", "-c"}) || !reflect.DeepEqual(ctr.Args, []string{"echo migrating"}) ||
		!reflect.DeepEqual(ctr.Env, []corev1.EnvVar{{Name: "A_FIRST", Value: "1"}, {Name: "REGION", Value: "eu-west-1"}}) {
		t.Errorf("pod spec = %+v", ps)
	}
}

func TestCreateNamespace(t *testing.T) {
	c, existing := steptest.Setup(t, "job-ns")
	ctx := context.Background()
	fresh := existing + "-new"
	t.Cleanup(func() { _ = c.Typed.CoreV1().Namespaces().Delete(context.Background(), fresh, metav1.DeleteOptions{}) })
	req := request(t, c, "name: j\njob:\n  image: x\n  namespace: "+fresh+"\n  createNamespace: true", steptest.Options{})
	if p, err := plan(t, req); err != nil || p.Action.Word != khplan.ActionRun || !strings.HasPrefix(p.Reason, "create namespace ") {
		t.Errorf("plan = %+v, %v", p, err)
	}
	if _, err := run(t, req); err != nil {
		t.Fatal(err)
	}
	getJob(t, c, fresh, "j")
	// an existing namespace is left alone
	before, err := c.Typed.CoreV1().Namespaces().Get(ctx, existing, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req = request(t, c, "name: j\njob:\n  image: x\n  namespace: "+existing+"\n  createNamespace: true", steptest.Options{})
	if _, err := run(t, req); err != nil {
		t.Fatal(err)
	}
	after, err := c.Typed.CoreV1().Namespaces().Get(ctx, existing, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the existing namespace was modified: %v -> %v", before.Labels, after.Labels)
	}
	// without createNamespace, a missing namespace is unknown in a plan
	// and a clear error in a run
	req = request(t, c, "name: j\njob:\n  image: x\n  namespace: "+existing+"-missing", steptest.Options{})
	if p, err := plan(t, req); err != nil || p.Action.Word != khplan.ActionUnknown {
		t.Errorf("plan = %+v, %v; want unknown", p, err)
	}
	if _, err := run(t, req); err == nil || !strings.Contains(err.Error(), "namespace "+existing+"-missing does not exist (set createNamespace: true") {
		t.Errorf("err = %v", err)
	}
}

func TestNotOwnedJobIsRefused(t *testing.T) {
	c, ns := steptest.Setup(t, "job-foreign")
	ctx := context.Background()
	bo := int32(0)
	foreign, err := c.Typed.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "seed", Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}},
		Spec: batchv1.JobSpec{BackoffLimit: &bo, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := request(t, c, "name: seed\njob:\n  image: x\n  namespace: "+ns, steptest.Options{})
	want := "Job " + ns + "/seed exists and is not managed by khook (no app.kubernetes.io/managed-by: khook label): khook never replaces a Job it does not own; delete it or rename the step"
	if _, err := run(t, req); err == nil || err.Error() != want {
		t.Errorf("run err = %v\nwant %s", err, want)
	}
	if _, err := plan(t, req); err == nil || err.Error() != want {
		t.Errorf("plan err = %v", err)
	}
	out, err := destroy(t, req)
	if err != nil || !out.Skipped || out.SkipReason != "Job "+ns+"/seed is not managed by khook: left alone" {
		t.Errorf("destroy = %+v, %v", out, err)
	}
	if j := getJob(t, c, ns, "seed"); j.UID != foreign.UID || j.DeletionTimestamp != nil || !reflect.DeepEqual(j.Labels, foreign.Labels) {
		t.Errorf("the foreign Job was touched")
	}
}

func TestSkipIfSucceededAndReplace(t *testing.T) {
	c, ns := steptest.Setup(t, "job-rerun")
	spec := "name: once\njob:\n  image: x\n  namespace: " + ns
	if _, err := run(t, request(t, c, spec, steptest.Options{})); err != nil {
		t.Fatal(err)
	}
	first := getJob(t, c, ns, "once")

	skipReq := request(t, c, spec+"\n  skipIf: succeeded", steptest.Options{})
	if p, err := plan(t, skipReq); err != nil || p.Action.Word != khplan.ActionSkip {
		t.Errorf("plan = %+v, %v; want skip", p, err)
	}
	out, err := run(t, skipReq)
	if err != nil || !out.Skipped || !strings.HasPrefix(out.SkipReason, "Job "+ns+"/once already completed successfully at ") {
		t.Fatalf("skipIf run = %+v, %v", out, err)
	}
	if j := getJob(t, c, ns, "once"); j.UID != first.UID {
		t.Error("skipIf: succeeded replaced the Job")
	}

	// without skipIf, a re-run replaces the Job
	req := request(t, c, spec, steptest.Options{})
	if p, err := plan(t, req); err != nil || p.Action.Word != khplan.ActionRun || !strings.HasPrefix(p.Reason, "replace ") {
		t.Errorf("plan = %+v, %v", p, err)
	}
	if _, err := run(t, req); err != nil {
		t.Fatal(err)
	}
	second := getJob(t, c, ns, "once")
	if second.UID == first.UID || !job.Succeeded(second) {
		t.Errorf("the re-run did not replace the Job (uid %s -> %s)", first.UID, second.UID)
	}
}

// failPods plays the kubelet for the step's pods in ns: kwok only ever
// completes Job pods successfully, so each pod is marked Failed, its
// container terminated with exitCode 1 and message, before kwok's stage
// completes it (one second after it runs).
func failPods(t *testing.T, c *kube.Clients, ns, stepName, message string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Typed.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: job.LabelStep + "=" + stepName})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		failed := map[types.UID]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			// once kwok made the pod Running; again when kwok's delayed
			// stage completes it anyway (it plays once)
			if !ok || ev.Type == watch.Deleted || p.Status.Phase == corev1.PodPending ||
				failed[p.UID] && p.Status.Phase == corev1.PodFailed {
				continue
			}
			failed[p.UID] = true
			now := metav1.Now()
			patch, err := json.Marshal(map[string]any{"status": corev1.PodStatus{
				Phase: corev1.PodFailed,
				ContainerStatuses: []corev1.ContainerStatus{{
					Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 1, Reason: "Error", Message: message, StartedAt: now, FinishedAt: now,
					}},
				}},
			}})
			if err != nil {
				t.Error(err)
				return
			}
			// a patch, not an update: kwok writes the status too
			if _, err := c.Typed.CoreV1().Pods(ns).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && ctx.Err() == nil {
				t.Errorf("fail pod %s: %v", p.Name, err)
			}
		}
	}()
	return func() {
		cancel()
		w.Stop()
		<-done
	}
}

func TestFailedJob(t *testing.T) {
	c, ns := steptest.Setup(t, "job-fail")
	const secret = "hunter2-planted-secret"
	stop := failPods(t, c, ns, "breaks", "connecting with password "+secret+": refused")
	defer stop()
	req := request(t, c, "name: breaks\njob:\n  image: x\n  namespace: "+ns+"\n  args: [\"--password=${PASSWORD}\"]",
		steptest.Options{Env: []string{"KHOOK_SECRET_PASSWORD=" + secret}})
	began := time.Now()
	_, err := run(t, req)
	if err == nil {
		t.Fatal("a failed Job succeeded")
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("the failure took %s to be reported", d)
	}
	msg := err.Error()
	t.Logf("error: %s", msg)
	want := "Job " + ns + "/breaks failed (BackoffLimitExceeded: Job has reached the specified backoff limit); cause: Pod " + ns + "/breaks-"
	if !strings.HasPrefix(msg, want) {
		t.Errorf("err = %s\nwant a prefix %s", msg, want)
	}
	// The pod's status is the test's (exit code 1, a message quoting the
	// secret) unless kwok's delayed stage completed the pod in between: it
	// plays one second after the pod runs, as the Job controller, which
	// batches pod updates for a second, decides.
	switch {
	case strings.Contains(msg, ": container breaks exited with code 1 (Error: connecting with password ***: refused)"):
	case strings.Contains(msg, ": container breaks exited with code 0 (Completed)"):
		t.Logf("kwok overwrote the failed pod's status before khook read it")
	default:
		t.Errorf("err = %s\nwant the container's exit code and its (redacted) termination message", msg)
	}
	// kwok serves no pod logs: the error says why they are missing
	if !strings.Contains(msg, "; its logs are unavailable: ") && !strings.Contains(msg, "log line") {
		t.Errorf("err = %s\nwant the logs or why there are none", msg)
	}
	if strings.Contains(msg, secret) {
		t.Fatalf("the error shows the secret: %s", msg)
	}
	// the next run replaces the failed Job
	stop()
	if _, err := run(t, request(t, c, "name: breaks\njob:\n  image: x\n  namespace: "+ns, steptest.Options{})); err != nil {
		t.Fatalf("re-run after a failure: %v", err)
	}
}

func TestJobDeadlineExceeded(t *testing.T) {
	c, ns := steptest.Setup(t, "job-deadline")
	// a ServiceAccount that does not exist: the Job controller can create
	// no pod, so the Job runs into its activeDeadlineSeconds (the timeout)
	req := request(t, c, "name: stuck\njob:\n  image: x\n  namespace: "+ns+"\n  serviceAccount: nobody", steptest.Options{Timeout: 2 * time.Second})
	// a context longer than the step timeout, to see the Job's own verdict
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := step.RunStep(ctx, job.New(), req)
	want := "Job " + ns + "/stuck failed (DeadlineExceeded: Job was active longer than specified deadline); cause: Job " + ns + "/stuck: FailedCreate: Error creating: pods \"stuck-"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `serviceaccount "nobody" not found`) {
		t.Fatalf("err = %v\nwant %s... serviceaccount \"nobody\" not found", err, want)
	}
	// as the scheduler runs it: the step deadline and the Job's coincide
	_, err = run(t, req)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "DeadlineExceeded") {
		t.Fatalf("err = %v", err)
	}
	t.Logf("error: %v", err)
}

func TestDestroy(t *testing.T) {
	c, ns := steptest.Setup(t, "job-destroy")
	req := request(t, c, "name: gone\njob:\n  image: x\n  namespace: "+ns, steptest.Options{})
	if _, err := run(t, req); err != nil {
		t.Fatal(err)
	}
	out, err := destroy(t, req)
	if err != nil || out.Message != "Job "+ns+"/gone deleted" {
		t.Fatalf("destroy = %+v, %v", out, err)
	}
	if _, err := c.Typed.BatchV1().Jobs(ns).Get(context.Background(), "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Job is still there after destroy: %v", err)
	}
	out, err = destroy(t, req)
	if err != nil || out.Message != "Job "+ns+"/gone already gone" {
		t.Errorf("second destroy = %+v, %v", out, err)
	}
}

func TestLimitedUserForbidden(t *testing.T) {
	cl := testcluster.Get(t)
	c := steptest.Clients(t, cl.LimitedRESTConfig(t))
	req := request(t, c, "name: j\njob:\n  image: x\n  namespace: default", steptest.Options{})
	_, err := run(t, req)
	if err == nil || !strings.Contains(err.Error(), `jobs.batch "j" is forbidden: User "khook-limited" cannot get resource "jobs"`) {
		t.Errorf("err = %v", err)
	}
	// in its namespace it may run jobs; createNamespace of that existing
	// namespace, which it may neither read nor create, is no error
	req = request(t, c, "name: j\njob:\n  image: x\n  createNamespace: true\n  namespace: "+cl.LimitedNamespace, steptest.Options{})
	if _, err := run(t, req); err != nil {
		t.Fatalf("limited user in its namespace: %v", err)
	}
	if _, err := destroy(t, req); err != nil {
		t.Fatal(err)
	}
}

// servePodLogs makes kwok serve logFile as the log of every container in
// ns, through a kwok ClusterLogs object, and returns once a probe pod's log
// reads as the file. The project's test cluster always serves them (kwok's
// ClusterLogs CRD, and a kwok server the API server reaches): a cluster
// that does not fails the test.
func servePodLogs(t *testing.T, c *kube.Clients, ns, logFile string) {
	t.Helper()
	m, err := c.MappingForType(context.Background(), "clusterlogs.kwok.x-k8s.io")
	if err != nil {
		t.Fatalf("kwok serves no pod logs in this test cluster (%v): the test cluster enables kwok's ClusterLogs CRD", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
		"metadata": map[string]any{"name": ns},
		"spec": map[string]any{
			"selector": map[string]any{"matchNamespaces": []any{ns}},
			"logs":     []any{map[string]any{"logsFile": logFile}},
		},
	}}
	if _, err := c.Resource(m, "").Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Resource(m, "").Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	probe, err := c.Typed.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "log-probe"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "x"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	// kwok serves the file's CRI lines without their prefixes
	wantLast := string(want)
	if i := strings.LastIndex(strings.TrimSpace(wantLast), " F "); i >= 0 {
		wantLast = strings.TrimSpace(wantLast)[i+3:]
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		raw, err := c.Typed.CoreV1().Pods(ns).GetLogs(probe.Name, &corev1.PodLogOptions{Container: "probe"}).Do(ctx).Raw()
		if err == nil && strings.HasSuffix(strings.TrimSpace(string(raw)), wantLast) {
			return
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("kwok serves no pod logs in this test cluster within 30 s (last error: %v)", last)
		case <-tick.C:
		}
	}
}

// TestFailedJobLogs proves the log path end to end: the API server's
// pods/log, served by kwok from a file the test writes, read by the step
// on failure, cut to the last lines, redacted.
func TestFailedJobLogs(t *testing.T) {
	c, ns := steptest.Setup(t, "job-logs")
	const secret = "s3cr3t-in-the-logs"
	var lines []string
	for i := 1; i <= 25; i++ {
		text := fmt.Sprintf("step %02d done", i)
		if i == 24 {
			text = "connecting to db with password " + secret
		}
		lines = append(lines, fmt.Sprintf("2026-11-22T05:00:%02d.000000000Z stdout F %s", i, text))
	}
	logFile := filepath.Join(t.TempDir(), "pod.log")
	if err := os.WriteFile(logFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	servePodLogs(t, c, ns, logFile)
	// kwok fails the pod itself (KHOOK_TEST_EXIT_CODE): failPods would race
	// kwok's stage completing it, and lose on a loaded machine
	req := request(t, c, "name: migrate\njob:\n  image: x\n  namespace: "+ns+"\n  env: {DB_PASSWORD: \"${PASSWORD}\", KHOOK_TEST_EXIT_CODE: \"1\"}",
		steptest.Options{Env: []string{"KHOOK_SECRET_PASSWORD=" + secret}})
	_, err := run(t, req)
	if err == nil {
		t.Fatal("a failed Job succeeded")
	}
	msg := err.Error()
	t.Logf("error: %s", msg)
	if strings.Contains(msg, secret) {
		t.Fatalf("the error shows the secret: %s", msg)
	}
	want := "; last 20 log lines:\n    step 06 done\n    step 07 done\n"
	if !strings.Contains(msg, want) || !strings.HasSuffix(msg, "\n    connecting to db with password ***\n    step 25 done") {
		t.Errorf("err = %s\nwant the last 20 lines (06 to 25), the secret masked", msg)
	}
	if strings.Contains(msg, "step 05 done") {
		t.Errorf("err holds more than the last 20 lines")
	}
}

// TestJobFailedByKwok runs a Job that kwok itself fails (the test
// cluster's kwok stage for pods setting KHOOK_TEST_EXIT_CODE): no race with
// the test playing the kubelet. A cluster without that stage completes the
// Job, and the test fails.
func TestJobFailedByKwok(t *testing.T) {
	c, ns := steptest.Setup(t, "job-kwokfail")
	logFile := filepath.Join(t.TempDir(), "pod.log")
	if err := os.WriteFile(logFile, []byte("2026-11-22T05:00:00.000000000Z stderr F fatal: migration 42 failed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	servePodLogs(t, c, ns, logFile)
	req := request(t, c, "name: exits\njob:\n  image: x\n  namespace: "+ns+"\n  env: {KHOOK_TEST_EXIT_CODE: \"3\"}", steptest.Options{})
	_, err := run(t, req)
	if err == nil {
		t.Fatal("the Job succeeded: the test cluster's kwok has no stage failing pods with KHOOK_TEST_EXIT_CODE")
	}
	msg := err.Error()
	t.Logf("error: %s", msg)
	want := "Job " + ns + "/exits failed (BackoffLimitExceeded: Job has reached the specified backoff limit); cause: Pod " + ns + "/exits-"
	if !strings.HasPrefix(msg, want) || !strings.Contains(msg, ": container exits exited with code 3 (Error)") {
		t.Errorf("err = %s\nwant %s...: container exits exited with code 3 (Error)", msg, want)
	}
	if !strings.HasSuffix(msg, "; last log line:\n    fatal: migration 42 failed") {
		t.Errorf("err = %s\nwant the log line", msg)
	}
}

// TestJobDeletedWhileWaitedFor: someone deletes the step's Job while khook
// waits for it (a cleanup policy, a person): the step fails at once,
// saying so, instead of waiting for a Job that is gone until its timeout.
func TestJobDeletedWhileWaitedFor(t *testing.T) {
	c, ns := steptest.Setup(t, "job-deleted")
	// no pod can be created for it: it stays unfinished
	req := request(t, c, "name: stuck\njob:\n  image: x\n  namespace: "+ns+"\n  serviceAccount: nobody", steptest.Options{Timeout: time.Minute})
	var mu sync.Mutex
	var lines []string
	req.Log = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	waiting := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(lines, func(s string) bool { return strings.Contains(s, "Job "+ns+"/stuck") })
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deleted := make(chan error, 1)
	go func() {
		for ctx.Err() == nil && !waiting() {
			time.Sleep(50 * time.Millisecond)
		}
		bg := metav1.DeletePropagationBackground
		deleted <- c.Typed.BatchV1().Jobs(ns).Delete(ctx, "stuck", metav1.DeleteOptions{PropagationPolicy: &bg})
	}()
	began := time.Now()
	_, err := run(t, req)
	if derr := <-deleted; derr != nil {
		t.Fatalf("delete the Job: %v", derr)
	}
	want := "Job " + ns + "/stuck was deleted while khook waited for it, unfinished (no pod running yet)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %q", err, want)
	}
	t.Logf("failed after %s: %v", time.Since(began).Round(100*time.Millisecond), err)
}
