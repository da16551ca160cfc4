package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubectlutil "k8s.io/kubectl/pkg/util"

	"khook.io/core/diff"
	"khook.io/core/kube"
	"khook.io/core/manifest"
	"khook.io/core/objects"
	"khook.io/core/spec"
	"khook.io/core/step"
)

// Plan and Diff make one walk over the step's objects (preview) and
// render it two ways: a prediction with a line per object, or each
// object's live and merged versions.

// verdict is what a preview found of one object, before reading it.
type verdict int

const (
	// ready: its kind is served and its namespace exists (or may not be
	// read): it can be read and dry-run.
	ready verdict = iota
	// unnamed: it uses generateName (a plan does not resolve it).
	unnamed
	// crdHere: its kind is served only once this step's CRD is applied.
	crdHere
	// nsHere: its namespace is created by this step first.
	nsHere
	// unavailable: its kind or namespace only an earlier step can create;
	// reason says which.
	unavailable
)

// previewed is one object of a preview.
type previewed struct {
	obj     *unstructured.Unstructured // as written
	verdict verdict
	res     objects.Resolved           // ready and nsHere
	crd     *unstructured.Unstructured // crdHere: the CRD manifest
	reason  string                     // unavailable
}

// preview is a walk over a step's objects, reading only.
type preview struct {
	m    *objects.Manager
	objs []previewed
	// createNamespace is set when createNamespace's namespace is missing.
	createNamespace bool
}

// walk resolves each object and checks its namespace, changing nothing.
// A namespace the user may not read is taken to exist (the object's own
// read, or dry run, then says), as apply takes it. With resolveUnnamed,
// objects named by generateName are resolved too.
func walk(ctx context.Context, req *step.Request, objs []*unstructured.Unstructured, ns string, resolveUnnamed bool) (*preview, error) {
	a := spec.BlockOf[Apply](req.Step)
	pv := &preview{m: req.Objects()}
	// what this step itself creates before later objects need it
	crds := map[schema.GroupKind]*unstructured.Unstructured{}
	nsCreated := map[string]bool{}
	for _, o := range objs {
		switch gvk := o.GroupVersionKind(); {
		case manifest.IsCRD(gvk):
			crds[objects.CRDGroupKind(o)] = o
		case manifest.IsNamespace(gvk):
			nsCreated[o.GetName()] = true
		}
	}
	nsExists := map[string]bool{}
	if a.CreateNamespace && a.Namespace != "" {
		ok, err := pv.namespaceExists(ctx, nsExists, a.Namespace)
		if err != nil {
			return nil, err
		}
		pv.createNamespace, nsCreated[a.Namespace] = !ok, true
	}
	for _, o := range objs {
		p, err := pv.object(ctx, o, ns, crds, nsCreated, nsExists, resolveUnnamed)
		if err != nil {
			return nil, err
		}
		pv.objs = append(pv.objs, p)
	}
	return pv, nil
}

func (pv *preview) object(ctx context.Context, o *unstructured.Unstructured, ns string,
	crds map[schema.GroupKind]*unstructured.Unstructured, nsCreated, nsExists map[string]bool, resolveUnnamed bool,
) (previewed, error) {
	p := previewed{obj: o}
	if o.GetName() == "" && !resolveUnnamed {
		p.verdict = unnamed
		return p, nil
	}
	gvk := o.GroupVersionKind()
	r, err := pv.m.Resolve(ctx, o, ns)
	switch {
	case meta.IsNoMatchError(err) && crds[gvk.GroupKind()] != nil:
		p.verdict, p.crd = crdHere, crds[gvk.GroupKind()]
		return p, nil
	case meta.IsNoMatchError(err):
		p.verdict = unavailable
		p.reason = fmt.Sprintf("the cluster does not serve %s: its CustomResourceDefinition does not exist yet (an earlier step may create it)", kindString(gvk))
		return p, nil
	case err != nil:
		return p, fmt.Errorf("%s: %w", objects.RefOf(o).KindName(), err)
	}
	p.res = r
	if !r.Namespaced() {
		return p, nil
	}
	present, err := pv.namespaceExists(ctx, nsExists, r.Object.GetNamespace())
	switch {
	case err != nil:
		return p, err
	case !present && nsCreated[r.Object.GetNamespace()]:
		p.verdict = nsHere
	case !present:
		p.verdict = unavailable
		p.reason = fmt.Sprintf("namespace %s does not exist (an earlier step may create it)", r.Object.GetNamespace())
	}
	return p, nil
}

