// Package apply is the apply: step: kubectl apply of a manifests list,
// object by object, in order.
//
// Semantics where the spec is silent:
//   - namespace: fills the namespace of namespaced objects that have none
//     (without it, the request's default namespace, then "default"); an
//     object with another namespace keeps it; a cluster-scoped object
//     never gets one, and one written on it is dropped;
//   - createNamespace: the namespace is read first and created only when
//     it is missing, labelled app.kubernetes.io/managed-by: khook
//     (decision 120); an existing namespace is never modified;
//   - skipIf: exists holds when every object exists (an object named by
//     generateName never exists beforehand, so such a step never skips);
//     waitFor still waits on exactly those objects;
//   - client-side apply (the default) is kubectl's: a missing object is
//     created with the last-applied-configuration annotation; an existing
//     one gets a three-way patch (strategic merge for built-in kinds, JSON
//     merge for custom resources), so fields other writers set survive; a
//     patch the server turns into no change is reported unchanged;
//   - serverSide: server-side apply as the run's field manager ("khook") with force
//     false; a conflict fails the object, naming each field and the
//     manager that owns it. Objects applied client-side before (by khook
//     or kubectl: the Update managers owning the last-applied annotation)
//     first have those managers' fields handed to khook's, as kubectl
//     apply --server-side does, so switching serverSide on does not
//     conflict with khook's own past applies;
//   - writes use strict field validation (kubectl's default): unknown or
//     duplicate fields are errors;
//   - objects are applied in order and the step stops at the first
//     failure; a CustomResourceDefinition is waited on until Established
//     and served, and the shared RESTMapper reset, before the next object;
//   - destroy deletes the objects last manifest first (CRDs after
//     everything else), waits until they are gone, and never deletes
//     Namespace objects, neither the createNamespace one nor a Namespace
//     manifest: deleting a namespace deletes everything in it, which a
//     bootstrap's other steps (and people) put there too; objects (and
//     namespaces) that existed before khook get back what khook took;
//   - an object that exists and that the spec did not create gets khook's
//     record of the values it overwrites (khook.io/previous) before its
//     first apply, for destroy to give them back.
package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/event"
	"khook.io/core/internal/english"
	"khook.io/core/manifest"
	"khook.io/core/objects"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/waiter"
)

// Options configure the executor. There are none: the field manager, like
// the clients, comes with each request.
type Options struct{}

// Executor runs apply: steps. It implements step.Executor, step.Planner,
// step.Destroyer and step.Differ.
type Executor struct{}

// New returns the apply executor.
func New(Options) *Executor { return &Executor{} }

// Objects loads the step's manifests: the objects it applies, in order,
// as written (namespaces are filled in per object by objects.Prepare,
// once the object's kind is known to the cluster).
func Objects(ctx context.Context, req *step.Request) ([]*unstructured.Unstructured, error) {
	a := spec.BlockOf[Apply](req.Step)
	if a == nil {
		return nil, errors.New("not an apply step")
	}
	return manifest.Load(ctx, a.Manifests, req.BaseDir, req.HTTP)
}

// load is how every verb of apply begins: the step's objects, and the
// namespace those without one get.
func load(ctx context.Context, req *step.Request) ([]*unstructured.Unstructured, string, error) {
	objs, err := Objects(ctx, req)
	if err != nil {
		return nil, "", err
	}
	return objs, req.Namespace(spec.BlockOf[Apply](req.Step).Namespace), nil
}

