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
)

// Drift of a deployed release: what of its objects the cluster no longer
// has as the release's manifest says, found by reading them (decision
// 190). A release deployed with the same chart, values and manifests is
// checked before Apply calls it unchanged; drift makes Apply upgrade it to
// a new revision that puts the objects back (a repair), as `helm upgrade`
// with the same chart and values would.
//
// What is drift, and what is not:
//
//   - an object of the manifest that does not exist is drift (missing);
//   - a field the manifest sets whose live value differs (objects.Fields)
//     is drift, unless the live value is another writer's by the object's
//     managed fields, written through a subresource (an
//     HorizontalPodAutoscaler's or kubectl scale's replicas, through
//     scale), and unless applying the manifest would leave it as it is:
//     each object with differing fields is confirmed with a server-side
//     dry-run apply of its manifest, so that defaulting, the normalisation
//     of quantities and mutating webhooks are not drift;
//   - fields the manifest does not set are never read: whatever others add
//     to an object is theirs.
//
// Hooks are not checked: they run around an install or upgrade and are
// often deleted when they are done.

// driftParallelism is how many objects of one release are read at once.
const driftParallelism = 8

// Drift is what the cluster no longer has as a release's manifest says.
type Drift struct {
	// Objects are the drifted objects, in the manifest's order.
	Objects []DriftedObject
	// Others are fields whose live value differs from the manifest but is
	// another writer's (a subresource's): not drift, kept by a repair.
	Others []OtherField
	// Unknown names the objects that could not be read (forbidden): their
	// drift is unknown.
	Unknown []string
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

// OtherField is a field the manifest sets whose live value another writer
// owns.
type OtherField struct {
	Ref  objects.Ref
	Path string
	// Owners are the managers of the live value, "manager (subresource)".
	Owners []string
	// Why says whose it is: "written through a subresource", "written by
	// another step of the spec".
	Why string
	// key is the object's (objectKey), value the live value, which a
	// repair keeps.
	key   string
	value any
	path  fieldpath.Path
}

// None reports whether nothing drifted.
func (d Drift) None() bool { return len(d.Objects) == 0 }

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

// Details are a plan's lines of the drift: one per drifted object, one
// per field left to another writer, one per object that could not be
// read.
func (d Drift) Details() []string {
	var out []string
	for _, o := range d.Objects {
		line := o.Ref.String() + ": "
		if o.Missing {
			line += "missing: will be re-created"
		} else {
			line += "differs: " + strings.Join(o.Fields, ", ") + ": will be put back"
		}
		if o.Unconfirmed != "" {
			line += " (not confirmed by a dry run: " + o.Unconfirmed + ")"
		}
		out = append(out, line)
	}
	for _, f := range d.Others {
		out = append(out, fmt.Sprintf("%s: %s is %s's (%s): not drift, left as it is", f.Ref, f.Path, strings.Join(f.Owners, ", "), f.Why))
	}
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
// chart and values (else the check cannot matter: nil), so that it reads
// the objects while the caller renders the chart with a dry-run upgrade:
// a no-op re-run costs the longer of the two, not both.
func (c *Client) driftAhead(ctx context.Context, r Release, ch *Chart, vals map[string]any, last *release.Release) *pendingDrift {
	if last.Chart == nil || last.Chart.Metadata == nil ||
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
// reading them in parallel within ctx.
func (c *Client) checkDrift(ctx context.Context, r Release, rel *release.Release) (Drift, error) {
	objs, err := c.decode(ctx, rel.Manifest, r.Namespace)
	if err != nil {
		return Drift{}, fmt.Errorf("the manifest of revision %d: %w", rel.Version, err)
	}
	found := make([]objectDrift, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(driftParallelism)
	for i, o := range objs {
		g.Go(func() error {
			d, err := c.objectDrift(gctx, o)
			if err != nil {
				return fmt.Errorf("%s: %w", objects.RefOf(o).KindName(), err)
			}
			found[i] = d
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Drift{}, fmt.Errorf("drift check: %w", err)
	}
	var d Drift
	for _, f := range found {
		switch {
		case f.unknown != "":
			d.Unknown = append(d.Unknown, f.unknown)
		case f.drifted != nil:
			d.Objects = append(d.Objects, *f.drifted)
		}
		d.Others = append(d.Others, f.others...)
	}
	return d, nil
}

// objectDrift is what the drift check found of one object.
type objectDrift struct {
	drifted *DriftedObject
	others  []OtherField
	unknown string
}

// objectDrift reads one object of the manifest and compares it.
func (c *Client) objectDrift(ctx context.Context, want *unstructured.Unstructured) (objectDrift, error) {
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
	intent, differ, others, err := classify(want, live, c.helmManager(), c.stepsManager())
	if err != nil {
		return objectDrift{}, err
	}
	out := objectDrift{others: others}
	if len(differ) == 0 {
		return out, nil
	}
	applied, err := dryRunApply(ctx, ri, want, c.helmManager())
	unconfirmed := ""
	if err != nil {
		unconfirmed = kube.Reason(err)
	}
	out.drifted = confirm(ref, intent, differ, applied, unconfirmed)
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

// classify compares the fields want (an object of a release's manifest)
// sets with live: differ are those whose live value differs, others those
// whose live value differs but is another writer's (not drift): written
// through a subresource by a manager other than helm's (manager), or
// written by spec, the field manager of the spec's other steps (a patch:
// step patching an object of the chart says what the spec wants there).
// intent is want as the API server stores it (a Secret's stringData
// compared as the data it becomes), as differ names its fields.
func classify(want, live *unstructured.Unstructured, manager, spec string) (intent *unstructured.Unstructured, differ []objects.Field, others []OtherField, err error) {
	if intent = objects.AsStored(want); intent == want {
		intent = want.DeepCopy() // the repair writes other writers' values into it
	}
	if contained(intent.Object, live.Object, true) {
		// every field the manifest sets holds its value: nothing differs
		// (the common case, decided without reading any schema)
		return intent, nil, nil, nil
	}
	fields, err := objects.Fields(intent, live)
	if err != nil {
		return nil, nil, nil, err
	}
	ref := objects.RefOf(want)
	for _, f := range fields {
		if f.Equal || sameField(f.Intent, true, f.Live, f.InLive) {
			continue // an empty map or list the server drops is no drift
		}
		other := OtherField{Ref: ref, Path: pathName(f.Path), key: objectKey(want), value: f.Live, path: f.Path}
		if o := f.ThroughSubresource(manager); len(o) > 0 {
			other.Owners, other.Why = ownerNames(o), "written through a subresource"
			others = append(others, other)
			continue
		}
		if spec != manager && f.OwnedBy(spec) {
			other.Owners, other.Why = []string{spec}, "written by another step of the spec"
			others = append(others, other)
			continue
		}
		differ = append(differ, f)
	}
	return intent, differ, others, nil
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
			if v, ok := objects.LookupPath(applied.Object, f.Path); sameField(v, ok, f.Live, f.InLive) {
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
			setPath(d.Live.Object, f.Path, f.Live, f.InLive)
			d.Fields = append(d.Fields, pathName(f.Path))
		}
	}
	for _, e := range entries {
		setPath(d.Live.Object, e, nil, false)
		d.Fields = append(d.Fields, pathName(e))
	}
	slices.Sort(d.Fields)
	return d
}

// hasPrefix reports whether p starts with prefix.
func hasPrefix(p, prefix fieldpath.Path) bool {
	return len(p) >= len(prefix) && p[:len(prefix)].Equals(prefix)
}

// ownerNames are owners as "manager (subresource)".
func ownerNames(owners []objects.Owner) []string {
	out := make([]string, len(owners))
	for i, o := range owners {
		out[i] = o.Manager
		if o.Subresource != "" {
			out[i] += " (" + o.Subresource + ")"
		}
	}
	return out
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
