package objects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/internal/english"
	"khook.io/core/manifest"
	"khook.io/core/waiter"
)

// UndoAction is what destroy does with one object of an apply step.
type UndoAction string

// The undo actions, in the words of the destroy plan.
const (
	// UndoDelete: the spec created it (AnnotationCreatedBy).
	UndoDelete UndoAction = "delete"
	// UndoRevert: khook configured it but did not create it; khook's
	// fields are given back (UndoItem.Fields says how).
	UndoRevert UndoAction = "revert"
	// UndoRejected: khook configured it but did not create it, and the
	// server rejects giving back khook's fields (a dry run said so):
	// destroy leaves it as it is and fails naming it, the other objects
	// still undone.
	UndoRejected UndoAction = "rejected"
	// UndoLeave: khook did not create it and holds nothing of it.
	UndoLeave UndoAction = "leave"
	// UndoKeep: a Namespace, never deleted by destroy (decision 19); one
	// khook only configured is reverted like any object instead.
	UndoKeep UndoAction = "keep"
	// UndoAbsent: already gone (or its kind is not served).
	UndoAbsent UndoAction = "gone"
	// UndoRefuse: a CRD whose kind has custom resources the spec did not
	// create (decision 152).
	UndoRefuse UndoAction = "refuse"
	// UndoUnknown: it could not be read (Reason says why), so whether
	// khook created it is unknown; destroy leaves it and fails naming it.
	UndoUnknown UndoAction = "unknown"
)

// UndoItem is one object of an undo: what destroy does with it and why.
// Fields says, for an object destroy reverts, what becomes of each field
// khook wrote on it (computed with a server dry run of the revert).
type UndoItem struct {
	Ref    string
	Action UndoAction
	Reason string
	Fields []FieldUndo

	mapping *meta.RESTMapping
	live    *unstructured.Unstructured // as planned: what is carried out is checked against it
	crd     bool
	revert  *revertPlan
	err     error // UndoUnknown's and UndoRejected's
	// done: carried out (a retry of the step carries out only the rest)
	done *bool
}

// UndoOptions tune PlanUndo and Undo.
type UndoOptions struct {
	// Namespace fills in namespace-less namespaced objects, as in apply.
	Namespace string
	// ForceCRDs deletes a CRD the spec created even when its kind has
	// custom resources the spec did not create (--force-crds).
	ForceCRDs bool
	// ForceCRDsSetting is how the caller spells that setting in a
	// refusal's reason ("": "the force-crds setting").
	ForceCRDsSetting string
	// Progress receives a line per object and wait; nil drops them.
	Progress func(string)
}

// foreignShown is how many of a CRD's foreign custom resources a refusal
// names.
const foreignShown = 3

// PlanUndo reads objs (an apply step's manifests, as loaded) and says
// what Undo would do with each, in the order Undo takes them: last
// manifest first, CRDs last. It writes nothing. A CRD the spec created
// whose kind has custom resources the spec did not create is UndoRefuse
// unless opts.ForceCRDs. An object that cannot be read is UndoUnknown,
// and the error names each (the other objects are still planned).
func (m *Manager) PlanUndo(ctx context.Context, objs []*unstructured.Unstructured, opts UndoOptions) ([]UndoItem, error) {
	rest, crds := deleteOrder(objs)
	var items []UndoItem
	var errs []error
	for _, o := range append(rest, crds...) {
		it, err := m.planOne(ctx, o, opts)
		if err != nil {
			if ctx.Err() != nil {
				return items, err
			}
			errs = append(errs, err)
			it.Action, it.Reason, it.err = UndoUnknown, err.Error(), err
		}
		it.done = new(bool)
		items = append(items, it)
	}
	return items, errors.Join(errs...)
}

