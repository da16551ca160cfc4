// Package apply is the apply: step: kubectl apply of a manifests list,
// object by object, in order.
//
// Semantics where the spec is silent:
//   - namespace: fills the namespace of namespaced objects that have none
//     (without it, the request's default namespace, then "default"); an
//     object with another namespace keeps it; a cluster-scoped object
//     never gets one, and one written on it is dropped;
//   - createNamespace: the namespace is read first and created only when
//     it is missing; an existing namespace is never modified;
//   - skipIf: exists holds when every object exists (an object named by
//     generateName never exists beforehand, so such a step never skips);
//     waitFor still waits on exactly those objects;
//   - client-side apply (the default) is kubectl's: a missing object is
//     created with the last-applied-configuration annotation; an existing
//     one gets a three-way patch (strategic merge for built-in kinds, JSON
//     merge for custom resources), so fields other writers set survive; a
//     patch the server turns into no change is reported unchanged;
//   - serverSide: server-side apply as field manager "khook" with force
//     false; a conflict fails the object, naming each field and the
//     manager that owns it. Objects applied client-side before (by khook
//     or kubectl: the Update managers owning the last-applied annotation)
//     first have those managers' fields handed to "khook", as kubectl
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
//     bootstrap's other steps (and people) put there too.
package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/diff"
	"khook.io/core/kube"
	"khook.io/core/manifest"
	"khook.io/core/spec"
	"khook.io/core/step"
	deletestep "khook.io/core/steps/delete"
	"khook.io/core/waiter"
)

// Options configure the executor.
type Options struct {
	// FieldManager defaults to FieldManager ("khook").
	FieldManager string
}

// Executor runs apply: steps. It implements step.Executor, step.Planner,
// step.Destroyer and step.Differ.
type Executor struct {
	fieldManager string
}

// New returns the apply executor.
func New(opts Options) *Executor {
	fm := opts.FieldManager
	if fm == "" {
		fm = FieldManager
	}
	return &Executor{fieldManager: fm}
}

// Type returns "apply".
func (e *Executor) Type() string { return spec.TypeApply }

// Objects loads the step's manifests: the objects it applies, in order,
// as written (namespaces are filled in per object by Prepare, once the
// object's kind is known to the cluster).
func Objects(ctx context.Context, req *step.Request) ([]*unstructured.Unstructured, error) {
	a := req.Step.Apply
	if a == nil {
		return nil, errors.New("not an apply step")
	}
	return manifest.Load(ctx, a.Manifests, req.BaseDir, req.HTTP)
}

// Run applies the step's objects and waits for waitFor.
func (e *Executor) Run(ctx context.Context, req *step.Request) (step.Outcome, error) {
	out, err := e.run(ctx, req)
	out.Message = req.Redactor.String(out.Message)
	out.SkipReason = req.Redactor.String(out.SkipReason)
	return out, req.Redactor.Error(err)
}

