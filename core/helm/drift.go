package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	release "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"khook.io/core/kube"
	"khook.io/core/objects"
	"khook.io/core/spec"
)

// Drift of a deployed release: what of its objects the cluster no longer
// has as the release's manifest says, found by reading them (decision
// 190). A release deployed with the same chart, values and manifests is
// checked before Apply calls it unchanged; drift makes Apply upgrade it to
// a new revision that puts the objects back (a repair), as `helm upgrade`
// with the same chart and values would, unless the step's drift policy
// says warn (reported, left) or off (not looked for).
//
// What is drift, and what is not (decisions 250-253):
//
//   - an object of the manifest that does not exist is drift (missing);
//   - a field the manifest sets whose live value differs (objects.Fields)
//     is drift, unless applying the manifest would leave it as it is:
//     each object with differing fields is confirmed with a server-side
//     dry-run apply of the object as helm applies it (its ownership
//     labels and annotations included), so that defaulting, the
//     normalisation of quantities and mutating webhooks are not drift;
//   - a field the manifest leaves null or empty where the server drops it
//     (annotations: with no value) is not set (objects.AsStored);
//   - a field whose live value another writer wrote since helm did, by
//     the object's managed fields, is that writer's when it is a
//     controller (objects.Policy.Judge): kept, never repaired; so is a
//     field written by another step of the spec (khook's field manager),
//     and one an ignore rule of the policy names;
//   - fields the manifest does not set are never read: whatever others add
//     to an object is theirs.
//
// Hooks are not checked: they run around an install or upgrade and are
// often deleted when they are done. Nor are the chart's crds/: helm
// installs them only when absent and never upgrades them (decision 254).

// driftParallelism is how many objects of one release are read at once.
const driftParallelism = 8

// Drift is what the cluster no longer has as a release's manifest says.
type Drift struct {
	// Mode is the policy's (spec.DriftWarn: Objects are reported, not
	// repaired).
	Mode string
	// Objects are the drifted objects, in the manifest's order.
	Objects []DriftedObject
	// Kept are fields whose live value differs from the manifest but is
	// another writer's: not drift, left out of a repair.
	Kept []objects.Kept
	// Ignored are fields whose live value differs from the manifest that
	// an ignore rule of the policy leaves out.
	Ignored []objects.Kept
	// Unknown names the objects that could not be read (forbidden): their
	// drift is unknown.
	Unknown []string
	// read are the objects read, by objectKey: what a repair must leave
	// of them is decided from them (leave).
	read   map[string]readObject
	policy objects.Policy
	mine   []string
	spec   string
}

// readObject is one object of the manifest as the drift check read it.
type readObject struct {
	intent, live *unstructured.Unstructured
}

// DriftedObject is one object of the manifest the cluster has otherwise.
type DriftedObject struct {
	Ref objects.Ref
	// Missing: the object does not exist.
	Missing bool
	// Fields are the paths of the fields whose live value differs
	// (data.b, spec.template.spec.containers[name="web"].image), a
	// missing list entry as the entry.
	Fields []string
	// Manifest is the object as the release's manifest has it; Live is
	// the same object with each drifted field at its live value (nil when
	// Missing): what diff shows against the manifest.
	Manifest, Live *unstructured.Unstructured
	// Unconfirmed says why the dry run that would confirm the fields
	// failed; they are taken as drift.
	Unconfirmed string
}

// None reports whether nothing drifted.
func (d Drift) None() bool { return len(d.Objects) == 0 }

// Repairs reports whether a repair puts what drifted back: something
// drifted, and the policy does not say warn.
func (d Drift) Repairs() bool { return !d.None() && d.Mode != spec.DriftWarn }

// Left reports whether something drifted that the policy leaves (warn).
func (d Drift) Left() bool { return !d.None() && d.Mode == spec.DriftWarn }

// Summary names each drifted object and what differs:
// "ConfigMap/c2-cm re-created, ConfigMap/c2-cm2 data.b", with missing the
// word for a missing object ("missing", "re-created").
func (d Drift) Summary(missing string) string {
	parts := make([]string, len(d.Objects))
	for i, o := range d.Objects {
		parts[i] = o.Ref.KindName() + " " + o.what(missing)
	}
	return strings.Join(parts, ", ")
}

func (o DriftedObject) what(missing string) string {
	if o.Missing {
		return missing
	}
	return strings.Join(o.Fields, ", ")
}

// KeptLines are the fields left to another writer, or ignored, one line
// each: "kept: ConfigMap/inj-ca data.ca (written by cainjector)".
func (d Drift) KeptLines() []string {
	var out []string
	for _, f := range d.Kept {
		out = append(out, "kept: "+f.String())
	}
	for _, f := range d.Ignored {
		out = append(out, "ignored: "+f.String())
	}
	return out
}