func (m *Manager) planOne(ctx context.Context, o *unstructured.Unstructured, opts UndoOptions) (UndoItem, error) {
	it := UndoItem{Ref: RefOf(o).KindName()}
	gvk := o.GroupVersionKind()
	namespace := manifest.IsNamespace(gvk)
	if namespace {
		it.Ref = "Namespace/" + o.GetName()
	}
	keep := func() (UndoItem, error) {
		it.Action, it.Reason = UndoKeep, "destroy never deletes namespaces"
		return it, nil
	}
	if o.GetName() == "" {
		it.Action, it.Reason = UndoLeave, "generateName: cannot be found again"
		return it, nil
	}
	r, err := m.Resolve(ctx, o, opts.Namespace)
	if meta.IsNoMatchError(err) {
		it.Action, it.Reason = UndoAbsent, "its kind is not served"
		return it, nil
	}
	if err != nil {
		return it, fmt.Errorf("%s: %w", it.Ref, err)
	}
	it.Ref, it.mapping, it.crd = r.Ref().String(), r.Mapping, manifest.IsCRD(gvk)
	live, err := m.Get(ctx, r)
	switch {
	case (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) && namespace:
		// gone, or not readable: never deleted either way, as before
		// destroy reverted configured namespaces
		return keep()
	case apierrors.IsNotFound(err):
		it.Action, it.Reason = UndoAbsent, "already gone"
		return it, nil
	case err != nil:
		return it, fmt.Errorf("%s: %w", it.Ref, err)
	}
	it.live = live
	it.Action, it.Reason = UndoDelete, "created by this spec"
	if !m.CreatedByThis(live) {
		owned := m.OwnedBy(live)
		rec, err := m.loadPrevious(ctx, live)
		if err != nil {
			return it, fmt.Errorf("%s: %w", it.Ref, err)
		}
		recorded := rec.exists || rec.hasAnnotation
		switch {
		case !owned.Any() && !recorded:
			it.Action, it.Reason = UndoLeave, "not created by this spec, and khook owns none of its fields"
			return it, nil
		case !recorded && m.fieldManager != DefaultFieldManager:
			// A name given with --field-manager may be another tool's
			// (kubectl's: that is how objects are taken along), and
			// every khook that takes it marks what it creates and
			// records what it configures: the fields that name owns
			// here are that tool's, not khook's.
			it.Action, it.Reason = UndoLeave, fmt.Sprintf("not created by this spec, and khook never configured it as field manager %s (no record of khook's on it): the fields %[1]s owns are another writer's", m.fieldManager)
			return it, nil
		case recorded || !onlyWriter(live, m.fieldManager):
			conf, err := lastApplied(r.Object) // what khook's apply writes in the last-applied annotation
			if err != nil {
				return it, fmt.Errorf("%s: %w", it.Ref, err)
			}
			return m.planRevertItem(ctx, it, owned, conf, rec)
		}
		// no mark, but nobody else ever wrote it: made by a khook that
		// did not mark what it created yet
		it.Reason = "unmarked, but khook is the only writer of its fields (created before khook marked what it creates)"
	}
	if namespace {
		return keep()
	}
	return m.refuseForeignCRD(ctx, it, opts)
}

// refuseForeignCRD refuses to delete it, a CRD, when its kind has custom
// resources this spec did not create, unless opts.ForceCRDs.
func (m *Manager) refuseForeignCRD(ctx context.Context, it UndoItem, opts UndoOptions) (UndoItem, error) {
	if !it.crd || opts.ForceCRDs {
		return it, nil
	}
	n, where, err := m.foreignResources(ctx, it.live)
	if err != nil {
		return it, fmt.Errorf("%s: %w", it.Ref, err)
	}
	if n > 0 {
		it.Action = UndoRefuse
		force := opts.ForceCRDsSetting
		if force == "" {
			force = "the force-crds setting"
		}
		it.Reason = fmt.Sprintf("its kind has %s this spec did not create (%s): deleting the CRD deletes them; %s deletes it anyway",
			english.CountNoun(n, "custom resource"), where, force)
	}
	return it, nil
}