func (e *Executor) run(ctx context.Context, req *step.Request) (step.Outcome, error) {
	objs, err := Objects(ctx, req)
	if err != nil {
		return step.Outcome{}, err
	}
	a := req.Step.Apply
	ns := req.Namespace(a.Namespace)
	var cond *spec.WaitFor
	if a.WaitFor != "" {
		w, err := spec.ParseWaitFor(a.WaitFor)
		if err != nil {
			return step.Outcome{}, fmt.Errorf("waitFor %w", err)
		}
		cond = &w
	}

	if a.SkipIf == spec.SkipIfExists {
		targets, all, err := existing(ctx, req.Kube, objs, ns)
		if err != nil {
			return step.Outcome{}, err
		}
		if all {
			reason := allExist(len(objs))
			logf(req, "%s", reason)
			if err := waitFor(ctx, req, targets, cond); err != nil {
				return step.Outcome{}, err
			}
			msg := reason
			if cond != nil {
				msg += "; " + a.WaitFor + " met"
			}
			return step.Outcome{Skipped: true, SkipReason: reason, Message: msg}, nil
		}
	}

	nsCreated := false
	if a.CreateNamespace && a.Namespace != "" {
		nsCreated, err = EnsureNamespace(ctx, req.Kube, a.Namespace)
		if err != nil {
			return step.Outcome{}, err
		}
		if nsCreated {
			logf(req, "namespace %s created", a.Namespace)
		}
	}

	ap := &Applier{Kube: req.Kube, ServerSide: a.ServerSide, FieldManager: e.fieldManager, Redactor: req.Redactor}
	counts := map[Action]int{}
	targets := make([]waiter.Target, 0, len(objs))
	for i, o := range objs {
		res, err := ap.Apply(ctx, o, ns)
		if err != nil {
			return step.Outcome{}, partial(ctx, req, i, len(objs), manifest.Ref(o), "apply failed", err)
		}
		counts[res.Action]++
		logf(req, "%s %s", manifest.Ref(res.Object), res.Action)
		if manifest.IsCRD(res.Mapping.GroupVersionKind) {
			if err := establishCRD(ctx, req.Kube, res, func(line string) { logf(req, "%s", line) }); err != nil {
				return step.Outcome{}, partial(ctx, req, i+1, len(objs), manifest.Ref(res.Object), "", err)
			}
		}
		targets = append(targets, waiter.Target{Mapping: res.Mapping, Namespace: res.Object.GetNamespace(), Name: res.Object.GetName()})
	}
	if err := waitFor(ctx, req, targets, cond); err != nil {
		return step.Outcome{}, err
	}

	msg := Summary(len(objs), counts)
	if nsCreated {
		msg += "; namespace " + a.Namespace + " created"
	}
	if cond != nil {
		msg += "; " + a.WaitFor + " met"
	}
	return step.Outcome{Message: msg}, nil
}

// partial is the error of a step that stopped at object ref (what failed
// there: "apply failed", or nothing when err says it) after applying done
// of total objects. The count leads the error, so the run's summary and
// JSON say what was left applied, not only the progress lines: "applied 2
// of 5 objects before Secret/x failed: ...". When the run was interrupted,
// the count is the step's note of what it left behind.
func partial(ctx context.Context, req *step.Request, done, total int, ref, what string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return step.Interrupted(fmt.Sprintf("applied %d of %s before the interruption", done, countNoun(total, "object")), err)
	}
	if done == 0 {
		if what == "" {
			return fmt.Errorf("%s: %w", ref, err)
		}
		return fmt.Errorf("%s %s: %w", ref, what, err)
	}
	logf(req, "%d of %d objects applied before %s failed", done, total, ref)
	return fmt.Errorf("applied %d of %s before %s failed: %w", done, countNoun(total, "object"), ref, err)
}

// Summary is the outcome line: "applied 3 objects: 1 created, 1
// configured, 1 unchanged".
func Summary(total int, counts map[Action]int) string {
	var parts []string
	for _, a := range []Action{Created, Configured, Unchanged} {
		if n := counts[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, a))
		}
	}
	s := "applied " + countNoun(total, "object")
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	return s
}

// logf reports progress through the redactor: object names and the
// waiter's current values come from manifests.
func logf(req *step.Request, format string, args ...any) {
	if req.Log != nil {
		req.Log("%s", req.Redactor.String(fmt.Sprintf(format, args...)))
	}
}

func allExist(n int) string {
	if n == 1 {
		return "the object exists (skipIf: exists)"
	}
	return fmt.Sprintf("all %d objects exist (skipIf: exists)", n)
}

func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func waitFor(ctx context.Context, req *step.Request, targets []waiter.Target, cond *spec.WaitFor) error {
	if cond == nil || len(targets) == 0 {
		return nil
	}
	logf(req, "waiting for %s on %s", req.Step.Apply.WaitFor, countNoun(len(targets), "object"))
	if err := waiter.Until(ctx, req.Kube, targets, *cond, func(line string) { logf(req, "%s", line) }); err != nil {
		return fmt.Errorf("waitFor %s: %w", req.Step.Apply.WaitFor, err)
	}
	return nil
}

