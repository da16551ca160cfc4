// Package rollout is the rollout: step: kubectl rollout restart (the
// kubectl.kubernetes.io/restartedAt pod-template annotation, patched the
// way kubectl does) and kubectl rollout status (kubectl's status viewers,
// driven by a watch) for Deployments, DaemonSets and StatefulSets.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/dynamic"
	"k8s.io/kubectl/pkg/polymorphichelpers"
	"k8s.io/kubectl/pkg/scheme"

	"khook.io/core/objects"
	"khook.io/core/plan"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/waiter"
)

// Executor runs rollout: steps. It implements step.Executor and
// step.Planner.
type Executor struct{}

// New returns the rollout: executor.
func New() *Executor { return &Executor{} }

// workload is a resolved rollout target.
type workload struct {
	mapping      *meta.RESTMapping
	ri           dynamic.ResourceInterface
	fieldManager string
	ns           string
	name         string
	subject      string // "Deployment ns/web"
}

func resolve(ctx context.Context, req *step.Request) (*workload, error) {
	r := spec.BlockOf[Rollout](req.Step)
	if r == nil {
		return nil, fmt.Errorf("step %s is not a rollout step", req.Step.Name)
	}
	_, ref, err := spec.ParseRolloutTarget(r.Target())
	if err != nil {
		return nil, fmt.Errorf("rollout target %w", err)
	}
	om := req.Objects()
	m, err := om.MappingForType(ctx, ref.Type)
	if err != nil {
		return nil, fmt.Errorf("rollout target %s: %w", r.Target(), err)
	}
	if gk := m.GroupVersionKind.GroupKind(); !rollable(gk) {
		return nil, fmt.Errorf("rollout target %s is a %s: rollout supports Deployment, DaemonSet and StatefulSet (apps)", r.Target(), gk)
	}
	ns := req.Namespace(r.Namespace)
	return &workload{
		mapping:      m,
		ri:           om.Client(m, ns),
		fieldManager: om.FieldManager(),
		ns:           ns,
		name:         ref.Name,
		subject:      objects.RefFor(m, ns, ref.Name).Path(),
	}, nil
}

// rollable reports whether kubectl rollout restarts and watches gk.
func rollable(gk schema.GroupKind) bool {
	if gk.Group != appsv1.GroupName {
		return false
	}
	switch gk.Kind {
	case "Deployment", "DaemonSet", "StatefulSet":
		return true
	}
	return false
}

func (w *workload) get(ctx context.Context) (*unstructured.Unstructured, error) {
	u, err := w.ri.Get(ctx, w.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, step.WithCause(w.subject+" not found", err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", w.subject, err)
	}
	return u, nil
}

// Run restarts the workload, or waits for its rollout to complete.
func (e *Executor) Run(ctx context.Context, req *step.Request) (result step.Outcome, err error) {
	w, err := resolve(ctx, req)
	if err != nil {
		return step.Outcome{}, err
	}
	if spec.BlockOf[Rollout](req.Step).Restart != "" {
		return w.restart(ctx)
	}
	return w.status(ctx, req)
}

// Restart patches the pod template's kubectl.kubernetes.io/restartedAt
// annotation, exactly as kubectl rollout restart does.
func (w *workload) restart(ctx context.Context) (step.Outcome, error) {
	u, err := w.get(ctx)
	if err != nil {
		return step.Outcome{}, err
	}
	patch, err := RestartPatch(u)
	if err != nil {
		return step.Outcome{}, fmt.Errorf("%s: %w", w.subject, err)
	}
	if len(patch) == 0 || string(patch) == "{}" {
		// restartedAt has a resolution of a second: a restart was triggered
		// this very second, which is what this step asks for
		return step.Outcome{Message: w.subject + " was restarted within the last second already"}, nil
	}
	if _, err := w.ri.Patch(ctx, w.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: w.fieldManager}); err != nil {
		return step.Outcome{}, fmt.Errorf("%s: restart: %w", w.subject, err)
	}
	return step.Outcome{Message: w.subject + " restarted", Changed: true}, nil
}

// RestartPatch is the strategic merge patch kubectl rollout restart sends
// for obj (a Deployment, DaemonSet or StatefulSet): the difference made by
// kubectl's ObjectRestarterFn, which sets the pod template's
// kubectl.kubernetes.io/restartedAt annotation to the current time.
func RestartPatch(obj *unstructured.Unstructured) ([]byte, error) {
	gvk := obj.GroupVersionKind()
	typed, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("restart is not supported for %s", gvk.Kind)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return nil, fmt.Errorf("decode %s: %w", gvk.Kind, err)
	}
	if d, ok := typed.(*appsv1.Deployment); ok && d.Spec.Paused {
		return nil, errors.New("the Deployment is paused, so a restart would not roll out: unpause it first (spec.paused: false)")
	}
	before, err := runtime.Encode(scheme.DefaultJSONEncoder(), typed)
	if err != nil {
		return nil, err
	}
	after, err := polymorphichelpers.ObjectRestarterFn(typed)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(before, after, typed)
}