// planRevertItem plans giving back khook's fields of it.live, an object
// khook configured but did not create (planRevert): UndoRevert with the
// fields' fates, or UndoRejected when the server's dry run refuses it.
// conf is the configuration khook's apply of the manifest writes, rec
// the object's record (loadPrevious).
func (m *Manager) planRevertItem(ctx context.Context, it UndoItem, owned Owned, conf string, rec *previous) (UndoItem, error) {
	plan, live, err := m.planRevertFresh(ctx, m.Client(it.mapping, it.live.GetNamespace()), it.live, conf, rec)
	if apierrors.IsNotFound(err) {
		it.Action, it.Reason = UndoAbsent, "already gone"
		return it, nil
	}
	if err != nil {
		return it, fmt.Errorf("%s: %w", it.Ref, err)
	}
	it.live, it.revert, it.Fields = live, plan, plan.fields
	it.Action, it.Reason = UndoRevert, "it existed before khook: khook's fields are given back"
	if !plan.recorded {
		// what is known, not a guess: an object khook configured before
		// it kept a record, or one an earlier khook created
		it.Reason = "no created-by mark; khook's field manager is not the only writer: khook's fields are given back"
		if !owned.Any() {
			it.Reason = "no created-by mark, and khook owns none of its fields"
		}
	}
	if plan.rejected != nil {
		it.Action, it.Fields = UndoRejected, nil
		it.err = fmt.Errorf("%s: the server rejects giving back khook's fields (left as it is): %w", it.Ref, plan.rejected)
		it.Reason = "the server rejects giving back khook's fields (dry run), so it is left as it is: " + plan.rejected.Error()
	}
	return it, nil
}

// foreignResources counts the custom resources of crd's kind that the
// manager's spec did not create and that are not being deleted, and says
// where they are: the namespaces, then the first few by name.
func (m *Manager) foreignResources(ctx context.Context, crd *unstructured.Unstructured) (int, string, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	gvs, _ := servedVersions(crd)
	if plural == "" || len(gvs) == 0 {
		return 0, "", nil // nothing served, nothing to list
	}
	gvr := schema.GroupVersionResource{Group: group, Version: gvs[0].Version, Resource: plural}
	list, err := m.kube.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("list its custom resources: %w", err)
	}
	var names []string
	namespaces := map[string]bool{}
	for i := range list.Items {
		cr := &list.Items[i]
		if m.CreatedByThis(cr) || cr.GetDeletionTimestamp() != nil {
			continue
		}
		name := cr.GetName()
		if ns := cr.GetNamespace(); ns != "" {
			namespaces[ns] = true
			name = ns + "/" + name
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return 0, "", nil
	}
	sort.Strings(names)
	var where []string
	if len(namespaces) > 0 {
		nss := make([]string, 0, len(namespaces))
		for ns := range namespaces {
			nss = append(nss, ns)
		}
		sort.Strings(nss)
		noun := "namespace "
		if len(nss) > 1 {
			noun = "namespaces "
		}
		where = append(where, "in "+noun+strings.Join(nss, ", "))
	}
	shown := names[:min(len(names), foreignShown)]
	s := strings.Join(shown, ", ")
	if len(names) > len(shown) {
		s += fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	return len(names), strings.Join(append(where, s), ": "), nil
}

// UndoSummary is what Undo did, each object named as in UndoItem.Ref.
type UndoSummary struct {
	Deleted, Reverted, Left, Kept, Absent []string
}

// Message summarizes s in one line: "deleted 2 objects; reverted
// ConfigMap/team-settings in team (khook's fields given back); left
// namespace team in place".
func (s UndoSummary) Message() string {
	var parts []string
	switch n := len(s.Deleted); {
	case n == 0 && len(s.Reverted) == 0 && len(s.Left) == 0 && len(s.Absent) == 0:
		parts = append(parts, "nothing to delete")
	case n == 0 && len(s.Reverted) == 0 && len(s.Left) == 0:
		parts = append(parts, "nothing to delete: "+english.CountNoun(len(s.Absent), "object")+" already gone")
	case n > 0:
		p := "deleted " + english.CountNoun(n, "object")
		if len(s.Absent) > 0 {
			p += fmt.Sprintf(" (%d already gone)", len(s.Absent))
		}
		parts = append(parts, p)
	}
	if len(s.Reverted) > 0 {
		parts = append(parts, "reverted "+strings.Join(s.Reverted, ", ")+" (khook's fields given back)")
	}
	if len(s.Left) > 0 {
		parts = append(parts, "left "+strings.Join(s.Left, ", ")+" alone (not created by this spec, holds none of khook's fields)")
	}
	if len(s.Kept) > 0 {
		parts = append(parts, "left "+strings.Join(s.Kept, ", ")+" in place")
	}
	return strings.Join(parts, "; ")
}

// RefusedError is an undo refused before it changed anything: CRDs whose
// kinds have custom resources the spec did not create.
type RefusedError struct{ Items []UndoItem }

func (e *RefusedError) Error() string {
	parts := make([]string, len(e.Items))
	for i, it := range e.Items {
		parts[i] = it.Ref + ": " + it.Reason
	}
	return "refused to delete " + strings.Join(parts, "; ")
}

// Undo undoes an apply step's objects: it plans (PlanUndo) and carries
// out that plan (CarryOut), as destroy --yes does.
func (m *Manager) Undo(ctx context.Context, objs []*unstructured.Unstructured, opts UndoOptions) (UndoSummary, error) {
	items, err := m.PlanUndo(ctx, objs, opts)
	if err != nil && ctx.Err() != nil {
		return UndoSummary{}, err
	}
	return m.CarryOut(ctx, items, opts)
}

// CarryOut carries out the undo plan items (PlanUndo's, as the plan showed
// them, in that order: decision 261): it deletes what the spec created
// (waiting until it is gone, CRDs last, as DeleteAll), reverts what khook
// only configured (revert), and leaves Namespaces and objects holding
// nothing of khook's. It plans nothing again: an object changed since
// its plan was read, in more than its controllers keep (unchangedSince),
// is left and named (a *StaleError), the others still undone. A refused
// CRD stops it before any write (*RefusedError). A refused delete or
// revert does not stop the others; the call then fails naming each.
// Items carried out before (an earlier attempt of the step) are not
// carried out again.
func (m *Manager) CarryOut(ctx context.Context, items []UndoItem, opts UndoOptions) (UndoSummary, error) {
	var refused []UndoItem
	for _, it := range items {
		if it.Action == UndoRefuse {
			refused = append(refused, it)
		}
	}
	if len(refused) > 0 {
		return UndoSummary{}, &RefusedError{Items: refused}
	}
	c := &carryOut{m: m, opts: opts}
	for _, crdPhase := range []bool{false, true} {
		c.targets, c.deleted = nil, nil
		for _, it := range items {
			if it.crd != crdPhase {
				continue
			}
			if err := c.item(ctx, it); err != nil {
				return c.sum, err
			}
		}
		if err := m.WaitGone(ctx, c.targets, opts.Progress); err != nil {
			return c.sum, err
		}
		for _, it := range items {
			if it.crd == crdPhase && it.Action == UndoDelete && slices.Contains(c.deleted, it.Ref) {
				markDone(it)
			}
		}
		c.sum.Deleted = append(c.sum.Deleted, c.deleted...)
	}
	if len(c.failed) > 0 {
		msgs := make([]string, len(c.failed))
		for i, err := range c.failed {
			msgs[i] = err.Error()
		}
		return c.sum, &UndoError{Msg: fmt.Sprintf("could not undo %d of %s: %s (%s)", len(c.failed), english.CountNoun(len(items), "object"), strings.Join(msgs, "; "), c.sum.Message()), Errs: c.failed}
	}
	return c.sum, nil
}

// carryOut is one CarryOut under way: what it did, what failed, and the
// deletes of its current phase (CRDs or not), waited for together.
type carryOut struct {
	m       *Manager
	opts    UndoOptions
	sum     UndoSummary
	failed  []error
	targets []waiter.Target
	deleted []string
}

func (c *carryOut) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		c.opts.Progress(fmt.Sprintf(format, args...))
	}
}

