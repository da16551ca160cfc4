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

	"khook.io/core/kube"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/waiter"
)

// Executor runs wait: steps. It implements step.Executor and step.Planner;
// destroy leaves a wait alone.
type Executor struct{}

// New returns the wait: executor.
func New() *Executor { return &Executor{} }

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
	w := spec.BlockOf[Wait](req.Step)
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
	m, err := req.Objects().MappingForType(ctx, ref.Type)
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
func (e *Executor) Run(ctx context.Context, req *step.Request) (result step.Outcome, err error) {
	r, err := resolve(ctx, req)
	if err != nil {
		if r.cond.Kind == spec.ForDelete && meta.IsNoMatchError(err) {
			// nothing of a type the cluster does not serve can exist
			return step.Outcome{Message: fmt.Sprintf("nothing to wait for: %v", err)}, nil
		}
		return step.Outcome{}, err
	}
	began := time.Now()
	opts, err := waiter.ForCondition([]waiter.Target{r.target}, r.cond, req.Progress)
	if err != nil {
		return step.Outcome{}, err
	}
	opts.Redact = req.Redactor.String
	if err := waiter.Wait(ctx, req.Kube, opts); err != nil {
		return step.Outcome{}, err
	}
	return step.Outcome{Message: fmt.Sprintf("%s holds for %s (waited %s)",
		waiter.Describe(r.cond), r.what, time.Since(began).Round(time.Millisecond))}, nil
}

// Plan predicts no-op (the condition holds now), wait, or unknown when the
// type or the namespace does not exist yet (an earlier step may create it).
func (e *Executor) Plan(ctx context.Context, req *step.Request) (result step.Prediction, err error) {
	r, err := resolve(ctx, req)
	if err != nil {
		if meta.IsNoMatchError(err) {
			if r.cond.Kind == spec.ForDelete {
				return step.Prediction{Action: step.ActionNoOp, Reason: err.Error()}, nil
			}
			return step.Prediction{Action: step.ActionUnknown, Reason: err.Error() + " (yet: a CRD an earlier step installs?)"}, nil
		}
		return step.Prediction{}, err
	}
	if ns := r.target.Namespace; ns != "" {
		ok, err := req.Objects().NamespaceExists(ctx, ns)
		switch {
		case err != nil && !apierrors.IsForbidden(err):
			return step.Prediction{}, err
		case err == nil && !ok && r.cond.Kind == spec.ForDelete:
			return step.Prediction{Action: step.ActionNoOp, Reason: "namespace " + ns + " does not exist"}, nil
		case err == nil && !ok:
			return step.Prediction{Action: step.ActionUnknown, Reason: "namespace " + ns + " does not exist yet"}, nil
		}
	}
	ok, why, err := waiter.Ready(ctx, req.Kube, []waiter.Target{r.target}, r.cond)
	if err != nil {
		return step.Prediction{}, err
	}
	if ok {
		return step.Prediction{Action: step.ActionNoOp, Reason: waiter.Describe(r.cond) + " already holds"}, nil
	}
	return step.Prediction{Action: step.ActionWait, Reason: why}, nil
}