// LeftLines are, when the policy leaves drift (warn), the drifted objects
// one line each: "drift: ConfigMap/c data.b (left as it is: drift mode
// warn)"; none otherwise.
func (d Drift) LeftLines() []string {
	if !d.Left() {
		return nil
	}
	out := make([]string, len(d.Objects))
	for i, o := range d.Objects {
		out[i] = "drift: " + o.Ref.KindName() + " " + o.what("missing") + " (left as it is: drift mode warn)"
	}
	return out
}

// Details are a plan's lines of the drift: one per drifted object, one
// per field left to another writer or ignored, one per object that could
// not be read.
func (d Drift) Details() []string {
	var out []string
	for _, o := range d.Objects {
		line := o.Ref.String() + ": "
		switch {
		case o.Missing && d.Left():
			line += "missing: left missing (drift mode warn)"
		case o.Missing:
			line += "missing: will be re-created"
		case d.Left():
			line += "differs: " + strings.Join(o.Fields, ", ") + ": left as it is (drift mode warn)"
		default:
			line += "differs: " + strings.Join(o.Fields, ", ") + ": will be put back"
		}
		if o.Unconfirmed != "" {
			line += " (not confirmed by a dry run: " + o.Unconfirmed + ")"
		}
		out = append(out, line)
	}
	out = append(out, d.KeptLines()...)
	for _, u := range d.Unknown {
		out = append(out, u+": drift unknown (may not be read)")
	}
	return out
}

// pendingDrift is a drift check running while the chart is rendered.
type pendingDrift struct {
	done   chan struct{}
	d      Drift
	err    error
	cancel context.CancelFunc
}