// itemDone reports whether it was carried out before.
func itemDone(it UndoItem) bool { return it.done != nil && *it.done }

// markDone marks it carried out.
func markDone(it UndoItem) {
	if it.done != nil {
		*it.done = true
	}
}

// item carries out one item; an error ends the undo (ctx ended).
func (c *carryOut) item(ctx context.Context, it UndoItem) error {
	switch it.Action {
	case UndoUnknown:
		c.failed = append(c.failed, it.err)
	case UndoKeep:
		c.sum.Kept = append(c.sum.Kept, strings.ToLower(strings.Replace(it.Ref, "/", " ", 1)))
	case UndoAbsent:
		c.sum.Absent = append(c.sum.Absent, it.Ref)
	case UndoLeave:
		c.sum.Left = append(c.sum.Left, it.Ref)
		c.progress("%s left alone: %s", it.Ref, it.Reason)
	case UndoRejected:
		c.failed = append(c.failed, it.err)
	case UndoRevert:
		return c.revert(ctx, it)
	case UndoDelete:
		return c.delete(ctx, it)
	}
	return nil
}

func (c *carryOut) revert(ctx context.Context, it UndoItem) error {
	if itemDone(it) {
		c.sum.Reverted = append(c.sum.Reverted, it.Ref)
		return nil
	}
	if err := c.m.revert(ctx, it.mapping, it.live, it.revert); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", it.Ref, err)
		}
		c.failed = append(c.failed, fmt.Errorf("%s: %w", it.Ref, err))
		return nil
	}
	markDone(it)
	c.sum.Reverted = append(c.sum.Reverted, it.Ref)
	c.progress("%s reverted: %s", it.Ref, it.Reason)
	return nil
}