// namespaceExists asks once per namespace; a user who may not read
// namespaces may still use this one: it is taken to exist.
func (pv *preview) namespaceExists(ctx context.Context, seen map[string]bool, name string) (bool, error) {
	if ok, done := seen[name]; done {
		return ok, nil
	}
	ok, err := pv.m.NamespaceExists(ctx, name)
	switch {
	case apierrors.IsForbidden(err):
		ok = true
	case err != nil:
		return false, err
	}
	seen[name] = ok
	return ok, nil
}

// Plan predicts, object by object, what Run would do: create (the object
// does not exist), configure (a server-side dry run of the very request
// Run sends, as diff makes it, changes fields of it: they are named),
// unchanged (the dry run changes nothing), or unknown (a kind or
// namespace is missing that this step does not create: an earlier step
// may; the user may not read the object; or the dry run fails, as the
// apply would). An object the user may read but not write (no dry run)
// is configure, saying so. The step's action is create when every object is to be
// created, unchanged when none changes, configure otherwise; skip when
// skipIf: exists holds. It only reads and dry-runs, and decides from what
// the user may read: a namespace it may not read is taken to exist (the
// object's own read then says whether it does), as apply and diff take
// it. So plan, diff and apply agree object by object (decision 16).
func (e *Executor) Plan(ctx context.Context, req *step.Request) (result step.Prediction, err error) {
	objs, ns, err := load(ctx, req)
	if err != nil {
		return step.Prediction{}, err
	}
	pv, err := walk(ctx, req, objs, ns, false)
	if err != nil {
		return step.Prediction{}, err
	}
	a := spec.BlockOf[Apply](req.Step)
	opts, err := applyOptions(req)
	if err != nil {
		return step.Prediction{}, err
	}
	opts.DryRun = true
	c := planCounts{ns: ns, opts: opts}
	if pv.createNamespace {
		c.details = append(c.details, "Namespace/"+a.Namespace+": create (createNamespace)")
	}
	for _, p := range pv.objs {
		if err := c.add(ctx, req, pv.m, p); err != nil {
			return step.Prediction{}, err
		}
	}
	exist := c.changed + c.unchanged
	details := append(append(c.details, c.left...), c.kept...)
	pred := func(action step.Action, reason string) (step.Prediction, error) {
		return step.Prediction{Action: action, Reason: reason, Details: details, Kept: c.kept, Drift: c.left}, nil
	}
	switch {
	case c.unknown > 0:
		return pred(step.ActionUnknown, strings.Join(c.reasons, "; "))
	case a.SkipIf == SkipIfExists && c.absent == 0:
		return step.Prediction{Action: step.ActionSkip, Reason: allExist(exist), Details: c.details}, nil
	case exist == 0:
		return pred(step.ActionCreate, "")
	case c.absent == 0 && c.changed == 0 && !pv.createNamespace:
		return pred(step.ActionUnchanged, unchangedReason(exist))
	}
	return pred(step.ActionConfigure, c.reason())
}

// unchangedReason says that a dry run of each of n objects changes
// nothing.
func unchangedReason(n int) string {
	if n == 1 {
		return "a dry run of the object changes nothing"
	}
	return fmt.Sprintf("a dry run of each of the %d objects changes nothing", n)
}

// planCounts is a plan's rendering of a preview.
type planCounts struct {
	ns   string
	opts objects.ApplyOptions // dry run
	// details are a line per object; left and kept the lines of the
	// fields the apply would leave (driftLines).
	details, left, kept []string
	reasons             []string
	// absent: to create; changed: exist, and the dry run changes them;
	// unchanged: exist, and it does not.
	absent, changed, unchanged, unknown int
}

