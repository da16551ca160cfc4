package helm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/internal/english"
	"khook.io/core/kube"
	"khook.io/core/manifest"
	"khook.io/core/manifest/kubeyaml"
	"khook.io/core/spec"
)

// ManifestObject is one object of a release, in the manifest of its latest
// revision (Current) and in the chart rendered for Apply (Rendered); nil on
// the side it is absent from. A namespaced object written without a
// namespace has the release's namespace filled in on both sides.
type ManifestObject struct {
	// Hook marks a Helm hook (run around the install or upgrade rather
	// than kept in the manifest).
	Hook              bool
	Current, Rendered *unstructured.Unstructured
}

// Name is "Kind namespace/name", or "Kind name" for an object without a
// namespace; " (hook)" follows a hook's.
func (o ManifestObject) Name() string {
	u := o.Rendered
	if u == nil {
		u = o.Current
	}
	name := u.GetKind() + " " + u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		name = u.GetKind() + " " + ns + "/" + u.GetName()
	}
	if o.Hook {
		name += " (hook)"
	}
	return name
}

// ReleaseDiff is what Apply would change in a release, object by object.
type ReleaseDiff struct {
	// Action is PlanInstall, PlanUpgrade, PlanNoOp or PlanSkip, or
	// PlanUnknown when no diff can be made (a release left pending by an
	// interrupted run, which Apply recovers first, or one another
	// operation may still be working on); Reason says why for skip and
	// unknown.
	Action PlanAction
	Reason string
	// Current is the release's latest revision, nil when none.
	Current *Status
	// Target names the chart Apply would install.
	Target string
	// Objects are the rendered objects in Helm's install order, then the
	// objects an upgrade would delete, then the hooks.
	Objects []ManifestObject
	// Notes say what else would change (the chart version or the values
	// of a revision whose objects stay the same) or what the diff cannot
	// show.
	Notes []string
	// Kept and Drift are Plan's: fields left to other writers or ignored,
	// and objects that drifted and are left as they are (warn).
	Kept, Drift []string
}

// Diff says what Apply(ctx, r) would change, changing nothing: the
// manifests (and hooks) of the release's latest revision against the
// chart rendered with r's values by a server-side dry-run upgrade, or
// dry-run install when there is no release. A chart whose objects the
// server cannot map yet (custom resources of CRDs the chart itself
// installs) is rendered without the server, with a note saying so. A
// chart or values that cannot be fetched, or a dry run that fails, is an
// error.
func (c *Client) Diff(ctx context.Context, r Release) (ReleaseDiff, error) {
	d, err := c.diff(ctx, r)
	if err != nil {
		err = fmt.Errorf("release %s (%s): %w", r.Name, r.Namespace, err)
	}
	d.Reason = c.env.Redactor.String(d.Reason)
	for _, lines := range [][]string{d.Notes, d.Kept, d.Drift} {
		for i, n := range lines {
			lines[i] = c.env.Redactor.String(n)
		}
	}
	return d, c.env.Redactor.Error(err)
}

func (c *Client) diff(ctx context.Context, r Release) (ReleaseDiff, error) {
	cfg, err := c.configuration(ctx, r.Namespace)
	if err != nil {
		return ReleaseDiff{}, err
	}
	hist, err := history(cfg, r.Name)
	if err != nil {
		return ReleaseDiff{}, err
	}
	last := latest(hist)
	d := ReleaseDiff{Current: statusOf(last)}
	if r.SkipIfInstalled && installed(last) {
		d.Action = PlanSkip
		d.Reason = fmt.Sprintf("skipIf installed: release %s exists at %s", r.Name, d.Current)
		return d, nil
	}
	if d.Current.Pending() {
		pend := judgePending(last, time.Now(), r.Timeout, r.Run)
		d.Action, d.Reason = PlanUnknown, pendingPlan(hist, last, pend)
		if !pend.abandoned() {
			d.Reason = inProgress(pend)
		}
		return d, nil
	}
	ch, err := c.loadChart(ctx, r.Source)
	if err != nil {
		return d, err
	}
	d.Target = ch.Ref
	vals, err := c.values(ctx, r.ValuesFrom, r.Values)
	if err != nil {
		return d, err
	}
	var rendered *release.Release
	if !installed(last) {
		d.Action = PlanInstall
		rendered, err = c.renderInstall(ctx, cfg, r, ch, vals, last != nil, &d)
		if err != nil {
			return d, err
		}
		last = nil // an uninstalled revision kept in history has no objects
	} else {
		d.Action = PlanUpgrade
		if rendered, err = c.render(ctx, cfg, r, ch, vals); err != nil {
			return d, fmt.Errorf("dry-run upgrade: %w", err)
		}
		same := last.Chart != nil && last.Chart.Metadata != nil &&
			last.Chart.Metadata.Name == ch.Name && last.Chart.Metadata.Version == ch.Version &&
			sameValues(last.Config, vals)
		if last.Info.Status == rcommon.StatusDeployed && same &&
			rendered.Manifest == last.Manifest && sameHooks(rendered.Hooks, last.Hooks) {
			d.Action = PlanNoOp
		} else {
			d.Notes = append(d.Notes, fmt.Sprintf("upgrade from %s to chart %s", d.Current, ch.Ref))
			if !same {
				d.Notes = append(d.Notes, changes(last, ch, vals)...)
			}
		}
	}
	if d.Objects, err = c.pairObjects(ctx, last, rendered, r.Namespace); err != nil {
		return d, err
	}
	if d.Action == PlanNoOp {
		err = c.diffDrift(ctx, r, last, &d)
	}
	return d, err
}

