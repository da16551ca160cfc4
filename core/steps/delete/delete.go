// Package delete is the delete: step: it removes what a manifests list
// defines, what a resource reference (type or kind/name, with namespace or
// allNamespaces, label and field selectors) matches, or a Helm release
// (through an injected ReleaseDeleter), and waits until it is gone.
//
// Semantics where the spec is silent:
//   - objects are deleted with background propagation, like kubectl
//     delete, each preconditioned on the UID that was read, and the step
//     waits (watches, bounded by the step timeout) until every deleted
//     object is gone or replaced by a new object of the same name;
//   - by manifests: objects are deleted last manifest first (custom
//     resource definitions after everything else, so their custom
//     resources go first); a kind the cluster no longer serves counts as
//     absent; objects named by generateName are left alone;
//   - by resource: a bare type without selectors deletes every object of
//     that type in the namespace (kubectl delete pods --all); a type the
//     cluster does not serve is an error even with ignoreNotFound, since
//     it is far more often a typo than an uninstalled operator;
//   - ignoreNotFound: false fails the step when the named object is
//     absent, when a type or selector matches nothing, or when any object
//     of a manifests list is absent (after deleting the others).
//
// delete has no Destroyer: destroy skips it with a reason.
package delete

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/kube"
	"khook.io/core/manifest"
	"khook.io/core/objects"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/waiter"
)

// ReleaseDeleter uninstalls Helm releases: the helm engine implements it.
// Uninstall also waits until the release's resources are gone, bounded by
// ctx; an absent release is success when ignoreNotFound is set.
type ReleaseDeleter interface {
	Uninstall(ctx context.Context, req *step.Request, release, namespace string, ignoreNotFound bool) (step.Outcome, error)
}

// ReleaseChecker is optionally implemented by a ReleaseDeleter, so that a
// live plan can tell delete from no-op for the release form.
type ReleaseChecker interface {
	ReleaseExists(ctx context.Context, req *step.Request, release, namespace string) (bool, error)
}

// Options configure the executor.
type Options struct {
	// Releases uninstalls releases (delete.release); nil makes that form
	// fail with a clear error.
	Releases ReleaseDeleter
}

// Executor runs delete: steps. It implements step.Executor and
// step.Planner.
type Executor struct {
	releases ReleaseDeleter
}

// New returns the delete executor.
func New(opts Options) *Executor {
	return &Executor{releases: opts.Releases}
}

// ErrNoReleaseDeleter is returned for delete.release when no helm engine
// was registered.
var ErrNoReleaseDeleter = errors.New("delete by release needs the helm engine, and none is registered with the delete executor")

// Run deletes what the step names and waits until it is gone.
func (e *Executor) Run(ctx context.Context, req *step.Request) (result step.Outcome, err error) {
	d := spec.BlockOf[Delete](req.Step)
	if d == nil {
		return step.Outcome{}, errors.New("not a delete step")
	}
	switch d.Form() {
	case ByManifests:
		objs, err := manifest.Load(ctx, d.Manifests, req.BaseDir, req.HTTP)
		if err != nil {
			return step.Outcome{}, err
		}
		sum, err := req.Objects().DeleteAll(ctx, objs, objects.DeleteOptions{
			Namespace:      req.Namespace(d.Namespace),
			IgnoreNotFound: d.IgnoresNotFound(),
			Progress:       req.Progress,
		})
		if err != nil {
			return step.Outcome{}, err
		}
		return step.Outcome{Message: sum.Message(), Changed: len(sum.Deleted) > 0}, nil
	case ByResource:
		return e.byResource(ctx, req, d)
	case ByRelease:
		if e.releases == nil {
			return step.Outcome{}, ErrNoReleaseDeleter
		}
		return e.releases.Uninstall(ctx, req, d.Release, req.Namespace(d.Namespace), d.IgnoresNotFound())
	}
	return step.Outcome{}, errors.New("delete needs one of manifests, resource or release")
}

// selection is a resolved resource form.
type selection struct {
	ref     spec.ResourceRef
	mapping *meta.RESTMapping
	// namespace is "" for cluster-scoped kinds and allNamespaces.
	namespace string
	all       bool
	label     string
	field     string
}

func (s selection) String() string {
	var b strings.Builder
	if s.ref.Name != "" {
		b.WriteString(s.ref.String())
	} else {
		b.WriteString(s.mapping.Resource.Resource)
	}
	var sel []string
	if s.label != "" {
		sel = append(sel, "selector "+s.label)
	}
	if s.field != "" {
		sel = append(sel, "field selector "+s.field)
	}
	if len(sel) > 0 {
		b.WriteString(" matching " + strings.Join(sel, " and "))
	}
	switch {
	case s.all:
		b.WriteString(" in all namespaces")
	case s.namespace != "":
		b.WriteString(" in namespace " + s.namespace)
	}
	return b.String()
}

func resolve(ctx context.Context, req *step.Request, d *Delete) (selection, error) {
	ref, err := spec.ParseResource(d.Resource)
	if err != nil {
		return selection{}, err
	}
	mapping, err := req.Kube.MappingForType(ctx, ref.Type)
	if err != nil {
		return selection{}, err
	}
	s := selection{ref: ref, mapping: mapping, label: d.Selector, field: d.FieldSelector}
	if kube.Namespaced(mapping) {
		if d.AllNamespaces && ref.Name == "" {
			s.all = true
		} else {
			s.namespace = req.Namespace(d.Namespace)
		}
	}
	return s, nil
}

