package helm

import (
	"context"
	"fmt"
	"strings"
	"time"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"

	"khook.io/core/diff"
	"khook.io/core/internal/english"
	"khook.io/core/spec"
)

// PlanAction is what Plan predicts Apply will do.
type PlanAction string

// Plan's predictions.
const (
	PlanInstall PlanAction = "install"
	PlanUpgrade PlanAction = "upgrade"
	PlanNoOp    PlanAction = "no-op"
	// PlanRepair: the deployed revision has this chart, these values and
	// these manifests, but objects of it drifted out of band: Apply
	// upgrades to a new revision that puts them back.
	PlanRepair PlanAction = "repair"
	PlanSkip   PlanAction = "skip"
	// PlanUnknown: the release is pending and not provably abandoned
	// (another operation may be in progress), the chart or its values
	// cannot be fetched, or a dry run of the install or upgrade fails (the chart does not render, values
	// break its schema, an object exists that another owner has); Reason
	// says why.
	PlanUnknown PlanAction = "unknown"
)

// Plan is a prediction of Apply.
type Plan struct {
	Action PlanAction
	Reason string
	// Current is the release's latest revision, nil when none.
	Current *Status
	// Target names the chart Apply would install ("demo 1.2.0 from
	// https://..."), when it could be fetched.
	Target  string
	Details []string
	// Kept are the fields of the release's objects left to other writers
	// or ignored by the drift policy ("kept: ConfigMap/inj-ca data.ca
	// (written by cainjector)"); Drift the objects that drifted and are
	// left as they are (drift mode warn).
	Kept, Drift []string
}

// Plan predicts what Apply(ctx, r) would do, changing nothing: it reads the
// release history, fetches the chart and values, and for a deployed
// release renders the upgrade with a server-side dry run to tell an
// upgrade from a no-op (a new release gets a dry-run install). A chart or
// values that cannot be fetched, or a dry run that fails, is PlanUnknown
// with the reason; the error is for failures to read the cluster.
func (c *Client) Plan(ctx context.Context, r Release) (Plan, error) {
	p, err := c.plan(ctx, r)
	if err != nil {
		err = fmt.Errorf("release %s (%s): %w", r.Name, r.Namespace, err)
	}
	p.Reason = c.env.Redactor.String(p.Reason)
	for _, lines := range [][]string{p.Details, p.Kept, p.Drift} {
		for i, d := range lines {
			lines[i] = c.env.Redactor.String(d)
		}
	}
	return p, c.env.Redactor.Error(err)
}

func (c *Client) plan(ctx context.Context, r Release) (Plan, error) {
	cfg, err := c.configuration(ctx, r.Namespace)
	if err != nil {
		return Plan{}, err
	}
	hist, err := history(cfg, r.Name)
	if err != nil {
		return Plan{}, err
	}
	last := latest(hist)
	p := Plan{Current: statusOf(last)}
	if r.SkipIfInstalled && installed(last) {
		p.Action = PlanSkip
		p.Reason = fmt.Sprintf("skipIf installed: release %s exists at %s", r.Name, p.Current)
		return p, nil
	}
	var pend pending
	if p.Current.Pending() {
		if pend = judgePending(last, time.Now(), r.Timeout, r.Run); !pend.abandoned() {
			p.Action, p.Reason = PlanUnknown, inProgress(pend)
			return p, nil
		}
	}
	ch, err := c.loadChart(ctx, r.Source)
	if err != nil {
		p.Action, p.Reason = PlanUnknown, "the chart cannot be fetched: "+err.Error()
		return p, nil
	}
	p.Target = ch.Ref
	vals, err := c.values(ctx, r.ValuesFrom, r.Values)
	if err != nil {
		p.Action, p.Reason = PlanUnknown, "the values cannot be read: "+err.Error()
		return p, nil
	}
	if last != nil {
		// the values khook passed from a secret before it was rotated
		// are masked from now on
		diff.Learn(c.env.Redactor, vals, last.Config)
	}
	if !installed(last) {
		p.Action = PlanInstall
		p.Details = append(p.Details, "chart "+ch.Ref)
		if last != nil {
			p.Details = append(p.Details, fmt.Sprintf("replaces %s kept in history", p.Current))
		}
		note, err := c.namespaceNote(ctx, r)
		if err != nil {
			return Plan{}, err
		}
		if note != "" {
			p.Details = append(p.Details, note)
		}
		skips, err := c.crdSkips(ctx, ch, vals)
		if err != nil {
			return Plan{}, err
		}
		p.Details = append(p.Details, skips...)
		if err := c.checkInstall(ctx, cfg, r, ch, vals, last != nil); err != nil {
			p.Action, p.Reason = PlanUnknown, "the install would fail: "+err.Error()
		}
		return p, nil
	}
	p.Details = append(p.Details, "current: "+p.Current.String(), "target: chart "+ch.Ref)
	if p.Current.Pending() {
		p.Action = PlanUpgrade
		p.Reason = pendingPlan(hist, last, pend)
		return p, nil
	}
	if last.Info.Status == rcommon.StatusDeployed {
		ahead := c.driftAhead(ctx, r, ch, vals, last)
		defer ahead.stop()
		same, rendered, err := c.rendersSame(ctx, cfg, r, ch, vals, last)
		if err != nil {
			p.Action, p.Reason = PlanUnknown, "the upgrade would fail: "+err.Error()
			return p, nil
		}
		if same {
			c.planDrift(ahead, r, last, &p)
			return p, nil
		}
		if rendered == nil {
			p.Details = append(p.Details, changes(last, ch, vals)...)
		} else {
			// the same chart and values, rendered differently: say where
			// (a template that renders anew each time, such as a generated
			// certificate, upgrades on every run, as helm upgrade does)
			what, err := c.manifestChanges(ctx, last, rendered, r.Namespace)
			if err != nil {
				return Plan{}, err
			}
			p.Reason = fmt.Sprintf("revision %d has this chart and these values, but the chart renders differently now: %s", last.Version, strings.Join(what, "; "))
			p.Details = append(p.Details, "rendered manifests change: "+strings.Join(what, "; "))
		}
	}
	p.Action = PlanUpgrade
	return p, nil
}