// reason counts what a configure does: "1 to create, 2 to configure, 3
// unchanged".
func (c *planCounts) reason() string {
	var parts []string
	if c.absent > 0 {
		parts = append(parts, fmt.Sprintf("%d to create", c.absent))
	}
	if c.changed > 0 {
		parts = append(parts, fmt.Sprintf("%d to configure", c.changed))
	}
	if c.unchanged > 0 {
		parts = append(parts, fmt.Sprintf("%d unchanged", c.unchanged))
	}
	return strings.Join(parts, ", ")
}

func (c *planCounts) unknownBecause(where, detail, reason string) {
	c.details = append(c.details, where+": unknown ("+detail+")")
	if !slices.Contains(c.reasons, reason) {
		c.reasons = append(c.reasons, reason)
	}
	c.unknown++
}

func (c *planCounts) add(ctx context.Context, req *step.Request, m *objects.Manager, p previewed) error {
	if c.addUnread(p) {
		return nil
	}
	where := p.res.Ref().String()
	live, err := m.Get(ctx, p.res)
	if err == nil {
		// what khook wrote there from a secret is masked from now on,
		// also as it was before the secret was rotated
		diff.Learn(req.Redactor, p.res.Object.Object, live.Object)
	}
	switch {
	case apierrors.IsNotFound(err):
		c.details = append(c.details, where+": create")
		c.absent++
		return nil
	case apierrors.IsForbidden(err):
		// what the user may not read cannot be predicted; the other
		// objects still are
		r := "may not read " + p.res.Mapping.Resource.Resource
		if ns := p.res.Object.GetNamespace(); ns != "" {
			r += " in " + ns
		}
		c.unknownBecause(where, kube.Reason(err), r)
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", where, err)
	}
	return c.addDryRun(ctx, req, m, p, where)
}

// addUnread counts p when its verdict alone says what the apply does (no
// read of the cluster): true when it did.
func (c *planCounts) addUnread(p previewed) bool {
	ref := objects.RefOf(p.obj).KindName()
	switch p.verdict {
	case unnamed:
		c.details = append(c.details, ref+": create (generateName)")
		c.absent++
	case crdHere:
		c.details = append(c.details, ref+": create (its CRD is applied first by this step)")
		c.absent++
	case unavailable:
		where := ref
		if p.res.Object != nil {
			where = p.res.Ref().String()
		}
		c.unknownBecause(where, p.reason, p.reason)
	case nsHere:
		c.details = append(c.details, p.res.Ref().String()+": create")
		c.absent++
	default:
		return false
	}
	return true
}

// addDryRun counts p, which exists at where, by the dry run of the very
// request the apply sends.
func (c *planCounts) addDryRun(ctx context.Context, req *step.Request, m *objects.Manager, p previewed, where string) error {
	res, err := m.Apply(ctx, p.obj, c.ns, c.opts)
	switch {
	case err != nil && ctx.Err() != nil:
		return err
	case apierrors.IsForbidden(err):
		// a user who may read but not write: whether it changes is not
		// known; the apply (by someone who may) configures it
		c.details = append(c.details, where+": configure (exists; may not dry-run it: "+kube.Reason(err)+")")
		c.changed++
		return nil
	case err != nil:
		c.unknownBecause(where, "dry run: "+kube.Reason(err), "a dry run of "+where+" fails: the apply would fail there")
		return nil
	}
	left, kept := driftLines(res)
	c.left, c.kept = append(c.left, left...), append(c.kept, kept...)
	pair, err := diff.Prepare(res.Live, res.Object, req.Redactor)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if !pair.Changed() {
		c.details = append(c.details, where+": unchanged")
		c.unchanged++
		return nil
	}
	fields := diff.ChangedFields(res.Live, res.Object)
	if len(fields) == 0 {
		fields = []string{"metadata"}
	}
	c.details = append(c.details, where+": configure: "+strings.Join(fields, ", "))
	c.changed++
	return nil
}