// existing reports whether every object exists, and the wait targets of
// all of them when they do. It stops reading at the first absent object.
func existing(ctx context.Context, c *kube.Clients, objs []*unstructured.Unstructured, ns string) ([]waiter.Target, bool, error) {
	targets := make([]waiter.Target, 0, len(objs))
	for _, o := range objs {
		if o.GetName() == "" {
			return nil, false, nil
		}
		mapping, err := c.MappingFor(ctx, o.GroupVersionKind())
		if meta.IsNoMatchError(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", manifest.Ref(o), err)
		}
		p := Prepare(o, mapping, ns)
		_, err = c.Resource(mapping, p.GetNamespace()).Get(ctx, p.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: check whether it exists: %w", manifest.Ref(o), err)
		}
		targets = append(targets, waiter.Target{Mapping: mapping, Namespace: p.GetNamespace(), Name: p.GetName()})
	}
	return targets, true, nil
}

// EnsureNamespace creates namespace name when it does not exist and
// reports whether it did; an existing namespace is left as it is. When
// reading namespaces is forbidden, the create is tried anyway (an
// existing namespace then answers AlreadyExists, a refused create names
// the verb), like Applier.Apply.
func EnsureNamespace(ctx context.Context, c *kube.Clients, name string) (bool, error) {
	_, err := c.Typed.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return false, nil
	}
	if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return false, fmt.Errorf("namespace %s: %w", name, err)
	}
	_, err = c.Typed.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("namespace %s: create failed: %w", name, err)
	}
	return true, nil
}

// Plan predicts create (no object exists), configure (some exist), skip
// (skipIf: exists and all exist) or unknown (a kind or namespace is
// missing that this step does not create: an earlier step may; or the
// user may not read an object), with one detail line per object. It only
// reads, and decides from what the user may read: a namespace it may not
// read is taken to exist (the object's own read then says whether it
// does), as apply and diff take it.
func (e *Executor) Plan(ctx context.Context, req *step.Request) (step.Prediction, error) {
	p, err := e.plan(ctx, req)
	if err != nil {
		return step.Prediction{}, req.Redactor.Error(err)
	}
	return p.Redacted(req.Redactor), nil
}

