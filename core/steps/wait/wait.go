// Package wait is the wait: step: kubectl wait --for=condition=...,
// --for=jsonpath=... or --for=delete on a type or one object, through the
// waiter's watches. The step timeout bounds the wait.
package wait

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/kube"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/waiter"
)

// Plan actions of a wait step.
const (
	ActionNoOp    = "no-op"
	ActionWait    = "wait"
	ActionUnknown = "unknown"
)

// Executor runs wait: steps.
type Executor struct{}

// New returns the wait: executor.
func New() *Executor { return &Executor{} }

// Type is the action key.
func (*Executor) Type() string { return spec.TypeWait }

// resolved is a wait step turned into a waiter target.
type resolved struct {
	target waiter.Target
	cond   spec.WaitFor
	// what names the target in messages: "deployment/web in namespace x".
	what string
}

// resolve parses the step and maps its type. A type the cluster does not
// serve is returned as kube's error (meta.IsNoMatchError finds it).
func resolve(ctx context.Context, req *step.Request) (resolved, error) {
	w := req.Step.Wait
	if w == nil {
		return resolved{}, fmt.Errorf("step %s is not a wait step", req.Step.Name)
	}
	cond, err := spec.ParseWaitFor(w.For)
	if err != nil {
		return resolved{}, fmt.Errorf("wait.for %w", err)
	}
	ref, err := spec.ParseResource(w.On)
	if err != nil {
		return resolved{}, fmt.Errorf("wait.on %w", err)
	}
	r := resolved{cond: cond}
	m, err := req.Kube.MappingForType(ctx, ref.Type)
	if err != nil {
		return r, err
	}
	r.target = waiter.Target{
		Mapping:       m,
		Name:          ref.Name,
		AllNamespaces: w.AllNamespaces,
		LabelSelector: w.Selector,
		FieldSelector: w.FieldSelector,
	}
	if kube.Namespaced(m) && !w.AllNamespaces {
		r.target.Namespace = req.Namespace(w.Namespace)
	}
	r.what = describe(r.target, ref)
	return r, nil
}

// describe names the wait's target as the spec wrote it, with its scope.
func describe(t waiter.Target, ref spec.ResourceRef) string { return ref.String() + waiter.Scope(t) }

// Run waits until the condition holds, bounded by ctx (the step timeout).
func (e *Executor) Run(ctx context.Context, req *step.Request) (step.Outcome, error) {
	r, err := resolve(ctx, req)
	if err != nil {
		if r.cond.Kind == spec.ForDelete && meta.IsNoMatchError(err) {
			// nothing of a type the cluster does not serve can exist
			return step.Outcome{Message: fmt.Sprintf("nothing to wait for: %v", err)}, nil
		}
		return step.Outcome{}, req.Redact(err)
	}
	began := time.Now()
	err = waiter.Until(ctx, req.Kube, []waiter.Target{r.target}, r.cond, func(line string) { req.Logf("%s", line) })
	if err != nil {
		return step.Outcome{}, req.Redact(err)
	}
	return step.Outcome{Message: fmt.Sprintf("%s holds for %s (waited %s)",
		waiter.Describe(r.cond), r.what, time.Since(began).Round(time.Millisecond))}, nil
}

// Plan predicts no-op (the condition holds now), wait, or unknown when the
// type or the namespace does not exist yet (an earlier step may create it).
func (e *Executor) Plan(ctx context.Context, req *step.Request) (step.Prediction, error) {
	r, err := resolve(ctx, req)
	if err != nil {
		if meta.IsNoMatchError(err) {
			if r.cond.Kind == spec.ForDelete {
				return step.Prediction{Action: ActionNoOp, Reason: err.Error()}, nil
			}
			return step.Prediction{Action: ActionUnknown, Reason: err.Error() + " (yet: a CRD an earlier step installs?)"}, nil
		}
		return step.Prediction{}, req.Redact(err)
	}
	if ns := r.target.Namespace; ns != "" {
		_, err := req.Kube.Typed.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if r.cond.Kind == spec.ForDelete {
				return step.Prediction{Action: ActionNoOp, Reason: "namespace " + ns + " does not exist"}, nil
			}
			return step.Prediction{Action: ActionUnknown, Reason: "namespace " + ns + " does not exist yet"}, nil
		case err != nil && !apierrors.IsForbidden(err):
			return step.Prediction{}, req.Redact(fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	ok, why, err := waiter.Ready(ctx, req.Kube, []waiter.Target{r.target}, r.cond)
	if err != nil {
		return step.Prediction{}, req.Redact(err)
	}
	if ok {
		return step.Prediction{Action: ActionNoOp, Reason: waiter.Describe(r.cond) + " already holds"}, nil
	}
	return step.Prediction{Action: ActionWait, Reason: req.Redactor.String(why)}, nil
}
