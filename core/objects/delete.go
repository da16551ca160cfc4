package objects

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/internal/english"
	"khook.io/core/manifest"
	"khook.io/core/waiter"
)

// DeleteOptions tune DeleteAll.
type DeleteOptions struct {
	// Namespace fills in namespace-less namespaced objects, as in apply.
	Namespace string
	// KeepNamespaces leaves Namespace objects in place (destroy does:
	// deleting a namespace deletes everything in it, khook's or not).
	KeepNamespaces bool
	// IgnoreNotFound makes absent objects a success; otherwise the
	// objects that exist are still deleted, and then the call fails
	// naming the absent ones (like kubectl delete -f).
	IgnoreNotFound bool
	// Progress receives progress lines ("waiting until 2 objects are
	// gone"); nil drops them.
	Progress func(string)
}

// DeleteSummary is what DeleteAll did, each object as Kind/name (plus
// " in <namespace>" for namespaced ones).
type DeleteSummary struct {
	Deleted []string
	// Absent objects were already gone (or their kind is not served).
	Absent []string
	// Kept are the Namespace objects left in place (KeepNamespaces).
	Kept []string
	// Unnamed objects use generateName: there is no way to find them
	// again, so they are left alone.
	Unnamed []string
	// Failed are the objects that could not be deleted (a refused
	// request), each error naming its object.
	Failed []error
}

// Message summarizes s in one line: "deleted 3 objects (1 already gone);
// left namespace team in place".
func (s DeleteSummary) Message() string {
	var b strings.Builder
	switch n := len(s.Deleted); {
	case n == 0 && len(s.Absent) == 0:
		b.WriteString("nothing to delete")
	case n == 0:
		fmt.Fprintf(&b, "nothing to delete: %s already gone", english.CountNoun(len(s.Absent), "object"))
	default:
		fmt.Fprintf(&b, "deleted %s", english.CountNoun(n, "object"))
		if len(s.Absent) > 0 {
			fmt.Fprintf(&b, " (%d already gone)", len(s.Absent))
		}
	}
	if len(s.Kept) > 0 {
		fmt.Fprintf(&b, "; left %s in place", strings.Join(s.Kept, ", "))
	}
	if len(s.Unnamed) > 0 {
		fmt.Fprintf(&b, "; left %s alone (generateName: cannot be found again)", strings.Join(s.Unnamed, ", "))
	}
	return b.String()
}

// NotFoundError lists objects that were absent while ignoreNotFound was
// false.
type NotFoundError struct{ Objects []string }

func (e *NotFoundError) Error() string {
	return "not found: " + strings.Join(e.Objects, ", ")
}

