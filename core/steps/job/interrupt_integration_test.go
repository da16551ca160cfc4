//go:build integration

package job_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"khook.io/core/kube"
	"khook.io/core/step"
	"khook.io/core/steps/job"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

// interruptNoter is what the scheduler reads an interrupted attempt's
// note from (run.InterruptNoter).
type interruptNoter interface{ InterruptNote() string }

// runInterrupted runs a Job step that never finishes (its service account
// does not exist, so no pod is ever created), cancels the run's context
// as Ctrl-C does once the Job exists, and returns the attempt's error.
func runInterrupted(t *testing.T, c *kube.Clients, admin *kube.Clients, ns, name string) error {
	t.Helper()
	req := request(t, c, "name: "+name+"\njob:\n  image: busybox\n  serviceAccount: missing\n  namespace: "+ns, steptest.Options{Timeout: 2 * time.Minute})
	w, err := admin.Typed.BatchV1().Jobs(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	runCtx, interrupt := context.WithCancel(context.Background())
	// the scheduler's attempt context: the step's timeout under the run's
	ctx, cancel := context.WithTimeout(runCtx, req.Timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := step.RunStep(ctx, job.New(), req)
		done <- err
	}()
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Fatalf("unexpected event %s", ev.Type)
		}
	case err := <-done:
		t.Fatalf("the step ended before its Job was created: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the Job was never created")
	}
	interrupt()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the step did not return after the interruption")
	}
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one wrapping context.Canceled", err)
	}
	return err
}

func note(t *testing.T, err error) string {
	t.Helper()
	var n interruptNoter
	if !errors.As(err, &n) {
		t.Fatalf("the error says nothing of the Job: %v", err)
	}
	return n.InterruptNote()
}

// TestInterruptDeletesTheJob: Ctrl-C while the Job runs deletes it (khook
// owns it), and the step says so.
func TestInterruptDeletesTheJob(t *testing.T) {
	c, ns := steptest.Setup(t, "jobintr")
	err := runInterrupted(t, c, c, ns, "forever")
	if got, want := note(t, err), "deleted Job "+ns+"/forever, which was still running (its pod is deleted with it)"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	_, gerr := c.Typed.BatchV1().Jobs(ns).Get(context.Background(), "forever", metav1.GetOptions{})
	if !apierrors.IsNotFound(gerr) {
		t.Errorf("the Job is still there: %v", gerr)
	}
}

// TestInterruptLeavesAJobItMayNotDelete: a user who may create Jobs but
// not delete them is told the Job is left running, and why.
func TestInterruptLeavesAJobItMayNotDelete(t *testing.T) {
	cl := testcluster.Get(t)
	admin, ns := steptest.Setup(t, "jobkeep")
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "create-jobs-only"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "events"}, Verbs: []string{"get", "list"}},
		},
	}
	ctx := t.Context()
	if _, err := admin.Typed.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "create-jobs-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "khook-limited"}},
	}
	if _, err := admin.Typed.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	limited := steptest.Clients(t, cl.LimitedRESTConfig(t))
	err := runInterrupted(t, limited, admin, ns, "kept")
	got := note(t, err)
	if !strings.HasPrefix(got, "Job "+ns+"/kept left running: it could not be deleted: ") || !strings.Contains(got, "cannot delete resource \"jobs\"") {
		t.Errorf("note %q", got)
	}
	j, gerr := admin.Typed.BatchV1().Jobs(ns).Get(context.Background(), "kept", metav1.GetOptions{})
	if gerr != nil || j.DeletionTimestamp != nil || !job.Owned(j) || conditionTrue(j, batchv1.JobComplete) {
		t.Errorf("the Job should be left running: %v %+v", gerr, j.Status)
	}
}

func conditionTrue(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == "True" {
			return true
		}
	}
	return false
}

// TestInterruptWhileCreatingTheJob: Ctrl-C that lands while the Job's
// create is in flight (the server has created it, the reply is not read
// yet) still stops the Job the server created, and says so.
func TestInterruptWhileCreatingTheJob(t *testing.T) {
	cl := testcluster.Get(t)
	admin, ns := steptest.Setup(t, "jobmidcreate")
	runCtx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	cfg := rest.CopyConfig(cl.RESTConfig(t))
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(r)
			if err == nil && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/jobs") {
				// the Job exists now; Ctrl-C before its reply is read
				resp.Body.Close()
				interrupt()
				return nil, runCtx.Err()
			}
			return resp, err
		})
	})
	c := steptest.Clients(t, cfg)
	req := request(t, c, "name: midcreate\njob:\n  image: busybox\n  serviceAccount: missing\n  namespace: "+ns, steptest.Options{Timeout: 2 * time.Minute})
	ctx, cancel := context.WithTimeout(runCtx, req.Timeout)
	defer cancel()
	_, err := step.RunStep(ctx, job.New(), req)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one wrapping context.Canceled", err)
	}
	if got, want := note(t, err), "deleted Job "+ns+"/midcreate, which was still running (its pod is deleted with it)"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	j, gerr := admin.Typed.BatchV1().Jobs(ns).Get(context.Background(), "midcreate", metav1.GetOptions{})
	if !apierrors.IsNotFound(gerr) && (gerr != nil || j.DeletionTimestamp == nil) {
		t.Errorf("the Job the server created is left running: %v", gerr)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