// delete sends the delete of it; its phase waits for it to be gone.
func (c *carryOut) delete(ctx context.Context, it UndoItem) error {
	if itemDone(it) {
		c.sum.Deleted = append(c.sum.Deleted, it.Ref)
		return nil
	}
	t, err := c.m.DeletePlanned(ctx, it.mapping, it.live)
	switch {
	case apierrors.IsNotFound(err):
		markDone(it)
		c.sum.Absent = append(c.sum.Absent, it.Ref)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("%s delete failed: %w", it.Ref, err)
	case err != nil:
		c.failed = append(c.failed, fmt.Errorf("%s: %w", it.Ref, err))
	default:
		c.progress("%s deleted: %s", it.Ref, it.Reason)
		c.targets = append(c.targets, t)
		c.deleted = append(c.deleted, it.Ref)
	}
	return nil
}

// DeletePlanned deletes planned (an object as destroy's plan read it),
// preconditioned on its UID and resourceVersion: one changed since in
// more than its controllers keep (unchangedSince) is not deleted (a
// *StaleError), one changed only there is deleted at its new
// resourceVersion; one gone or replaced since is a NotFound error.
func (m *Manager) DeletePlanned(ctx context.Context, mapping *meta.RESTMapping, planned *unstructured.Unstructured) (waiter.Target, error) {
	ri := m.Client(mapping, planned.GetNamespace())
	uid, rv := planned.GetUID(), planned.GetResourceVersion()
	bg := metav1.DeletePropagationBackground
	for attempt := 1; ; attempt++ {
		err := ri.Delete(ctx, planned.GetName(), metav1.DeleteOptions{
			PropagationPolicy: &bg,
			Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		})
		if err == nil {
			return waiter.Target{Mapping: mapping, Namespace: planned.GetNamespace(), Name: planned.GetName(), UID: uid}, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxPatchAttempts {
			return waiter.Target{}, err
		}
		fresh, gerr := ri.Get(ctx, planned.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr) || gerr == nil && fresh.GetUID() != uid:
			return waiter.Target{}, apierrors.NewNotFound(mapping.Resource.GroupResource(), planned.GetName())
		case gerr != nil:
			return waiter.Target{}, gerr
		case fresh.GetDeletionTimestamp() != nil:
			// being deleted already (an earlier attempt): waited for
			return waiter.Target{Mapping: mapping, Namespace: planned.GetNamespace(), Name: planned.GetName(), UID: uid}, nil
		case !unchangedSince(planned, fresh, false):
			return waiter.Target{}, &StaleError{Was: planned.GetResourceVersion(), Now: fresh.GetResourceVersion()}
		}
		rv = fresh.GetResourceVersion()
	}
}

// UndoError is an Undo that could not undo every object: it undid the
// others, and names each object it could not undo, with why. It unwraps to
// those errors, so apierrors.IsForbidden and the like see them.
type UndoError struct {
	Msg  string
	Errs []error
}

func (e *UndoError) Error() string   { return e.Msg }
func (e *UndoError) Unwrap() []error { return e.Errs }

// onlyWriter reports whether manager wrote every field of live that any
// writer owns, besides status and metadata (what controllers add: a
// Deployment's revision annotation, finalizers, status). An object whose
// content another writer set (its creator, another team's apply) is not
// manager's alone.
func onlyWriter(live *unstructured.Unstructured, manager string) bool {
	for _, f := range live.GetManagedFields() {
		if f.Manager == manager || f.Subresource == "status" || f.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(f.FieldsV1.Raw, &fields); err != nil {
			return false
		}
		for k := range fields {
			if k != "f:metadata" && k != "f:status" {
				return false
			}
		}
	}
	return true
}