// matches returns the objects the selection names: one by name (none
// when it is absent), or every match of the type and selectors.
func (s selection) matches(ctx context.Context, c *kube.Clients) ([]*unstructured.Unstructured, error) {
	ri := c.Resource(s.mapping, s.namespace)
	if s.ref.Name != "" {
		live, err := ri.Get(ctx, s.ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []*unstructured.Unstructured{live}, nil
	}
	list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: s.label, FieldSelector: s.field})
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (e *Executor) byResource(ctx context.Context, req *step.Request, d *Delete) (step.Outcome, error) {
	s, err := resolve(ctx, req, d)
	if err != nil {
		return step.Outcome{}, err
	}
	objs, err := s.matches(ctx, req.Kube)
	if err != nil {
		return step.Outcome{}, fmt.Errorf("%s: %w", s, err)
	}
	if len(objs) == 0 {
		if !d.IgnoresNotFound() {
			return step.Outcome{}, fmt.Errorf("%s: %s", s, absentPhrase(s))
		}
		return step.Outcome{Message: "nothing to delete: " + s.String() + " " + absentPhrase(s)}, nil
	}
	m := req.Objects()
	var targets []waiter.Target
	var deleted []string
	for _, o := range objs {
		ref := objects.RefFor(s.mapping, o.GetNamespace(), o.GetName()).String()
		t, err := m.Delete(ctx, s.mapping, o)
		if apierrors.IsNotFound(err) {
			continue // gone meanwhile
		}
		if err != nil {
			return step.Outcome{}, fmt.Errorf("%s delete failed: %w", ref, err)
		}
		targets = append(targets, t)
		deleted = append(deleted, ref)
	}
	if err := m.WaitGone(ctx, targets, req.Progress); err != nil {
		return step.Outcome{}, err
	}
	if len(deleted) == 1 {
		return step.Outcome{Message: "deleted " + deleted[0], Changed: true}, nil
	}
	return step.Outcome{Message: fmt.Sprintf("deleted %d %s (%s)", len(deleted), s.mapping.Resource.Resource, s.scope()), Changed: len(deleted) > 0}, nil
}

func (s selection) scope() string {
	switch {
	case s.all:
		return "all namespaces"
	case s.namespace != "":
		return "namespace " + s.namespace
	}
	return "cluster-scoped"
}

func absentPhrase(s selection) string {
	if s.ref.Name != "" {
		return "not found"
	}
	return "matched nothing"
}

// Plan predicts delete (something matches) or no-op, without changing the
// cluster.
func (e *Executor) Plan(ctx context.Context, req *step.Request) (result step.Prediction, err error) {
	d := spec.BlockOf[Delete](req.Step)
	if d == nil {
		return step.Prediction{}, errors.New("not a delete step")
	}
	switch d.Form() {
	case ByManifests:
		objs, err := manifest.Load(ctx, d.Manifests, req.BaseDir, req.HTTP)
		if err != nil {
			return step.Prediction{}, err
		}
		existing, absent, err := req.Objects().Existing(ctx, objs, req.Namespace(d.Namespace))
		if err != nil {
			return step.Prediction{}, err
		}
		p := step.Prediction{Action: step.ActionNoOp, Reason: "none of the objects exists"}
		if len(existing) > 0 {
			p = step.Prediction{Action: step.ActionDelete}
		}
		for _, x := range existing {
			p.Details = append(p.Details, "delete "+x)
		}
		for _, x := range absent {
			p.Details = append(p.Details, "absent "+x)
		}
		if len(absent) > 0 && !d.IgnoresNotFound() {
			p.Reason = fmt.Sprintf("%d absent: the step will fail (ignoreNotFound: false)", len(absent))
		}
		return p, nil
	case ByResource:
		s, err := resolve(ctx, req, d)
		if err != nil {
			return step.Prediction{}, err
		}
		objs, err := s.matches(ctx, req.Kube)
		if err != nil {
			return step.Prediction{}, fmt.Errorf("%s: %w", s, err)
		}
		if len(objs) == 0 {
			p := step.Prediction{Action: step.ActionNoOp, Reason: s.String() + " " + absentPhrase(s)}
			if !d.IgnoresNotFound() {
				p.Reason += ": the step will fail (ignoreNotFound: false)"
			}
			return p, nil
		}
		p := step.Prediction{Action: step.ActionDelete}
		for _, o := range objs {
			p.Details = append(p.Details, "delete "+objects.RefFor(s.mapping, o.GetNamespace(), o.GetName()).String())
		}
		return p, nil
	case ByRelease:
		ns := req.Namespace(d.Namespace)
		rc, ok := e.releases.(ReleaseChecker)
		if !ok {
			return step.Prediction{Action: step.ActionUnknown, Reason: "cannot check Helm releases: the helm engine offers no release lookup"}, nil
		}
		exists, err := rc.ReleaseExists(ctx, req, d.Release, ns)
		if err != nil {
			return step.Prediction{}, err
		}
		if !exists {
			return step.Prediction{Action: step.ActionNoOp, Reason: fmt.Sprintf("release %s not found in namespace %s", d.Release, ns)}, nil
		}
		return step.Prediction{Action: step.ActionDelete, Details: []string{fmt.Sprintf("uninstall release %s in namespace %s", d.Release, ns)}}, nil
	}
	return step.Prediction{}, errors.New("delete needs one of manifests, resource or release")
}