// Run applies the step's objects and waits for waitFor.
func (e *Executor) Run(ctx context.Context, req *step.Request) (result step.Outcome, err error) {
	endFetch := event.Phase(ctx, event.PhaseFetch, "manifests")
	objs, ns, err := load(ctx, req)
	endFetch(err)
	if err != nil {
		return step.Outcome{}, err
	}
	a := spec.BlockOf[Apply](req.Step)
	cond, err := waitCondition(a)
	if err != nil {
		return step.Outcome{}, err
	}
	m := req.Objects()
	if a.SkipIf == SkipIfExists {
		targets, all, err := existing(ctx, m, objs, ns)
		if err != nil {
			return step.Outcome{}, err
		}
		if all {
			return skipExisting(ctx, req, targets, cond, len(objs))
		}
	}
	nsCreated := false
	if a.CreateNamespace && a.Namespace != "" {
		if nsCreated, err = m.EnsureNamespace(ctx, a.Namespace); err != nil {
			return step.Outcome{}, err
		}
		if nsCreated {
			req.Logf("namespace %s created", a.Namespace)
		}
	}
	endApply := event.Phase(ctx, event.PhaseApply, fmt.Sprintf("%d objects", len(objs)))
	set, targets, err := applyAll(ctx, req, m, objs, ns)
	endApply(err)
	if err != nil {
		return step.Outcome{}, err
	}
	if err := waitFor(ctx, req, targets, cond); err != nil {
		return step.Outcome{}, err
	}
	msg := set.Summary(len(objs))
	if nsCreated {
		msg += "; namespace " + a.Namespace + " created"
	}
	if cond != nil {
		msg += "; " + a.WaitFor + " met"
	}
	left, kept := driftLines(set.Entries...)
	if len(left) > 0 {
		msg += "; " + strings.Join(left, "; ")
	}
	if len(kept) > 0 {
		msg += "; " + strings.Join(kept, "; ")
	}
	changed := nsCreated || set.Count(objects.Created)+set.Count(objects.Configured)+set.Count(objects.Deleted) > 0
	return step.Outcome{Message: msg, Changed: changed, Drift: left, Kept: kept}, nil
}

// applyOptions are how the step applies: server-side or not, under its
// drift policy (defaults.drift and its own drift: block; none in mode
// off: the manifest is written whole, as kubectl apply writes it).
func applyOptions(req *step.Request) (objects.ApplyOptions, error) {
	a := spec.BlockOf[Apply](req.Step)
	opts := objects.ApplyOptions{ServerSide: a.ServerSide}
	policy, err := req.DriftPolicy(a.Drift)
	if err != nil {
		return opts, err
	}
	if policy.Mode != spec.DriftOff {
		opts.Drift = &policy
	}
	return opts, nil
}

// driftLines are what changes say of the fields the step left: a line
// per object a warn policy left as a person changed it ("drift:
// ConfigMap/x data.mode (left as it is: drift mode warn)"), a line per
// field kept for another writer or ignored.
func driftLines(changes ...objects.Change) (left, kept []string) {
	for _, c := range changes {
		if len(c.Left) > 0 {
			left = append(left, objects.LeftLine(c.Ref(), c.Left))
		}
		for _, k := range c.Kept {
			kept = append(kept, "kept: "+k.String())
		}
		for _, k := range c.Ignored {
			kept = append(kept, "ignored: "+k.String())
		}
	}
	return left, kept
}

// waitCondition parses waitFor; nil without one.
func waitCondition(a *Apply) (*spec.WaitFor, error) {
	if a.WaitFor == "" {
		return nil, nil
	}
	w, err := spec.ParseWaitFor(a.WaitFor)
	if err != nil {
		return nil, fmt.Errorf("waitFor %w", err)
	}
	return &w, nil
}

// skipExisting is skipIf: exists holding for n objects: the step waits
// for waitFor on them, and is skipped.
func skipExisting(ctx context.Context, req *step.Request, targets []waiter.Target, cond *spec.WaitFor, n int) (step.Outcome, error) {
	reason := allExist(n)
	req.Logf("%s", reason)
	if err := waitFor(ctx, req, targets, cond); err != nil {
		return step.Outcome{}, err
	}
	msg := reason
	if cond != nil {
		msg += "; " + spec.BlockOf[Apply](req.Step).WaitFor + " met"
	}
	return step.Outcome{Skipped: true, SkipReason: reason, Message: msg}, nil
}

