package diagnose

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// offline is a walk that may make no request: it reads only what the
// objects it is given say.
func offline() *walk {
	return &walk{d: &Diagnoser{}, ctx: context.Background(), budget: 0}
}

// TestConditionCauses: what each object's conditions report, as
// conditionCauses says, in the cluster's words.
func TestConditionCauses(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	dep.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability."},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-5d9" has timed out progressing.`},
		{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "pods is forbidden"},
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "migrate"}}
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
	}
	cr := &unstructured.Unstructured{Object: map[string]any{"kind": "Certificate", "metadata": map[string]any{"namespace": "ns", "name": "tls"},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "DoesNotExist", "message": "Issuer not found"},
			map[string]any{"type": "Stalled", "status": "True"}, // says nothing: no reason nor message
			map[string]any{"type": "Degraded", "status": "True", "message": "webhook down"},
			map[string]any{"type": "Available", "status": "True", "reason": "Fine"},
		}}}}
	for _, tc := range []struct {
		name string
		walk func(w *walk)
		want []string // "rank warning text (object)"
	}{
		{"deployment", func(w *walk) { w.deployment(dep) }, []string{
			"20 true ProgressDeadlineExceeded: ReplicaSet \"web-5d9\" has timed out progressing. (Deployment ns/web)",
			"40 true FailedCreate: pods is forbidden (Deployment ns/web)",
		}},
		{"job", func(w *walk) { w.job(job) }, []string{
			"20 true BackoffLimitExceeded: Job has reached the specified backoff limit (Job ns/migrate)",
		}},
		{"any other kind", func(w *walk) { w.generic(cr) }, []string{
			"20 false Ready=False: DoesNotExist: Issuer not found (Certificate ns/tls)",
			"20 true Degraded=True: webhook down (Certificate ns/tls)",
		}},
	} {
		w := offline()
		tc.walk(w)
		var got []string
		for _, f := range w.findings {
			got = append(got, describe(f))
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: got %q, want %q", tc.name, got[i], tc.want[i])
			}
		}
	}
}

func describe(f finding) string {
	return fmt.Sprintf("%d %v %s", f.rank, f.cause.Warning, f.cause.Brief())
}

// TestNewCauseIsOneEntry: a cause added to its table (a condition, a
// container state, an event reason) is found and ranked with nothing
// else changed.
func TestNewCauseIsOneEntry(t *testing.T) {
	conds, ctrs := conditionCauses, containerCauses
	t.Cleanup(func() {
		conditionCauses, containerCauses = conds, ctrs
		delete(eventRanks, "VolumeResizeFailed")
	})
	conditionCauses = append(append([]conditionCause(nil), conds...),
		conditionCause{kind: statefulSetKind, types: []string{"Paused"}, status: "True", rank: rankRefused, warning: true})
	containerCauses = append([]containerCause{{rank: rankMissing, warning: true,
		match: func(_ *corev1.Pod, cs corev1.ContainerStatus, label string, _ bool) (string, string, bool) {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason == "ContainerCreating" && cs.State.Waiting.Message != "" {
				return "Stuck", label + ": creating: " + cs.State.Waiting.Message, true
			}
			return "", "", false
		}}}, ctrs...)
	eventRanks["VolumeResizeFailed"] = rankMissing

	got, ok := condition{typ: "Paused", status: "True", reason: "Admin", message: "paused"}.cause(statefulSetKind, "StatefulSet ns/db")
	if !ok || got.rank != rankRefused || got.cause.String() != "StatefulSet ns/db: Admin: paused" {
		t.Errorf("new condition cause: %v %+v", ok, got)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{waiting("main", "ContainerCreating", "mounting")}}}
	if st, ok := podStatus(p, false); !ok || st.rank != rankMissing || st.text != "container main: creating: mounting" || !st.warning {
		t.Errorf("new container cause: %v %+v", ok, st)
	}
	if r := eventRank("VolumeResizeFailed"); r != rankMissing {
		t.Errorf("new event reason ranks %d", r)
	}
	if r := eventRank("SomethingElse"); r != rankEvent {
		t.Errorf("an unknown event reason ranks %d, want rankEvent", r)
	}
}