func (e *Executor) plan(ctx context.Context, req *step.Request) (step.Prediction, error) {
	objs, err := Objects(ctx, req)
	if err != nil {
		return step.Prediction{}, err
	}
	a := req.Step.Apply
	ns := req.Namespace(a.Namespace)

	// What this step itself creates before later objects need it.
	crdsHere := map[schema.GroupKind]bool{}
	nsHere := map[string]bool{}
	if a.CreateNamespace && a.Namespace != "" {
		nsHere[a.Namespace] = true
	}
	for _, o := range objs {
		switch gvk := o.GroupVersionKind(); {
		case manifest.IsCRD(gvk):
			crdsHere[crdGroupKind(o)] = true
		case manifest.IsNamespace(gvk):
			nsHere[o.GetName()] = true
		}
	}

	var details []string
	var reasons []string
	nsExists := map[string]bool{}
	exist, absent, unknown := 0, 0, 0
	// kinds found unserved: one discovery reset each, not one per object
	unserved := map[schema.GroupVersionKind]error{}
	if a.CreateNamespace && a.Namespace != "" {
		ok, err := namespaceExists(ctx, req.Kube, a.Namespace)
		switch {
		case apierrors.IsForbidden(err):
			ok = true // as apply: the create is tried and finds it there (or says it may not)
		case err != nil:
			return step.Prediction{}, err
		}
		nsExists[a.Namespace] = ok
		if !ok {
			details = append(details, "Namespace/"+a.Namespace+": create (createNamespace)")
		}
	}
	for _, o := range objs {
		ref := manifest.Ref(o)
		if o.GetName() == "" {
			details = append(details, ref+": create (generateName)")
			absent++
			continue
		}
		gvk := o.GroupVersionKind()
		var mapping *meta.RESTMapping
		err := unserved[gvk]
		if err == nil {
			if mapping, err = req.Kube.MappingFor(ctx, gvk); meta.IsNoMatchError(err) {
				unserved[gvk] = err
			}
		}
		if meta.IsNoMatchError(err) {
			if crdsHere[gvk.GroupKind()] {
				details = append(details, ref+": create (its CRD is applied first by this step)")
				absent++
				continue
			}
			r := fmt.Sprintf("the cluster does not serve %s: its CustomResourceDefinition does not exist yet (an earlier step may create it)", kindString(gvk))
			details = append(details, ref+": unknown ("+r+")")
			reasons = appendOnce(reasons, r)
			unknown++
			continue
		}
		if err != nil {
			return step.Prediction{}, fmt.Errorf("%s: %w", ref, err)
		}
		p := Prepare(o, mapping, ns)
		where := ref
		if p.GetNamespace() != "" {
			where += " in " + p.GetNamespace()
		}
		if kube.Namespaced(mapping) {
			present, seen := nsExists[p.GetNamespace()]
			if !seen {
				present, err = namespaceExists(ctx, req.Kube, p.GetNamespace())
				switch {
				case apierrors.IsForbidden(err):
					// a user who may not read namespaces may still use
					// this one: the object's own read decides
					present = true
				case err != nil:
					return step.Prediction{}, err
				}
				nsExists[p.GetNamespace()] = present
			}
			if !present {
				if nsHere[p.GetNamespace()] {
					details = append(details, where+": create")
					absent++
					continue
				}
				r := fmt.Sprintf("namespace %s does not exist (an earlier step may create it)", p.GetNamespace())
				details = append(details, where+": unknown ("+r+")")
				reasons = appendOnce(reasons, r)
				unknown++
				continue
			}
		}
		live, err := req.Kube.Resource(mapping, p.GetNamespace()).Get(ctx, p.GetName(), metav1.GetOptions{})
		if err == nil {
			// what khook wrote there from a secret is masked from now on,
			// also as it was before the secret was rotated
			diff.Learn(req.Redactor, p.Object, live.Object)
		}
		switch {
		case apierrors.IsNotFound(err):
			details = append(details, where+": create")
			absent++
		case apierrors.IsForbidden(err):
			// what the user may not read cannot be predicted; the other
			// objects still are
			r := "may not read " + mapping.Resource.Resource
			if p.GetNamespace() != "" {
				r += " in " + p.GetNamespace()
			}
			details = append(details, where+": unknown ("+kube.Reason(err)+")")
			reasons = appendOnce(reasons, r)
			unknown++
		case err != nil:
			return step.Prediction{}, fmt.Errorf("%s: %w", where, err)
		default:
			details = append(details, where+": configure (exists)")
			exist++
		}
	}
	switch {
	case unknown > 0:
		return step.Prediction{Action: "unknown", Reason: strings.Join(reasons, "; "), Details: details}, nil
	case a.SkipIf == spec.SkipIfExists && absent == 0:
		return step.Prediction{Action: "skip", Reason: allExist(exist), Details: details}, nil
	case exist == 0:
		return step.Prediction{Action: "create", Details: details}, nil
	}
	return step.Prediction{Action: "configure", Reason: fmt.Sprintf("%d of %d objects exist", exist, exist+absent), Details: details}, nil
}

func namespaceExists(ctx context.Context, c *kube.Clients, name string) (bool, error) {
	_, err := c.Typed.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("namespace %s: %w", name, err)
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func kindString(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind + " (" + gvk.Version + ")"
	}
	return gvk.Kind + " (" + gvk.Group + "/" + gvk.Version + ")"
}

// Destroy deletes the step's objects, last manifest first, and waits
// until they are gone; objects already gone count as success. Namespace
// objects are never deleted (see the package documentation).
func (e *Executor) Destroy(ctx context.Context, req *step.Request) (step.Outcome, error) {
	out, err := e.destroy(ctx, req)
	out.Message = req.Redactor.String(out.Message)
	return out, req.Redactor.Error(err)
}

func (e *Executor) destroy(ctx context.Context, req *step.Request) (step.Outcome, error) {
	objs, err := Objects(ctx, req)
	if err != nil {
		return step.Outcome{}, err
	}
	a := req.Step.Apply
	sum, err := deletestep.DeleteObjects(ctx, req, objs, deletestep.ObjectsOptions{
		Namespace:      req.Namespace(a.Namespace),
		KeepNamespaces: true,
		IgnoreNotFound: true,
	})
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
	return step.Outcome{Message: sum.Message()}, nil
}