// diffDrift compares the objects of last, a deployed revision the chart
// renders the same, with the cluster: a drifted object's current version
// becomes the manifest's with the drifted fields at their live values
// (none for a missing object), so the diff shows what the repair puts
// back. Without drift, --replace still upgrades.
func (c *Client) diffDrift(ctx context.Context, r Release, last *release.Release, d *ReleaseDiff) error {
	var dr Drift
	if r.Drift.Mode == spec.DriftOff {
		d.Notes = append(d.Notes, "drift mode off: the release's objects are not compared with the cluster")
	} else {
		var err error
		if dr, err = c.checkDrift(ctx, r, last); err != nil {
			return err
		}
		d.Kept, d.Drift = dr.KeptLines(), dr.LeftLines()
		if dr.Left() {
			d.Notes = append(d.Notes, fmt.Sprintf("drift: %s of %s drifted, left as it is (drift mode warn): apply changes nothing", english.CountNoun(len(dr.Objects), "object"), d.Current))
		}
	}
	if !dr.Repairs() {
		if r.Replace {
			d.Action = PlanUpgrade
			d.Notes = append(d.Notes, fmt.Sprintf("upgrade from %s to a new revision of the same chart, values and objects (--replace)", d.Current))
		}
		d.Notes = append(d.Notes, dr.Details()...)
		return nil
	}
	d.Action = PlanRepair
	d.Notes = append(d.Notes, fmt.Sprintf("repair: %s of %s drifted; an upgrade to a new revision of the same chart and values puts them back", english.CountNoun(len(dr.Objects), "object"), d.Current))
	d.Notes = append(d.Notes, dr.Details()...)
	drifted := make(map[string]DriftedObject, len(dr.Objects))
	for _, o := range dr.Objects {
		drifted[objectKey(o.Manifest)] = o
	}
	for i, o := range d.Objects {
		if o.Hook || o.Rendered == nil {
			continue
		}
		if do, ok := drifted[objectKey(o.Rendered)]; ok {
			d.Objects[i].Current, d.Objects[i].Rendered = do.Live, do.Manifest
		}
	}
	return nil
}

// renderInstall is a server-side dry-run install; when the server cannot
// map the chart's objects yet (custom resources whose definitions the
// install itself creates), the chart is rendered without the server.
func (c *Client) renderInstall(ctx context.Context, cfg *configuration, r Release, ch *Chart, vals map[string]any, replace bool, d *ReleaseDiff) (*release.Release, error) {
	note, err := c.namespaceNote(ctx, r)
	if err != nil {
		return nil, err
	}
	if note != "" {
		d.Notes = append(d.Notes, note)
	}
	chrt, err := ch.load()
	if err != nil {
		return nil, err
	}
	if len(chrt.CRDObjects()) > 0 {
		d.Notes = append(d.Notes, "the chart's crds/ are installed first and are not part of this diff")
		skips, err := c.crdSkips(ctx, ch, vals)
		if err != nil {
			return nil, err
		}
		d.Notes = append(d.Notes, skips...)
	}
	rel, err := dryRunInstall(ctx, cfg, r, chrt, vals, replace)
	if err == nil {
		return rel, nil
	}
	if !errors.Is(err, errUnmappable) {
		return nil, fmt.Errorf("dry-run install: %w", oneLine(err))
	}
	// Client-only rendering swaps the configuration's clients and storage
	// for fakes: it gets a configuration of its own.
	local, err := c.configuration(ctx, r.Namespace)
	if err != nil {
		return nil, err
	}
	if chrt, err = ch.load(); err != nil {
		return nil, err
	}
	rel, err = v1Release(dryInstall(local, r, action.DryRunClient, true).RunWithContext(ctx, chrt, vals))
	if err != nil {
		return nil, fmt.Errorf("render: %w", oneLine(err))
	}
	d.Notes = append(d.Notes, "rendered without the server: the cluster does not serve some of the chart's kinds yet")
	return rel, nil
}