// driftAhead starts the drift check of last when ch and vals are its
// chart and values (else the check cannot matter: nil) and the policy
// looks for drift (not off: nil), so that it reads
// the objects while the caller renders the chart with a dry-run upgrade:
// a no-op re-run costs the longer of the two, not both.
func (c *Client) driftAhead(ctx context.Context, r Release, ch *Chart, vals map[string]any, last *release.Release) *pendingDrift {
	if r.Drift.Mode == spec.DriftOff || last.Chart == nil || last.Chart.Metadata == nil ||
		last.Chart.Metadata.Name != ch.Name || last.Chart.Metadata.Version != ch.Version ||
		!sameValues(last.Config, vals) {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &pendingDrift{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		p.d, p.err = c.checkDrift(ctx, r, last)
	}()
	return p
}

// wait returns the check's result (none for nil).
func (p *pendingDrift) wait() (Drift, error) {
	if p == nil {
		return Drift{}, nil
	}
	<-p.done
	return p.d, p.err
}

// stop ends the check, if it still runs, and waits for it.
func (p *pendingDrift) stop() {
	if p != nil {
		p.cancel()
		<-p.done
	}
}

// checkDrift compares the objects of rel's manifest with the cluster,
// reading them in parallel within ctx, as r's drift policy says.
func (c *Client) checkDrift(ctx context.Context, r Release, rel *release.Release) (Drift, error) {
	objs, err := c.decode(ctx, rel.Manifest, r.Namespace)
	if err != nil {
		return Drift{}, fmt.Errorf("the manifest of revision %d: %w", rel.Version, err)
	}
	d := Drift{Mode: r.Drift.Mode, policy: r.Drift, mine: []string{c.helmManager()}, spec: c.stepsManager(), read: map[string]readObject{}}
	found := make([]objectDrift, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(driftParallelism)
	for i, o := range objs {
		g.Go(func() error {
			od, err := c.objectDrift(gctx, r, d, o)
			if err != nil {
				return fmt.Errorf("%s: %w", objects.RefOf(o).KindName(), err)
			}
			found[i] = od
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Drift{}, fmt.Errorf("drift check: %w", err)
	}
	for i, f := range found {
		switch {
		case f.unknown != "":
			d.Unknown = append(d.Unknown, f.unknown)
		case f.drifted != nil:
			d.Objects = append(d.Objects, *f.drifted)
		}
		d.Kept = append(d.Kept, f.kept...)
		d.Ignored = append(d.Ignored, f.ignored...)
		if f.live != nil {
			d.read[objectKey(objs[i])] = readObject{intent: f.intent, live: f.live}
		}
	}
	return d, nil
}

// objectDrift is what the drift check found of one object.
type objectDrift struct {
	drifted       *DriftedObject
	kept, ignored []objects.Kept
	unknown       string
	// intent and live are the object as its manifest sets it (as stored)
	// and as read; nil when it was not read.
	intent, live *unstructured.Unstructured
}

// objectDrift reads one object of the manifest and compares it, with the
// policy and managers of d.
func (c *Client) objectDrift(ctx context.Context, r Release, d Drift, want *unstructured.Unstructured) (objectDrift, error) {
	ref := objects.RefOf(want)
	mapping, err := c.env.Kube.MappingFor(ctx, want.GroupVersionKind())
	if meta.IsNoMatchError(err) {
		// its kind is gone (a CRD deleted): so is the object
		return objectDrift{drifted: &DriftedObject{Ref: ref, Missing: true, Manifest: want}}, nil
	}
	if err != nil {
		return objectDrift{}, err
	}
	ri := c.env.Kube.Resource(mapping, want.GetNamespace())
	live, err := ri.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return objectDrift{drifted: &DriftedObject{Ref: ref, Missing: true, Manifest: want}}, nil
	case apierrors.IsForbidden(err):
		return objectDrift{unknown: ref.String()}, nil
	case err != nil:
		return objectDrift{}, err
	}
	cl, err := classify(want, live, d.policy, d.spec, d.mine...)
	if err != nil {
		return objectDrift{}, err
	}
	out := objectDrift{kept: cl.kept, ignored: cl.ignored, intent: cl.intent, live: live}
	if len(cl.differ) == 0 {
		return out, nil
	}
	applied, err := dryRunApply(ctx, ri, asHelmApplies(want, r), c.helmManager())
	unconfirmed := ""
	if err != nil {
		unconfirmed = kube.Reason(err)
	}
	out.drifted = confirm(ref, cl.intent, cl.differ, applied, unconfirmed)
	return out, nil
}

// helmManager is the field manager helm's writes use.
func (c *Client) helmManager() string { return c.env.fieldManager() }

// stepsManager is the field manager of the spec's other steps.
func (c *Client) stepsManager() string {
	if c.env.StepsFieldManager != "" {
		return c.env.StepsFieldManager
	}
	return objects.DefaultFieldManager
}

// classified is how classify sorted the fields of one object.
type classified struct {
	// intent is want as the API server stores it (nulls dropped, a
	// Secret's stringData compared as the data it becomes), as differ
	// names its fields.
	intent *unstructured.Unstructured
	// differ are the fields whose live value differs and is drift.
	differ []objects.Field
	// kept and ignored differ too, but are another writer's or ignored.
	kept, ignored []objects.Kept
}

// classify compares the fields want (an object of a release's manifest)
// sets with live, under policy: mine are the managers of the release's
// own writes (helm's), spec the field manager of the spec's other steps
// (a patch: step patching an object of the chart says what the spec wants
// there, so its fields are kept).
func classify(want, live *unstructured.Unstructured, policy objects.Policy, spec string, mine ...string) (classified, error) {
	out := classified{intent: objects.AsStored(want)}
	if out.intent == want {
		out.intent = want.DeepCopy() // diff writes live values into it
	}
	if objects.Contained(out.intent.Object, live.Object, true) {
		// every field the manifest sets holds its value: nothing differs
		// (the common case, decided without reading any schema)
		return out, nil
	}
	fields, err := objects.Fields(out.intent, live)
	if err != nil {
		return classified{}, err
	}
	ref := objects.RefOf(want)
	for _, f := range fields {
		if f.Equal || objects.SameField(f.Intent, true, f.Live, f.InLive) {
			continue // an empty map or list the server drops is no drift
		}
		name := pathName(f.Path)
		switch v := policy.Judge(f, mine...); {
		case policy.Ignored(out.intent, f.Path):
			out.ignored = append(out.ignored, objects.Kept{Ref: ref, Path: name, Why: "drift.ignore"})
		case spec != "" && !slices.Contains(mine, spec) && f.OwnedBy(spec):
			out.kept = append(out.kept, objects.Kept{Ref: ref, Path: name, Why: "written by " + spec + ", another step of the spec"})
		case v.Keep:
			out.kept = append(out.kept, objects.Kept{Ref: ref, Path: name, Why: v.Why})
		default:
			out.differ = append(out.differ, f)
		}
	}
	return out, nil
}

// leave is what a repair of the object key (objectKey) leaves out of its
// write, and the object as the manifest the check read has it (as
// stored): the fields the manifest sets whose live value, when the drift
// check read it, was another writer's and not put back (kept, ignored,
// or the manifest's value written by someone else since helm), so that a
// write of theirs between the check and the repair stands, and the
// repair writes only what it repairs and what helm still owns. Nil for
// an object the check did not read (missing: re-created whole). Key
// fields of list entries are never left out (the entry is helm's).
func (d Drift) leave(key string) ([]fieldpath.Path, *unstructured.Unstructured, error) {
	ro, ok := d.read[key]
	if !ok {
		return nil, nil, nil
	}
	fields, err := objects.Fields(ro.intent, ro.live)
	if err != nil {
		return nil, nil, err
	}
	var out []fieldpath.Path
	for _, f := range fields {
		if f.KeyField() {
			continue
		}
		v := d.policy.Judge(f, d.mine...)
		if len(v.By) == 0 {
			continue // helm's own, or nobody's: written (left out, helm's would be removed)
		}
		differs := !f.Equal && !objects.SameField(f.Intent, true, f.Live, f.InLive)
		kept := v.Keep || d.policy.Ignored(ro.intent, f.Path) || (d.spec != "" && f.OwnedBy(d.spec))
		if differs && !kept && d.Mode != spec.DriftWarn {
			continue // drift: repaired (warn leaves it as it is)
		}
		out = append(out, f.Path)
	}
	return out, ro.intent, nil
}

// asHelmApplies is want as helm applies it (setMetadataVisitor): its
// labels with app.kubernetes.io/managed-by: Helm, its annotations with
// the release's name and namespace, so that a dry run of it as helm's
// field manager keeps what helm's own apply keeps.
func asHelmApplies(want *unstructured.Unstructured, r Release) *unstructured.Unstructured {
	out := want.DeepCopy()
	l := out.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l["app.kubernetes.io/managed-by"] = "Helm"
	out.SetLabels(l)
	a := out.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a["meta.helm.sh/release-name"], a["meta.helm.sh/release-namespace"] = r.Name, r.Namespace
	out.SetAnnotations(a)
	return out
}

// confirm keeps of differ the fields applied (the object as a server-side
// dry-run apply of the manifest returns it; nil when it failed, and
// unconfirmed says why) would change: a field the dry run leaves at its
// live value is defaulted, normalised or a webhook's, not drift. nil when
// none is left. A missing list entry is named once, as the entry.
func confirm(ref objects.Ref, intent *unstructured.Unstructured, differ []objects.Field, applied *unstructured.Unstructured, unconfirmed string) *DriftedObject {
	d := &DriftedObject{Ref: ref, Manifest: intent, Unconfirmed: unconfirmed}
	var kept []objects.Field
	var entries []fieldpath.Path // list entries the live object lacks
	for _, f := range differ {
		if applied != nil {
			if v, ok := objects.LookupPath(applied.Object, f.Path); objects.SameField(v, ok, f.Live, f.InLive) {
				continue // applying the manifest leaves it so
			}
		}
		kept = append(kept, f)
		if !f.InLive && f.KeyField() {
			entries = append(entries, f.Path[:len(f.Path)-1])
		}
	}
	if len(kept) == 0 {
		return nil
	}
	d.Live = intent.DeepCopy()
	for _, f := range kept {
		if !slices.ContainsFunc(entries, func(e fieldpath.Path) bool { return hasPrefix(f.Path, e) }) {
			objects.SetPath(d.Live.Object, f.Path, f.Live, f.InLive)
			d.Fields = append(d.Fields, pathName(f.Path))
		}
	}
	for _, e := range entries {
		objects.SetPath(d.Live.Object, e, nil, false)
		d.Fields = append(d.Fields, pathName(e))
	}
	slices.Sort(d.Fields)
	return d
}

// hasPrefix reports whether p starts with prefix.
func hasPrefix(p, prefix fieldpath.Path) bool {
	return len(p) >= len(prefix) && p[:len(prefix)].Equals(prefix)
}

// dryRunApply is a server-side dry-run apply of want, forcing conflicts:
// the object as applying the manifest would leave it, admission (defaults,
// mutating webhooks) included. It changes nothing.
func dryRunApply(ctx context.Context, ri interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, options metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error)
}, want *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(want.Object)
	if err != nil {
		return nil, err
	}
	force := true
	return ri.Patch(ctx, want.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager: manager,
		Force:        &force,
		DryRun:       []string{metav1.DryRunAll},
	})
}

// readOwners reads last's objects, for an upgrade to another chart,
// values or manifests (not a repair): the check ahead when one runs,
// else a check of its own. Best effort: a check that fails is logged and
// the upgrade writes every field, as helm's does.
func (c *Client) readOwners(ctx context.Context, r Release, last *release.Release, ahead *pendingDrift) *Drift {
	var d Drift
	var err error
	if ahead != nil {
		d, err = ahead.wait()
	} else {
		d, err = c.checkDrift(ctx, r, last)
	}
	if err != nil {
		c.env.logf("release %s in %s: the objects of %s could not be read (%v): the upgrade writes every field of its manifest", r.Name, r.Namespace, statusOf(last), err)
		return nil
	}
	return &d
}
