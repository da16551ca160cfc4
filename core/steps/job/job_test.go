package job

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"khook.io/core/objects"
	"khook.io/core/spec"
)

func TestBuild(t *testing.T) {
	st := &spec.Step{Name: "migrate"}
	st.SetAction(Type, &Job{
		Image: "img:1", Command: []string{"sh"}, Args: []string{"-c", "x"},
		Env:            map[string]string{"B": "2", "A": "1"},
		ServiceAccount: "sa",
	})
	j := Build(st, "platform", "ns", 90*time.Second+time.Millisecond)
	if j.Name != "migrate" || j.Namespace != "ns" {
		t.Errorf("name %s/%s", j.Namespace, j.Name)
	}
	want := map[string]string{objects.LabelManagedBy: "khook", LabelSpec: "platform", LabelStep: "migrate"}
	if !reflect.DeepEqual(j.Labels, want) || !reflect.DeepEqual(j.Spec.Template.Labels, want) {
		t.Errorf("labels %v, pod labels %v", j.Labels, j.Spec.Template.Labels)
	}
	if *j.Spec.BackoffLimit != 0 || *j.Spec.ActiveDeadlineSeconds != 91 || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("spec %+v", j.Spec)
	}
	c := j.Spec.Template.Spec.Containers[0]
	if c.Name != "migrate" || c.Image != "img:1" || !reflect.DeepEqual(c.Env, []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}) ||
		j.Spec.Template.Spec.ServiceAccountName != "sa" {
		t.Errorf("container %+v", c)
	}
	// a spec name that is no label value is kept in the annotation only
	long := strings.Repeat("x", 70)
	j = Build(st, long, "ns", 0)
	if _, ok := j.Labels[LabelSpec]; ok || j.Annotations[AnnotationSpec] != long || j.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("labels %v annotations %v deadline %v", j.Labels, j.Annotations, j.Spec.ActiveDeadlineSeconds)
	}
}

func jobObject(t *testing.T, uid string, conds ...batchv1.JobCondition) *unstructured.Unstructured {
	t.Helper()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", UID: "u1"}, Status: batchv1.JobStatus{Conditions: conds, Active: 1}}
	j.UID = "u1"
	if uid != "" {
		j.UID = "u2"
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(j)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestCheck(t *testing.T) {
	c := check("u1")
	if ok, cur, err := c(jobObject(t, "")); ok || err != nil || cur != "1 active, 0 succeeded, 0 failed" {
		t.Errorf("running: %v %q %v", ok, cur, err)
	}
	if ok, _, err := c(jobObject(t, "", batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})); !ok || err != nil {
		t.Errorf("complete: %v %v", ok, err)
	}
	_, _, err := c(jobObject(t, "", batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "too long"}))
	var f *failure
	if !errors.As(err, &f) || f.reason != "DeadlineExceeded" || f.message != "too long" {
		t.Errorf("failed: %v", err)
	}
	if _, _, err := c(jobObject(t, "other")); err == nil {
		t.Error("a Job of another UID was accepted")
	}
}