// pairObjects matches the objects of the current revision (nil for none)
// with the rendered ones by group, kind, namespace and name.
func (c *Client) pairObjects(ctx context.Context, cur, rendered *release.Release, namespace string) ([]ManifestObject, error) {
	var curObjs, newObjs, curHooks, newHooks []*unstructured.Unstructured
	var err error
	if cur != nil {
		if curObjs, err = c.decode(ctx, cur.Manifest, namespace); err != nil {
			return nil, fmt.Errorf("the manifest of revision %d: %w", cur.Version, err)
		}
		if curHooks, err = c.decodeHooks(ctx, cur.Hooks, namespace); err != nil {
			return nil, fmt.Errorf("the hooks of revision %d: %w", cur.Version, err)
		}
	}
	if newObjs, err = c.decode(ctx, rendered.Manifest, namespace); err != nil {
		return nil, fmt.Errorf("the rendered manifest: %w", err)
	}
	if newHooks, err = c.decodeHooks(ctx, rendered.Hooks, namespace); err != nil {
		return nil, fmt.Errorf("the rendered hooks: %w", err)
	}
	out := pair(curObjs, newObjs, false)
	return append(out, pair(curHooks, newHooks, true)...), nil
}

func pair(cur, rendered []*unstructured.Unstructured, hook bool) []ManifestObject {
	index := make(map[string]int, len(cur))
	for i, o := range cur {
		index[objectKey(o)] = i
	}
	used := make([]bool, len(cur))
	out := make([]ManifestObject, 0, len(rendered))
	for _, o := range rendered {
		m := ManifestObject{Hook: hook, Rendered: o}
		if i, ok := index[objectKey(o)]; ok && !used[i] {
			m.Current, used[i] = cur[i], true
		}
		out = append(out, m)
	}
	for i, o := range cur {
		if !used[i] {
			out = append(out, ManifestObject{Hook: hook, Current: o})
		}
	}
	return out
}

func objectKey(o *unstructured.Unstructured) string {
	gk := o.GroupVersionKind().GroupKind()
	return gk.String() + "/" + o.GetNamespace() + "/" + o.GetName()
}

// decode splits a release manifest into objects; namespaced objects
// without a namespace get the release's (as Helm installs them).
func (c *Client) decode(ctx context.Context, text, namespace string) ([]*unstructured.Unstructured, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	objs, err := decodeManifest(text)
	if err != nil {
		return nil, err
	}
	scope := map[schema.GroupVersionKind]bool{}
	for _, o := range objs {
		if o.GetNamespace() != "" {
			continue
		}
		gvk := o.GroupVersionKind()
		namespaced, seen := scope[gvk]
		if !seen {
			if m, err := c.env.Kube.MappingFor(ctx, gvk); err == nil {
				namespaced = kube.Namespaced(m)
			}
			scope[gvk] = namespaced
		}
		if namespaced {
			o.SetNamespace(namespace)
		}
	}
	return objs, nil
}

// decodeManifest splits a release manifest as apply splits every source
// (package kubeyaml, as kubectl and helm's own client read it); each
// problem names the chart template it comes from (helm's "# Source:"
// comment).
func decodeManifest(text string) ([]*unstructured.Unstructured, error) {
	objs, err := manifest.Decode([]byte(text))
	var list kubeyaml.Errors
	if err == nil || !errors.As(err, &list) {
		return objs, err
	}
	errs := make([]error, len(list))
	for i, de := range list {
		errs[i] = de
		if src := templateAt(text, de.ProblemLine()); src != "" {
			errs[i] = fmt.Errorf("%s: %w", src, de)
		}
	}
	return nil, errors.Join(errs...)
}

// templateAt returns the template named by the last "# Source: " line at
// or before line (1-based) of a release manifest.
func templateAt(text string, line int) string {
	src := ""
	for n := 1; n <= line && text != ""; n++ {
		var l string
		l, text, _ = strings.Cut(text, "\n")
		if t, ok := strings.CutPrefix(l, "# Source: "); ok {
			src = strings.TrimSpace(t)
		}
	}
	return src
}

func (c *Client) decodeHooks(ctx context.Context, hooks []*release.Hook, namespace string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, h := range hooks {
		objs, err := c.decode(ctx, h.Manifest, namespace)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Path, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}