// deleteOrder splits objs (a manifests list, as loaded) into the two
// phases khook deletes them in, each last manifest first: the custom
// resource definitions come last, so that their custom resources are
// gone before them (DeleteAll, PlanUndo and Undo).
func deleteOrder(objs []*unstructured.Unstructured) (rest, crds []*unstructured.Unstructured) {
	for _, o := range slices.Backward(objs) {
		if manifest.IsCRD(o.GroupVersionKind()) {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	return rest, crds
}

// DeleteAll deletes objs (a manifests list, as loaded) in reverse
// order, custom resource definitions last (so their custom resources are
// gone before them), with background propagation like kubectl, then waits
// until every deleted object is gone, bounded by ctx. An object replaced
// meanwhile (same name, another UID) counts as gone. An object whose
// delete is refused (forbidden, say) does not stop the others: like
// kubectl delete -f, every other object is still deleted, and the call
// then fails with a *PartialError naming each object left and why.
func (m *Manager) DeleteAll(ctx context.Context, objs []*unstructured.Unstructured, opts DeleteOptions) (DeleteSummary, error) {
	var sum DeleteSummary
	rest, crds := deleteOrder(objs)
	for _, phase := range [][]*unstructured.Unstructured{rest, crds} {
		var targets []waiter.Target
		var deleted []string
		for _, o := range phase {
			gvk := o.GroupVersionKind()
			if opts.KeepNamespaces && manifest.IsNamespace(gvk) {
				sum.Kept = append(sum.Kept, "namespace "+o.GetName())
				continue
			}
			if o.GetName() == "" {
				sum.Unnamed = append(sum.Unnamed, RefOf(o).KindName())
				continue
			}
			r, err := m.Resolve(ctx, o, opts.Namespace)
			if meta.IsNoMatchError(err) {
				sum.Absent = append(sum.Absent, RefOf(o).KindName())
				continue
			}
			if err != nil {
				if ctx.Err() != nil {
					return sum, fmt.Errorf("%s: %w", RefOf(o).KindName(), err)
				}
				sum.Failed = append(sum.Failed, fmt.Errorf("%s: %w", RefOf(o).KindName(), err))
				continue
			}
			d := r.Ref().String()
			t, err := m.deleteResolved(ctx, r)
			switch {
			case apierrors.IsNotFound(err):
				sum.Absent = append(sum.Absent, d)
			case err != nil && ctx.Err() != nil:
				return sum, fmt.Errorf("%s delete failed: %w", RefOf(o).KindName(), err)
			case err != nil:
				// like kubectl delete -f: the others are still deleted,
				// and every refusal reported at the end
				sum.Failed = append(sum.Failed, fmt.Errorf("%s: %w", d, err))
			default:
				targets = append(targets, t)
				deleted = append(deleted, d)
			}
		}
		if err := m.WaitGone(ctx, targets, opts.Progress); err != nil {
			return sum, err
		}
		sum.Deleted = append(sum.Deleted, deleted...)
	}
	if len(sum.Failed) > 0 {
		return sum, &PartialError{Summary: sum}
	}
	if !opts.IgnoreNotFound && len(sum.Absent) > 0 {
		return sum, &NotFoundError{Objects: sum.Absent}
	}
	return sum, nil
}

// PartialError is a DeleteAll that could not delete every object: it
// deleted the others (Summary says what it did) and names each object it
// could not delete, with why. It unwraps to those errors, so
// apierrors.IsForbidden and the like see them.
type PartialError struct{ Summary DeleteSummary }

func (e *PartialError) Error() string {
	s := e.Summary
	msgs := make([]string, len(s.Failed))
	for i, err := range s.Failed {
		msgs[i] = err.Error()
	}
	total := len(s.Failed) + len(s.Deleted) + len(s.Absent)
	msg := fmt.Sprintf("could not delete %d of %s: %s", len(s.Failed), english.CountNoun(total, "object"), strings.Join(msgs, "; "))
	if done := s.Message(); len(s.Deleted) > 0 || len(s.Absent) > 0 {
		msg += " (" + done + ")"
	}
	return msg
}

func (e *PartialError) Unwrap() []error { return e.Summary.Failed }

// deleteResolved deletes the resolved object as Delete does, after
// reading its UID; an absent object is a NotFound error.
func (m *Manager) deleteResolved(ctx context.Context, r Resolved) (waiter.Target, error) {
	live, err := m.Get(ctx, r)
	if err != nil {
		return waiter.Target{}, err
	}
	return m.Delete(ctx, r.Mapping, live)
}

// Delete deletes live, preconditioned on its UID (so a replacement
// created since it was read is not deleted), with background propagation
// like kubectl delete. It returns what WaitGone waits on; an object
// already gone, or replaced, is a NotFound error.
func (m *Manager) Delete(ctx context.Context, mapping *meta.RESTMapping, live *unstructured.Unstructured) (waiter.Target, error) {
	return m.DeleteUID(ctx, mapping, live.GetNamespace(), live.GetName(), live.GetUID())
}

// DeleteUID is Delete of the object name in namespace whose UID is uid.
func (m *Manager) DeleteUID(ctx context.Context, mapping *meta.RESTMapping, namespace, name string, uid types.UID) (waiter.Target, error) {
	bg := metav1.DeletePropagationBackground
	err := m.Client(mapping, namespace).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: &bg,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsConflict(err) {
		// replaced since it was read: the object we read is gone
		return waiter.Target{}, apierrors.NewNotFound(mapping.Resource.GroupResource(), name)
	}
	if err != nil {
		return waiter.Target{}, err
	}
	return waiter.Target{Mapping: mapping, Namespace: namespace, Name: name, UID: uid}, nil
}

// WaitGone waits, by watch and bounded by ctx, until every target is gone
// or replaced by an object of the same name with another UID; progress
// (nil drops it) hears what it waits for. The one wait-until-gone of
// khook's steps.
func (m *Manager) WaitGone(ctx context.Context, targets []waiter.Target, progress func(string)) error {
	if len(targets) == 0 {
		return nil
	}
	if progress != nil {
		progress("waiting until " + english.CountNoun(len(targets), "object") + " " + english.IsAre(len(targets)) + " gone")
	}
	if err := waiter.UntilGone(ctx, m.kube, targets, progress); err != nil {
		return fmt.Errorf("wait until deleted: %w", err)
	}
	return nil
}

// Existing returns which of objs exist, each named by Ref.String, for a
// plan; kinds the cluster does not serve count as absent.
func (m *Manager) Existing(ctx context.Context, objs []*unstructured.Unstructured, namespace string) (existing, absent []string, err error) {
	for _, o := range objs {
		if o.GetName() == "" {
			continue
		}
		r, err := m.Resolve(ctx, o, namespace)
		if meta.IsNoMatchError(err) {
			absent = append(absent, RefOf(o).KindName())
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", RefOf(o).KindName(), err)
		}
		d := r.Ref().String()
		_, err = m.Get(ctx, r)
		switch {
		case apierrors.IsNotFound(err):
			absent = append(absent, d)
		case err != nil:
			return nil, nil, fmt.Errorf("%s: %w", RefOf(o).KindName(), err)
		default:
			existing = append(existing, d)
		}
	}
	return existing, absent, nil
}