// applyAll applies objs in order, stopping at the first failure, and
// establishes each CRD before the next object.
func applyAll(ctx context.Context, req *step.Request, m *objects.Manager, objs []*unstructured.Unstructured, ns string) (objects.ChangeSet, []waiter.Target, error) {
	var set objects.ChangeSet
	opts, err := applyOptions(req)
	if err != nil {
		return set, nil, err
	}
	opts.Warn = req.Warn
	targets := make([]waiter.Target, 0, len(objs))
	for i, o := range objs {
		res, err := m.Apply(ctx, o, ns, opts)
		if err != nil {
			return set, nil, partial(ctx, req, i, len(objs), objects.RefOf(o).KindName(), "apply failed", err)
		}
		set.Add(res)
		ref := res.Ref().KindName()
		req.Logf("%s %s", ref, res.Action)
		if manifest.IsCRD(res.Mapping.GroupVersionKind) {
			if err := m.Establish(ctx, res, req.Progress); err != nil {
				return set, nil, partial(ctx, req, i+1, len(objs), ref, "", err)
			}
		}
		targets = append(targets, waiter.Target{Mapping: res.Mapping, Namespace: res.Object.GetNamespace(), Name: res.Object.GetName()})
	}
	return set, targets, nil
}

// partial is the error of a step that stopped at object ref (what failed
// there: "apply failed", or nothing when err says it) after applying done
// of total objects. The count leads the error, so the run's summary and
// JSON say what was left applied, not only the progress lines: "applied 2
// of 5 objects before Secret/x failed: ...". When the run was interrupted,
// the count is the step's note of what it left behind.
func partial(ctx context.Context, req *step.Request, done, total int, ref, what string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return step.Interrupted(fmt.Sprintf("applied %d of %s before the interruption", done, english.CountNoun(total, "object")), err)
	}
	if done == 0 {
		if what == "" {
			return fmt.Errorf("%s: %w", ref, err)
		}
		return fmt.Errorf("%s %s: %w", ref, what, err)
	}
	req.Logf("%d of %d objects applied before %s failed", done, total, ref)
	return fmt.Errorf("applied %d of %s before %s failed: %w", done, english.CountNoun(total, "object"), ref, err)
}

func allExist(n int) string {
	if n == 1 {
		return "the object exists (skipIf: exists)"
	}
	return fmt.Sprintf("all %d objects exist (skipIf: exists)", n)
}

func waitFor(ctx context.Context, req *step.Request, targets []waiter.Target, cond *spec.WaitFor) error {
	if cond == nil || len(targets) == 0 {
		return nil
	}
	req.Logf("waiting for %s on %s", spec.BlockOf[Apply](req.Step).WaitFor, english.CountNoun(len(targets), "object"))
	opts, err := waiter.ForCondition(targets, *cond, req.Progress)
	if err == nil {
		opts.Redact = req.Redactor.String
		err = waiter.Wait(ctx, req.Kube, opts)
	}
	if err != nil {
		return fmt.Errorf("waitFor %s: %w", spec.BlockOf[Apply](req.Step).WaitFor, err)
	}
	return nil
}

// existing reports whether every object exists, and the wait targets of
// all of them when they do. It stops reading at the first absent object.
func existing(ctx context.Context, m *objects.Manager, objs []*unstructured.Unstructured, ns string) ([]waiter.Target, bool, error) {
	targets := make([]waiter.Target, 0, len(objs))
	for _, o := range objs {
		if o.GetName() == "" {
			return nil, false, nil
		}
		r, err := m.Resolve(ctx, o, ns)
		if meta.IsNoMatchError(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", objects.RefOf(o).KindName(), err)
		}
		_, err = m.Get(ctx, r)
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: check whether it exists: %w", objects.RefOf(o).KindName(), err)
		}
		targets = append(targets, waiter.Target{Mapping: r.Mapping, Namespace: r.Object.GetNamespace(), Name: r.Object.GetName()})
	}
	return targets, true, nil
}