// Diff is what Run would change, object by object, changing nothing: each
// object is sent exactly as Run sends it (client-side or server-side
// apply, the same field manager, strict field validation) with
// dryRun=All, and the server's answer is the merged object, next to the
// live one. With createNamespace, a missing namespace is a dry-run create
// too.
//
// An object whose namespace or CustomResourceDefinition this step creates
// first cannot be dry-run (a dry-run create persists nothing): its merged
// version is the manifest as apply would send it, with a note. One whose
// kind or namespace only an earlier step can create is unavailable, with
// the reason; the other objects are still diffed. A dry run the server
// refuses (an invalid object, a server-side apply conflict) is the
// error: apply would fail there.
func (e *Executor) Diff(ctx context.Context, req *step.Request) (result step.Diff, err error) {
	objs, ns, err := load(ctx, req)
	if err != nil {
		return step.Diff{}, err
	}
	a := spec.BlockOf[Apply](req.Step)
	if a.SkipIf == SkipIfExists {
		_, all, err := existing(ctx, req.Objects(), objs, ns)
		if err != nil {
			return step.Diff{}, err
		}
		if all {
			return step.Diff{Skip: allExist(len(objs))}, nil
		}
	}
	pv, err := walk(ctx, req, objs, ns, true)
	if err != nil {
		return step.Diff{}, err
	}
	opts, err := applyOptions(req)
	if err != nil {
		return step.Diff{}, err
	}
	opts.DryRun = true
	var d step.Diff
	if pv.createNamespace {
		nsObj, err := pv.m.DryRunNamespace(ctx, a.Namespace)
		if err != nil {
			return step.Diff{}, err
		}
		d.Objects = append(d.Objects, step.ObjectDiff{Name: objects.RefOf(nsObj).Path(), Merged: nsObj})
	}
	for _, p := range pv.objs {
		od, res, err := diffObject(ctx, pv.m, p, ns, opts)
		if err != nil {
			return step.Diff{}, err
		}
		d.Objects = append(d.Objects, od)
		left, kept := driftLines(res)
		d.Drift, d.Kept = append(d.Drift, left...), append(d.Kept, kept...)
	}
	d.Notes = append(append(d.Notes, d.Drift...), d.Kept...)
	return d, nil
}

// diffObject is a diff's rendering of one previewed object, and the
// dry run's change when one was made.
func diffObject(ctx context.Context, m *objects.Manager, p previewed, ns string, opts objects.ApplyOptions) (step.ObjectDiff, objects.Change, error) {
	switch p.verdict {
	case crdHere:
		o := p.obj.DeepCopy()
		manifest.SetNamespace(o, objects.CRDNamespaced(p.crd), ns)
		od, err := asSent(o, opts.ServerSide, "not a server dry run: its CustomResourceDefinition is created by this step first")
		return od, objects.Change{}, err
	case nsHere:
		od, err := asSent(p.res.Object, opts.ServerSide, "not a server dry run: its namespace is created by this step first")
		return od, objects.Change{}, err
	case unavailable:
		o := p.obj
		if p.res.Object != nil {
			o = p.res.Object
		}
		return step.ObjectDiff{Name: objects.RefOf(o).Path(), Unavailable: p.reason}, objects.Change{}, nil
	}
	res, err := m.Apply(ctx, p.obj, ns, opts)
	if err != nil {
		return step.ObjectDiff{}, res, fmt.Errorf("%s: dry run: %w", objects.RefOf(p.res.Object).KindName(), err)
	}
	return step.ObjectDiff{Name: objects.RefOf(res.Object).Path(), Live: res.Live, Merged: res.Object}, res, nil
}

// asSent is an object that cannot be dry-run, as apply would create it:
// with the last-applied-configuration annotation of client-side apply.
func asSent(o *unstructured.Unstructured, serverSide bool, note string) (step.ObjectDiff, error) {
	if !serverSide {
		if err := kubectlutil.CreateApplyAnnotation(o, unstructured.UnstructuredJSONScheme); err != nil {
			return step.ObjectDiff{}, fmt.Errorf("%s: record the last-applied configuration: %w", objects.RefOf(o).KindName(), err)
		}
	}
	return step.ObjectDiff{Name: objects.RefOf(o).Path(), Merged: o, Note: note}, nil
}

func kindString(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind + " (" + gvk.Version + ")"
	}
	return gvk.Kind + " (" + gvk.Group + "/" + gvk.Version + ")"
}

var _ step.Differ = (*Executor)(nil)
