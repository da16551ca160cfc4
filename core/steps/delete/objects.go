package delete

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/kube"
	"khook.io/core/manifest"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/waiter"
)

// ObjectsOptions tune DeleteObjects.
type ObjectsOptions struct {
	// Namespace fills in namespace-less namespaced objects, as in apply.
	Namespace string
	// KeepNamespaces leaves Namespace objects in place (destroy does:
	// deleting a namespace deletes everything in it, khook's or not).
	KeepNamespaces bool
	// IgnoreNotFound makes absent objects a success; otherwise the
	// objects that exist are still deleted, and then the call fails
	// naming the absent ones (like kubectl delete -f).
	IgnoreNotFound bool
}

// Summary is what DeleteObjects did, each object as Kind/name (plus
// " in <namespace>" for namespaced ones).
type Summary struct {
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
func (s Summary) Message() string {
	var b strings.Builder
	switch n := len(s.Deleted); {
	case n == 0 && len(s.Absent) == 0:
		b.WriteString("nothing to delete")
	case n == 0:
		fmt.Fprintf(&b, "nothing to delete: %s already gone", countNoun(len(s.Absent), "object"))
	default:
		fmt.Fprintf(&b, "deleted %s", countNoun(n, "object"))
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

func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// NotFoundError lists objects that were absent while ignoreNotFound was
// false.
type NotFoundError struct{ Objects []string }

func (e *NotFoundError) Error() string {
	return "not found: " + strings.Join(e.Objects, ", ")
}

// DeleteObjects deletes objs (a manifests list, as loaded) in reverse
// order, custom resource definitions last (so their custom resources are
// gone before them), with background propagation like kubectl, then waits
// until every deleted object is gone, bounded by ctx. An object replaced
// meanwhile (same name, another UID) counts as gone. An object whose
// delete is refused (forbidden, say) does not stop the others: like
// kubectl delete -f, every other object is still deleted, and the call
// then fails with a *PartialError naming each object left and why.
func DeleteObjects(ctx context.Context, req *step.Request, objs []*unstructured.Unstructured, opts ObjectsOptions) (Summary, error) {
	var sum Summary
	maps := newMappings(req.Kube)
	var crds, rest []*unstructured.Unstructured
	for _, o := range slices.Backward(objs) {
		if manifest.IsCRD(o.GroupVersionKind()) {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
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
				sum.Unnamed = append(sum.Unnamed, manifest.Ref(o))
				continue
			}
			mapping, err := maps.get(ctx, gvk)
			if meta.IsNoMatchError(err) {
				sum.Absent = append(sum.Absent, manifest.Ref(o))
				continue
			}
			if err != nil {
				if ctx.Err() != nil {
					return sum, fmt.Errorf("%s: %w", manifest.Ref(o), err)
				}
				sum.Failed = append(sum.Failed, fmt.Errorf("%s: %w", manifest.Ref(o), err))
				continue
			}
			obj := o.DeepCopy()
			manifest.SetNamespace(obj, kube.Namespaced(mapping), opts.Namespace)
			d := Describe(mapping, obj.GetNamespace(), obj.GetName())
			t, err := deleteOne(ctx, req.Kube, mapping, obj.GetNamespace(), obj.GetName())
			switch {
			case apierrors.IsNotFound(err):
				sum.Absent = append(sum.Absent, d)
			case err != nil && ctx.Err() != nil:
				return sum, fmt.Errorf("%s delete failed: %w", manifest.Ref(o), err)
			case err != nil:
				// like kubectl delete -f: the others are still deleted,
				// and every refusal reported at the end
				sum.Failed = append(sum.Failed, fmt.Errorf("%s: %w", d, err))
			default:
				targets = append(targets, t)
				deleted = append(deleted, d)
			}
		}
		if err := waitGone(ctx, req, targets); err != nil {
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

// PartialError is a DeleteObjects that could not delete every object: it
// deleted the others (Summary says what it did) and names each object it
// could not delete, with why. It unwraps to those errors, so
// apierrors.IsForbidden and the like see them.
type PartialError struct{ Summary Summary }

func (e *PartialError) Error() string {
	s := e.Summary
	msgs := make([]string, len(s.Failed))
	for i, err := range s.Failed {
		msgs[i] = err.Error()
	}
	total := len(s.Failed) + len(s.Deleted) + len(s.Absent)
	msg := fmt.Sprintf("could not delete %d of %s: %s", len(s.Failed), countNoun(total, "object"), strings.Join(msgs, "; "))
	if done := s.Message(); len(s.Deleted) > 0 || len(s.Absent) > 0 {
		msg += " (" + done + ")"
	}
	return msg
}

func (e *PartialError) Unwrap() []error { return e.Summary.Failed }

// deleteOne deletes one object by name, preconditioned on the UID it read
// (so a replacement created meanwhile is not deleted), with background
// propagation. It returns the wait target, or a NotFound error when the
// object is absent.
func deleteOne(ctx context.Context, c *kube.Clients, mapping *meta.RESTMapping, namespace, name string) (waiter.Target, error) {
	ri := c.Resource(mapping, namespace)
	live, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return waiter.Target{}, err
	}
	return deleteLive(ctx, c, mapping, live)
}

func deleteLive(ctx context.Context, c *kube.Clients, mapping *meta.RESTMapping, live *unstructured.Unstructured) (waiter.Target, error) {
	ri := c.Resource(mapping, live.GetNamespace())
	uid := live.GetUID()
	bg := metav1.DeletePropagationBackground
	err := ri.Delete(ctx, live.GetName(), metav1.DeleteOptions{
		PropagationPolicy: &bg,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsConflict(err) {
		// replaced since it was read: the object we read is gone
		return waiter.Target{}, apierrors.NewNotFound(mapping.Resource.GroupResource(), live.GetName())
	}
	if err != nil {
		return waiter.Target{}, err
	}
	return waiter.Target{Mapping: mapping, Namespace: live.GetNamespace(), Name: live.GetName(), UID: uid}, nil
}

func waitGone(ctx context.Context, req *step.Request, targets []waiter.Target) error {
	if len(targets) == 0 {
		return nil
	}
	req.Logf("waiting until %s gone", countNoun(len(targets), "object")+isAre(len(targets)))
	err := waiter.Until(ctx, req.Kube, targets, spec.WaitFor{Kind: spec.ForDelete}, func(line string) { req.Logf("%s", req.Redactor.String(line)) })
	if err != nil {
		return fmt.Errorf("wait until deleted: %w", err)
	}
	return nil
}

func isAre(n int) string {
	if n == 1 {
		return " is"
	}
	return " are"
}

// Describe names an object for messages: Kind/name, plus " in <ns>" for a
// namespaced object.
func Describe(mapping *meta.RESTMapping, namespace, name string) string {
	s := mapping.GroupVersionKind.Kind + "/" + name
	if kube.Namespaced(mapping) && namespace != "" {
		s += " in " + namespace
	}
	return s
}

// ExistingObjects returns which of objs exist, as Describe names them, for
// a plan; kinds the cluster does not serve count as absent.
func ExistingObjects(ctx context.Context, c *kube.Clients, objs []*unstructured.Unstructured, namespace string) (existing, absent []string, err error) {
	maps := newMappings(c)
	for _, o := range objs {
		if o.GetName() == "" {
			continue
		}
		mapping, err := maps.get(ctx, o.GroupVersionKind())
		if meta.IsNoMatchError(err) {
			absent = append(absent, manifest.Ref(o))
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", manifest.Ref(o), err)
		}
		obj := o.DeepCopy()
		manifest.SetNamespace(obj, kube.Namespaced(mapping), namespace)
		d := Describe(mapping, obj.GetNamespace(), obj.GetName())
		_, err = c.Resource(mapping, obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			absent = append(absent, d)
		case err != nil:
			return nil, nil, fmt.Errorf("%s: %w", manifest.Ref(o), err)
		default:
			existing = append(existing, d)
		}
	}
	return existing, absent, nil
}

// mappings caches REST mappings for one call, so many objects of a kind
// the cluster does not serve cost one discovery reset, not one each.
type mappings struct {
	c *kube.Clients
	m map[schema.GroupVersionKind]mappingResult
}

type mappingResult struct {
	mapping *meta.RESTMapping
	err     error
}

func newMappings(c *kube.Clients) *mappings {
	return &mappings{c: c, m: map[schema.GroupVersionKind]mappingResult{}}
}

func (m *mappings) get(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if r, ok := m.m[gvk]; ok {
		return r.mapping, r.err
	}
	mapping, err := m.c.MappingFor(ctx, gvk)
	m.m[gvk] = mappingResult{mapping, err}
	return mapping, err
}