// Destroy undoes the step's objects (objects.Manager.Undo): those this
// spec created are deleted, last manifest first (CRDs after everything
// else) and waited gone; those that existed before khook get back what
// khook took (objects.Manager.Undo: values khook recorded go back, fields
// it added go, another writer's values stay); Namespace objects are never
// deleted (see the package documentation). A CRD whose kind has custom resources the spec
// did not create is refused, before anything is touched, unless
// --force-crds. Objects already gone count as success.
func (e *Executor) Destroy(ctx context.Context, req *step.Request) (result step.Outcome, err error) {
	a := spec.BlockOf[Apply](req.Step)
	opts := objects.UndoOptions{ForceCRDs: req.ForceCRDs, ForceCRDsSetting: req.ForceCRDsSetting, Progress: req.Progress}
	var items []objects.UndoItem
	if planned, ok := plannedItems(req); ok {
		// the plan shown and confirmed: carried out as it was read
		items = planned
	} else {
		endFetch := event.Phase(ctx, event.PhaseFetch, "manifests")
		objs, ns, err := load(ctx, req)
		endFetch(err)
		if err != nil {
			return step.Outcome{}, err
		}
		opts.Namespace = ns
		if items, err = req.Objects().PlanUndo(ctx, objs, opts); err != nil && ctx.Err() != nil {
			return step.Outcome{}, err
		}
	}
	sum, err := req.Objects().CarryOut(ctx, items, opts)
	if err != nil {
		return step.Outcome{}, err
	}
	if a.CreateNamespace && a.Namespace != "" {
		kept := "namespace " + a.Namespace
		if !slices.Contains(sum.Kept, kept) {
			sum.Kept = append(sum.Kept, kept)
		}
	}
	sort.Strings(sum.Kept)
	return step.Outcome{Message: sum.Message(), Changed: len(sum.Deleted)+len(sum.Reverted) > 0}, nil
}

// plannedItems are the undo items of the request's confirmed destroy
// plan (Request.Planned), when it has one.
func plannedItems(req *step.Request) ([]objects.UndoItem, bool) {
	if req.Planned == nil {
		return nil, false
	}
	items, ok := req.Planned.Carry.([]objects.UndoItem)
	return items, ok
}

// undoActions are the destroy actions of an apply step's objects, by what
// the object manager plans for each.
var undoActions = map[objects.UndoAction]step.DestroyAction{
	objects.UndoDelete: step.DestroyDelete, objects.UndoRevert: step.DestroyRevert, objects.UndoRejected: step.DestroyRejected,
	objects.UndoLeave: step.DestroyLeave, objects.UndoKeep: step.DestroyKeep, objects.UndoAbsent: step.DestroyGone,
	objects.UndoRefuse: step.DestroyRefuse, objects.UndoUnknown: step.DestroyUnknown,
}

// undoAction is the destroy action of what the object manager plans for
// an object: one it names and undoActions does not is shown, not counted.
func undoAction(a objects.UndoAction) step.DestroyAction {
	if d, ok := undoActions[a]; ok {
		return d
	}
	return step.DestroyAction{Word: string(a)}
}

// PlanDestroy says what Destroy would do with each object, changing
// nothing.
func (e *Executor) PlanDestroy(ctx context.Context, req *step.Request) (p step.DestroyPlan, err error) {
	objs, ns, err := load(ctx, req)
	if err != nil {
		return p, err
	}
	items, err := req.Objects().PlanUndo(ctx, objs, objects.UndoOptions{Namespace: ns, ForceCRDs: req.ForceCRDs, ForceCRDsSetting: req.ForceCRDsSetting})
	p.Carry = items
	for _, it := range items {
		di := step.DestroyItem{Object: it.Ref, Action: undoAction(it.Action), Reason: it.Reason}
		for _, f := range it.Fields {
			di.Fields = append(di.Fields, step.DestroyField{Path: f.Path, Outcome: string(f.Outcome), Value: f.Value, Reason: f.Reason})
		}
		p.Items = append(p.Items, di)
	}
	return p, err
}