// pendingPlan says how Apply will recover a pending release that p
// judged abandoned.
func pendingPlan(hist []*release.Release, last *release.Release, p pending) string {
	left := p.left()
	good := lastSuccessful(hist, last.Version)
	switch {
	case last.Info.Status == rcommon.StatusUninstalling || (last.Info.Status == rcommon.StatusPendingInstall && good == nil):
		return left + ": apply will uninstall it and install again"
	case good == nil:
		return left + ": apply will mark it failed, then upgrade"
	}
	return fmt.Sprintf("%s: apply will mark it failed, roll back to revision %d, then upgrade", left, good.Version)
}

// inProgress is what plan and diff say of a pending release that is not
// provably abandoned: apply would fail on it.
func inProgress(p pending) string {
	return p.err().Error() + ": apply will fail unless that operation ends first"
}

// changes says what differs between the deployed revision and the target.
func changes(last *release.Release, ch *Chart, vals map[string]any) []string {
	var out []string
	if last.Chart != nil && last.Chart.Metadata != nil &&
		(last.Chart.Metadata.Name != ch.Name || last.Chart.Metadata.Version != ch.Version) {
		out = append(out, fmt.Sprintf("chart %s %s → %s", last.Chart.Metadata.Name, last.Chart.Metadata.Version, ch))
	}
	if !sameValues(last.Config, vals) {
		out = append(out, "values change")
	}
	if len(out) == 0 {
		out = append(out, "rendered manifests change")
	}
	return out
}

// planDrift predicts what Apply does with a deployed revision that has
// the chart, the values and the manifests of r, from the drift check
// ahead: repair what drifted, an upgrade --replace forces, or nothing.
func (c *Client) planDrift(ahead *pendingDrift, r Release, last *release.Release, p *Plan) {
	d, err := ahead.wait()
	if err != nil {
		p.Action, p.Reason = PlanUnknown, err.Error()
		return
	}
	p.Details = append(p.Details, d.Details()...)
	p.Kept, p.Drift = d.KeptLines(), d.LeftLines()
	switch {
	case d.Repairs():
		them := "them"
		if len(d.Objects) == 1 {
			them = "it"
		}
		p.Action = PlanRepair
		p.Reason = fmt.Sprintf("%s of revision %d drifted (%s); an upgrade to a new revision of the same chart and values puts %s back",
			english.CountNoun(len(d.Objects), "object"), last.Version, d.Summary("missing"), them)
	case r.Replace:
		p.Action = PlanUpgrade
		p.Reason = fmt.Sprintf("revision %d has this chart, these values and these manifests, and the cluster has its objects: a new revision all the same (--replace)", last.Version)
	case d.Left():
		p.Action = PlanNoOp
		p.Reason = fmt.Sprintf("revision %d already has this chart, these values and these manifests; %s of it drifted (%s), left as it is: drift mode warn",
			last.Version, english.CountNoun(len(d.Objects), "object"), d.Summary("missing"))
	case r.Drift.Mode == spec.DriftOff:
		p.Action = PlanNoOp
		p.Reason = fmt.Sprintf("revision %d already has this chart, these values and these manifests (drift mode off: its objects are not compared with the cluster)", last.Version)
	default:
		p.Action = PlanNoOp
		p.Reason = fmt.Sprintf("revision %d already has this chart, these values and these manifests, and the cluster has its objects as they say", last.Version)
		if n := len(d.Kept) + len(d.Ignored); n > 0 {
			p.Reason += fmt.Sprintf(" but for %s left to other writers or ignored (below)", english.CountNoun(n, "field"))
		}
	}
}

// manifestChanges names what the rendered manifests and hooks change
// from last's, object by object: "Secret/tls data[\"tls.crt\"],
// data[\"tls.key\"]", "ConfigMap/x added", "Job/y (hook) removed". Paths
// only: no value is named.
func (c *Client) manifestChanges(ctx context.Context, last, rendered *release.Release, namespace string) ([]string, error) {
	objs, err := c.pairObjects(ctx, last, rendered, namespace)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		u := o.Rendered
		if u == nil {
			u = o.Current
		}
		name := u.GetKind() + "/" + u.GetName()
		if o.Hook {
			name += " (hook)"
		}
		switch {
		case o.Current == nil:
			out = append(out, name+" added")
		case o.Rendered == nil:
			out = append(out, name+" removed")
		default:
			if fields := diff.ChangedFields(o.Current, o.Rendered); len(fields) > 0 {
				out = append(out, name+" "+strings.Join(fields, ", "))
			}
		}
	}
	if len(out) == 0 {
		out = append(out, "the same objects in another order or form")
	}
	return out, nil
}