// status waits for the rollout to complete, with kubectl's status viewer.
func (w *workload) status(ctx context.Context, req *step.Request) (step.Outcome, error) {
	viewer, err := polymorphichelpers.StatusViewerFor(w.mapping.GroupVersionKind.GroupKind())
	if err != nil {
		return step.Outcome{}, err
	}
	if _, err := w.get(ctx); err != nil {
		return step.Outcome{}, err
	}
	began := time.Now()
	// the waiter says why the rollout is stuck (the Pods' causes) when it
	// times out or the Deployment passes its progress deadline
	err = waiter.Wait(ctx, req.Kube, waiter.Options{
		Targets:  []waiter.Target{{Mapping: w.mapping, Namespace: w.ns, Name: w.name, Deleted: w.deleted(viewer)}},
		What:     "rollout",
		Check:    w.check(viewer),
		Progress: req.Progress,
		Redact:   req.Redactor.String,
	})
	if err != nil {
		return step.Outcome{}, err
	}
	return step.Outcome{Message: fmt.Sprintf("%s rolled out (waited %s)", w.subject, time.Since(began).Round(time.Millisecond))}, nil
}

// check is a waiter check around kubectl's status viewer; a Deployment
// past its progress deadline fails the wait at once.
func (w *workload) check(viewer polymorphichelpers.StatusViewer) waiter.CheckFunc {
	return func(u *unstructured.Unstructured) (bool, string, error) {
		msg, done, err := viewer.Status(u, 0)
		if err != nil {
			if d := deadlineExceeded(u); d != "" {
				return false, "", errors.New(w.subject + " " + d)
			}
			return false, "", fmt.Errorf("%s: %w", w.subject, err)
		}
		return done, strings.TrimSpace(msg), nil
	}
}

// deleted ends the wait of a workload deleted while its rollout was
// waited for, as kubectl rollout status does ("object has been deleted"):
// done only when its final state had rolled out, an error otherwise (it
// is never waited for again, since one re-created would be another).
func (w *workload) deleted(viewer polymorphichelpers.StatusViewer) waiter.CheckFunc {
	return func(last *unstructured.Unstructured) (bool, string, error) {
		if last != nil {
			if _, done, err := viewer.Status(last, 0); err == nil && done {
				return true, "rolled out", nil
			}
		}
		return false, "", errors.New(w.subject + " was deleted while its rollout was waited for")
	}
}

// deadlineExceeded describes a Deployment whose Progressing condition says
// ProgressDeadlineExceeded, or returns "".
func deadlineExceeded(u *unstructured.Unstructured) string {
	if u.GetKind() != "Deployment" {
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		c, _ := raw.(map[string]any)
		if c["type"] != string(appsv1.DeploymentProgressing) || c["reason"] != "ProgressDeadlineExceeded" {
			continue
		}
		s := "exceeded its progress deadline"
		if secs, found, _ := unstructured.NestedInt64(u.Object, "spec", "progressDeadlineSeconds"); found {
			s += fmt.Sprintf(" (progressDeadlineSeconds: %d)", secs)
		}
		if m, _ := c["message"].(string); m != "" {
			s += ": " + m
		}
		return s
	}
	return ""
}

// ActionRestart is a restart: it changes the cluster (a step it triggers
// runs), but every run restarts again, so it is not drift (decision 285).
var ActionRestart = step.Action{Word: plan.ActionRestart, Changes: true}

// Plan predicts restart, or for status no-op (rolled out) or wait;
// unknown when the workload does not exist yet.
func (e *Executor) Plan(ctx context.Context, req *step.Request) (result step.Prediction, err error) {
	w, err := resolve(ctx, req)
	if err != nil {
		return step.Prediction{}, err
	}
	u, err := w.ri.Get(ctx, w.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return step.Prediction{Action: step.ActionUnknown, Reason: w.subject + " does not exist yet"}, nil
	}
	if err != nil {
		return step.Prediction{}, fmt.Errorf("%s: %w", w.subject, err)
	}
	if spec.BlockOf[Rollout](req.Step).Restart != "" {
		return step.Prediction{Action: ActionRestart, Reason: "restart " + w.subject}, nil
	}
	viewer, err := polymorphichelpers.StatusViewerFor(w.mapping.GroupVersionKind.GroupKind())
	if err != nil {
		return step.Prediction{}, err
	}
	msg, done, err := viewer.Status(u, 0)
	switch {
	case err != nil:
		if d := deadlineExceeded(u); d != "" {
			return step.Prediction{Action: step.ActionWait, Reason: w.subject + " " + d}, nil
		}
		return step.Prediction{Action: step.ActionWait, Reason: w.subject + ": " + err.Error()}, nil
	case done:
		return step.Prediction{Action: step.ActionNoOp, Reason: strings.TrimSpace(msg)}, nil
	}
	return step.Prediction{Action: step.ActionWait, Reason: strings.TrimSpace(msg)}, nil
}
