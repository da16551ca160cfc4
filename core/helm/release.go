package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	helmkube "helm.sh/helm/v4/pkg/kube"
	helmrelease "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"khook.io/core/event"
	"khook.io/core/objects"
	"khook.io/core/spec"
)

// noClientValidation turns off Helm's client-side OpenAPI validation of
// rendered manifests. Against any API server that supports server-side
// field validation (Kubernetes 1.25 and later) that validation only asks
// the server whether it does, which costs a fetch and parse of the
// group-version's OpenAPI v3 document per manifest build, per operation
// (Helm keeps no cache across action configurations): about 70% of the CPU
// of installing ten small charts in parallel. The API server validates the
// objects anyway: invalid values are rejected, and so are unknown fields
// of a server-side apply (strict field validation, as helm 4's); a
// client-side upgrade's unknown fields are the API server's warnings, as
// with Helm against such a server. A manifest Helm cannot decode is worded
// as Helm's validation words it (kubeClient.Build).
const noClientValidation = true

// maxHistory is how many revisions of a release are kept, like the helm
// CLI's default for upgrades (--history-max 10).
const maxHistory = 10

// Release is the desired state of a release: what a helm step says.
type Release struct {
	Name      string
	Namespace string
	Source    Source
	// ValuesFrom are merged in order, then Values on top.
	ValuesFrom []ValuesSource
	Values     map[string]any
	// CreateNamespace creates Namespace when missing, before the install;
	// an existing one is left alone.
	CreateNamespace bool
	// Atomic rolls back a failed upgrade and uninstalls a failed install.
	// Half of the time left is kept for the rollback.
	Atomic bool
	// Wait waits until the release's resources are ready.
	Wait bool
	// SkipIfInstalled skips when the release exists, whatever its chart
	// version and values.
	SkipIfInstalled bool
	// Timeout bounds the operation when ctx has no deadline. It is also
	// how old a pending revision must be before it is taken as abandoned.
	Timeout time.Duration
	// Run is the khook run applying r: its ID labels every revision Apply
	// makes, and a pending revision another run left is recovered only
	// when it is provably abandoned (see Apply).
	Run Run
	// Replace upgrades a deployed release even when its chart, values,
	// manifests and objects are as r says (--replace): a new revision,
	// hooks run.
	Replace bool
	// Drift is the step's drift policy: what a release deployed with the
	// same chart, values and manifests does with objects that changed
	// (repair, warn, off), and whose fields are kept or ignored.
	Drift objects.Policy
}

// Run identifies the khook run an operation belongs to (step.RunInfo).
type Run struct {
	// ID labels every revision the run makes (RunLabel); empty: no label.
	// It must be a valid label value.
	ID string
	// Abandoned reports whether the run of id is known to be gone (its
	// run lock expired and this run took it over); nil: none is.
	Abandoned func(id string) bool
	// Lock names the run lock the run holds (a state record's: step.RunInfo's
	// Lock), labelling every revision the run makes (RunLockLabel); empty:
	// none. A pending revision another run wrote under the same lock was
	// left by a run that has ended: this run holds that lock now.
	Lock string
	// Enter marks release key ("namespace/name") as one the run operates
	// on until leave is called; alone reports whether no other operation
	// of the run was on it. Nil: the run does not say.
	Enter func(key string) (alone bool, leave func())
	// sole: the operation judging a pending revision is the run's only
	// one on the release (set from Enter)
	sole bool
}

func (r Run) abandoned(id string) bool {
	return id != "" && r.Abandoned != nil && r.Abandoned(id)
}

// enter marks the release as one r operates on (Run.Enter): a revision
// this run left pending is then taken over only when no other operation
// of the run is on it.
func (r *Run) enter(namespace, name string) (leave func()) {
	if r.Enter == nil || r.ID == "" {
		return func() {}
	}
	alone, leave := r.Enter(namespace + "/" + name)
	r.sole = alone
	return leave
}

// RunLabel is the release label naming the khook run that wrote a
// revision: step.RunLabel, on the revision's storage Secret (helm's
// custom release labels).
const RunLabel = "khook.io/run"

// RunRevisionLabel is the revision RunLabel was written for. Helm carries
// a release's labels over to the revisions that follow (an upgrade merges
// the last revision's labels with its own, a rollback copies the
// target's), so RunLabel names the writer only on the revision this label
// names: on any other it was carried over by helm, another tool, or a
// rollback.
const RunRevisionLabel = "khook.io/run-revision"

// RunLockLabel names the run lock the run that wrote a revision held
// (step.RunLockLabel): read only where RunRevisionLabel says the labels
// are the writer's.
const RunLockLabel = "khook.io/run-lock"

// runLabels are the labels of the revision an install or upgrade by run
// makes. Without an id, an upgrade drops the labels carried over from
// the last revision (helm's "null" removes a label) and an install sets
// none; without a lock, an upgrade drops a carried-over lock label.
func runLabels(run Run, revision int, upgrade bool) (map[string]string, error) {
	if run.ID == "" {
		if upgrade {
			return map[string]string{RunLabel: "null", RunRevisionLabel: "null", RunLockLabel: "null"}, nil
		}
		return nil, nil
	}
	for _, v := range []string{run.ID, run.Lock} {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("run id %q cannot label the release (%s): %s", v, RunLabel, strings.Join(errs, "; "))
		}
	}
	labels := map[string]string{RunLabel: run.ID, RunRevisionLabel: strconv.Itoa(revision)}
	switch {
	case run.Lock != "":
		labels[RunLockLabel] = run.Lock
	case upgrade:
		labels[RunLockLabel] = "null"
	}
	return labels, nil
}

// defaultTimeout is the step timeout of the spec when none is given: the
// age past which a pending revision is abandoned when Timeout is unset.
const defaultTimeout = 5 * time.Minute

// pending is what is known of a revision left pending: who last wrote it,
// when, and whether it is provably abandoned.
type pending struct {
	revision int
	status   rcommon.Status
	// age is how long ago the operation started, by the revision's own
	// time (LastDeployed; Deleted for an uninstall).
	age     time.Duration
	timeout time.Duration
	// run is the khook run that wrote the revision, "" when unknown;
	// carried is the revision a RunLabel on it was written for, when
	// another (helm carried it over); lock is the run lock its writer held
	// (RunLockLabel), "" when unknown.
	run     string
	carried string
	lock    string
	// byRun: the run that wrote it is known to be gone, or to have left
	// it (gone says how); byAge: it is older than the timeout.
	byRun, byAge bool
	gone         string
}

// judgePending decides whether rel, a pending revision (Status.Pending),
// is provably abandoned at now: its run is known to be gone, or its last
// operation is older than timeout (defaultTimeout when unset). A revision
// without a time (no helm writes one) is taken as old.
func judgePending(rel *release.Release, now time.Time, timeout time.Duration, run Run) pending {
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	p := pending{revision: rel.Version, timeout: timeout}
	var since time.Time
	if rel.Info != nil {
		p.status = rel.Info.Status
		since = rel.Info.LastDeployed
		if p.status == rcommon.StatusUninstalling && !rel.Info.Deleted.IsZero() {
			since = rel.Info.Deleted
		}
	}
	if id := rel.Labels[RunLabel]; id != "" {
		if rev := rel.Labels[RunRevisionLabel]; rev == strconv.Itoa(rel.Version) {
			p.run, p.lock = id, rel.Labels[RunLockLabel]
		} else {
			p.carried = rev
		}
	}
	if since.IsZero() {
		p.age, p.byAge = -1, true
	} else {
		p.age = max(now.Sub(since), 0)
		p.byAge = p.age > timeout
	}
	switch {
	case p.run == "":
	case p.run == run.ID && run.sole:
		p.byRun, p.gone = true, "by this run, whose operation on it ended"
	case p.run == run.ID:
	case run.abandoned(p.run):
		p.byRun, p.gone = true, fmt.Sprintf("by khook run %s, which is gone (its run lock expired)", p.run)
	case run.Lock != "" && p.lock == run.Lock:
		p.byRun, p.gone = true, fmt.Sprintf("by khook run %s, which has ended (this run holds the run lock it held)", p.run)
	}
	return p
}

func (p pending) abandoned() bool { return p.byRun || p.byAge }

// writer says who last wrote the revision.
func (p pending) writer() string {
	switch {
	case p.run != "":
		return "khook run " + p.run
	case p.carried != "":
		return fmt.Sprintf("not khook (its %s label was carried over from revision %s): helm or another tool", RunLabel, p.carried)
	}
	return fmt.Sprintf("not khook (no %s label): helm or another tool", RunLabel)
}

func (p pending) ageString() string {
	if p.age < 0 {
		return "an unknown time"
	}
	return p.age.Round(time.Second).String()
}

// operation is helm's word for the operation in progress.
func (p pending) operation() string {
	if p.status == rcommon.StatusUninstalling {
		return "uninstall"
	}
	return "install/upgrade/rollback"
}

// left says why a revision is taken as abandoned.
func (p pending) left() string {
	if p.byRun {
		return fmt.Sprintf("revision %d was left %s %s", p.revision, p.status, p.gone)
	}
	return fmt.Sprintf("revision %d was left %s %s ago, longer than the step's timeout (%s)", p.revision, p.status, p.ageString(), p.timeout)
}

// PendingError: the release's latest revision is pending and not
// provably abandoned: another operation may be working on it.
type PendingError struct {
	Revision int
	Status   string
	// Age is how long the operation has been going on; negative: unknown.
	Age time.Duration
	// Writer says who last wrote the revision: "khook run <id>", or "not
	// khook (...): helm or another tool".
	Writer  string
	Timeout time.Duration
	op      string
}

func (p pending) err() *PendingError {
	return &PendingError{Revision: p.revision, Status: string(p.status), Age: p.age, Writer: p.writer(), Timeout: p.timeout, op: p.operation()}
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("another operation (%s) is in progress: revision %d has been %s for %s, last writer: %s; "+
		"khook takes over a pending release only when it is older than the step's timeout (%s) or the khook run that left it is known to be gone",
		e.op, e.Revision, e.Status, pending{age: e.Age}.ageString(), e.Writer, e.Timeout)
}

// Action is what Apply did.
type Action string

// Apply's actions.
const (
	Installed Action = "installed"
	Upgraded  Action = "upgraded"
	// Unchanged: the deployed revision already has this chart, these values
	// and these rendered manifests, and the cluster has its objects as
	// they say; no new revision was made.
	Unchanged Action = "unchanged"
	// Repaired: the deployed revision has this chart, these values and
	// these manifests, but objects of it drifted (Result.Drift): an
	// upgrade to a new revision put them back.
	Repaired Action = "repaired"
	// Skipped: SkipIfInstalled and the release exists.
	Skipped Action = "skipped"
)

// Status describes one revision of a release.
type Status struct {
	Revision     int
	Status       string // deployed, failed, pending-upgrade, ...
	Chart        string // the chart's name
	ChartVersion string
	Updated      time.Time
	Description  string
}

func (s *Status) String() string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("revision %d (%s, chart %s %s)", s.Revision, s.Status, s.Chart, s.ChartVersion)
}

// Pending reports whether the revision is in the middle of an operation:
// pending-install, pending-upgrade, pending-rollback or uninstalling.
func (s *Status) Pending() bool {
	return s != nil && (rcommon.Status(s.Status).IsPending() || s.Status == string(rcommon.StatusUninstalling))
}

// Result is what Apply did.
type Result struct {
	Action    Action
	Release   string
	Namespace string
	// Revision is the release's revision afterwards (the existing one when
	// Unchanged or Skipped).
	Revision int
	// Chart is "name version" of the chart applied, and ChartRef where it
	// came from; both empty when Skipped.
	Chart    string
	ChartRef string
	// Previous is the latest revision before, nil for a new release.
	Previous *Status
	// Recovered says how a release left pending by an interrupted run was
	// recovered, if it was.
	Recovered string
	// Drift is what the drift check found: what a Repaired upgrade put
	// back, or what an Unchanged release left drifted (Drift.Left: the
	// policy says warn), and the fields it kept for other writers or
	// ignored; Forced says Replace made an upgrade nothing else asked for
	// (Upgraded, or Repaired).
	Drift  Drift
	Forced bool
	// Notes is the chart's NOTES.txt as the install or upgrade rendered it
	// (what helm prints after one); empty otherwise. Not redacted.
	Notes string
	// SkippedCRDs are the CRDs of the chart's crds/ an install found
	// present and did not create (decision 254).
	SkippedCRDs []PresentCRD
}

// Apply installs or upgrades r, as the release history decides:
//
//   - no release (or only an uninstalled one kept in history): install;
//   - SkipIfInstalled and a release exists: nothing (Skipped);
//   - a deployed revision with the same chart name and version, the same
//     values and the same rendered manifests and hooks (a server-side
//     dry-run upgrade renders them), whose objects the cluster has as its
//     manifest says (checkDrift): no upgrade and no new revision
//     (Unchanged); with Wait, the resources are still waited for; when
//     objects drifted, an upgrade that puts them back (Repaired,
//     Result.Drift); with Replace, an upgrade all the same;
//   - otherwise: upgrade. Values are always the spec's (never reused from
//     the release), and history is capped at 10 revisions.
//
// A release whose latest revision is pending (pending-install,
// pending-upgrade, pending-rollback, uninstalling) is recovered first only
// when it is provably abandoned: its last operation (the revision's
// LastDeployed; Deleted for an uninstall) is older than r.Timeout, or its
// RunLabel names a run r.Run knows to be gone. Otherwise another operation
// may be working on it, and Apply fails at once with a *PendingError, as
// helm does ("another operation (install/upgrade/rollback) is in
// progress"), changing nothing. An abandoned first install (pending-install,
// nothing deployed) or uninstall is uninstalled and installed again; an
// abandoned upgrade or rollback is marked failed and rolled back to the
// last deployed revision, then upgraded. Result.Recovered says what was
// done.
//
// Every revision Apply makes carries r.Run.ID as RunLabel (and its
// revision as RunRevisionLabel), so that a later run can tell who left it.
//
// Helm's own timeouts are set from ctx's deadline (r.Timeout without one),
// a little before it, so that Helm records a failure (and, with Atomic,
// rolls back or uninstalls) before ctx ends.
func (c *Client) Apply(ctx context.Context, r Release) (Result, error) {
	res, err := c.apply(ctx, r)
	if err != nil {
		err = fmt.Errorf("release %s (%s): %w", r.Name, r.Namespace, err)
	}
	return res, c.env.Redactor.Error(err)
}

func (c *Client) apply(ctx context.Context, r Release) (Result, error) {
	res := Result{Release: r.Name, Namespace: r.Namespace}
	defer r.Run.enter(r.Namespace, r.Name)()
	cfg, err := c.configuration(ctx, r.Namespace)
	if err != nil {
		return res, err
	}
	hist, err := history(cfg, r.Name)
	if err != nil {
		return res, err
	}
	last := latest(hist)
	res.Previous = statusOf(last)
	if r.SkipIfInstalled && installed(last) {
		res.Action, res.Revision = Skipped, last.Version
		return res, nil
	}
	var pend pending
	if res.Previous.Pending() {
		if pend = judgePending(last, time.Now(), r.Timeout, r.Run); !pend.abandoned() {
			return res, pend.err()
		}
	}
	endFetch := event.Phase(ctx, event.PhaseFetch, "chart and values of release "+r.Name)
	ch, err := c.loadChart(ctx, r.Source)
	if err != nil {
		endFetch(err)
		return res, err
	}
	res.Chart, res.ChartRef = ch.String(), ch.Ref
	vals, err := c.values(ctx, r.ValuesFrom, r.Values)
	endFetch(err)
	if err != nil {
		return res, err
	}
	c.chartWarnings(ch)
	if res.Previous.Pending() {
		msg, reinstall, err := c.recoverPending(ctx, cfg, r, hist, last, pend)
		res.Recovered = msg
		if err != nil {
			return res, err
		}
		last = nil
		if !reinstall {
			if hist, err = history(cfg, r.Name); err != nil {
				return res, err
			}
			last = latest(hist)
		}
	}
	if !installed(last) {
		return c.install(ctx, cfg, r, ch, vals, last, res)
	}
	return c.upgrade(ctx, cfg, r, ch, vals, last, res)
}

// install installs r; last is an uninstalled revision kept in history,
// which the install replaces, or nil.
func (c *Client) install(ctx context.Context, cfg *configuration, r Release, ch *Chart, vals map[string]any, last *release.Release, res Result) (Result, error) {
	replace, revision := last != nil, 1
	if replace {
		revision = last.Version + 1 // as helm's replace numbers it
	}
	labels, err := runLabels(r.Run, revision, false)
	if err != nil {
		return res, err
	}
	if !r.CreateNamespace {
		if err := c.requireNamespace(ctx, r.Namespace); err != nil {
			return res, err
		}
	}
	chrt, err := ch.load()
	if err != nil {
		return res, err
	}
	present, err := c.presentCRDs(ctx, ch, chrt, vals)
	if err != nil {
		return res, err
	}
	if err := dropCRDs(chrt, present); err != nil {
		return res, err
	}
	for _, p := range present {
		c.env.warn(fmt.Sprintf("chart %s: %s", ch.Name, p))
		c.env.logf("chart %s: %s", ch.Name, p)
	}
	res.SkippedCRDs = present
	in := action.NewInstall(cfg.Configuration)
	in.ReleaseName = r.Name
	in.Namespace = r.Namespace
	in.WaitStrategy, in.WaitOptions = cfg.waitStrategy(ctx, r.Wait || r.Atomic)
	in.RollbackOnFailure = r.Atomic
	in.ServerSideApply = installServerSide // as helm 4 installs: see installServerSide
	in.Replace = replace                   // over an uninstalled revision kept in history
	if r.CreateNamespace {
		// created by helm's install where helm creates it, through
		// khook's policy: see createNamespaceKube
		in.CreateNamespace = true
		c.withCreateNamespace(ctx, cfg, r.Namespace)
	}
	in.Timeout = helmTimeout(ctx, r)
	in.DisableOpenAPIValidation = noClientValidation
	in.Labels = labels
	c.env.logf("installing chart %s as release %s in %s", ch.Ref, r.Name, r.Namespace)
	endInstall := event.Phase(ctx, event.PhaseInstall, "chart "+ch.Ref+" as release "+r.Name)
	rel, err := v1Release(in.RunWithContext(ctx, chrt, vals))
	endInstall(err)
	if err != nil {
		return res, operationError(ctx, "install", cfg, in.Timeout, r.Wait || r.Atomic, err)
	}
	res.Action, res.Revision, res.Notes = Installed, rel.Version, notes(rel)
	return res, nil
}

func (c *Client) upgrade(ctx context.Context, cfg *configuration, r Release, ch *Chart, vals map[string]any, last *release.Release, res Result) (Result, error) {
	var owners *Drift // last's objects as read, for an upgrade that is no repair
	if last.Info.Status == rcommon.StatusDeployed {
		ahead := c.driftAhead(ctx, r, ch, vals, last)
		defer ahead.stop()
		same, err := c.unchanged(ctx, cfg, r, ch, vals, last)
		if err != nil {
			return res, fmt.Errorf("upgrade failed: %w", err)
		}
		if same {
			if res.Drift, err = ahead.wait(); err != nil {
				return res, err
			}
			if !res.Drift.Repairs() && !r.Replace {
				if r.Wait {
					if err := c.waitReady(ctx, cfg, r, last); err != nil {
						return res, err
					}
				}
				res.Action, res.Revision = Unchanged, last.Version
				return res, nil
			}
			res.Forced = r.Replace
		} else if r.Drift.Mode != spec.DriftOff {
			owners = c.readOwners(ctx, r, last, ahead)
		}
	}
	labels, err := runLabels(r.Run, last.Version+1, true) // helm's next revision
	if err != nil {
		return res, err
	}
	chrt, err := ch.load()
	if err != nil {
		return res, err
	}
	up := action.NewUpgrade(cfg.Configuration)
	up.Namespace = r.Namespace
	up.WaitStrategy, up.WaitOptions = cfg.waitStrategy(ctx, r.Wait || r.Atomic)
	up.RollbackOnFailure = r.Atomic
	up.ServerSideApply = "auto" // the release's own apply method
	up.ResetValues = true       // the spec is the only source of values
	up.MaxHistory = maxHistory
	up.Timeout = helmTimeout(ctx, r)
	up.DisableOpenAPIValidation = noClientValidation
	up.Labels = labels // merged by helm with the last revision's
	c.readyUpgrade(cfg, up, r, ch, last, res, owners)
	endUpgrade := event.Phase(ctx, event.PhaseUpgrade, "release "+r.Name+" to chart "+ch.Ref)
	rel, err := v1Release(up.RunWithContext(ctx, r.Name, chrt, vals))
	endUpgrade(err)
	if err != nil {
		return res, operationError(ctx, "upgrade", cfg, up.Timeout, r.Wait || r.Atomic, err)
	}
	res.Action, res.Revision, res.Notes = Upgraded, rel.Version, notes(rel)
	if res.Drift.Repairs() {
		res.Action = Repaired
	}
	return res, nil
}

// unchanged reports whether upgrading last to ch with vals would change
// nothing: same chart name and version, same values, and the same rendered
// manifests and hooks (rendered by a server-side dry-run upgrade, so that
// lookup and the API versions behave as in a real upgrade). An error means
// the chart does not render.
func (c *Client) unchanged(ctx context.Context, cfg *configuration, r Release, ch *Chart, vals map[string]any, last *release.Release) (bool, error) {
	same, _, err := c.rendersSame(ctx, cfg, r, ch, vals, last)
	return same, err
}

// rendersSame is unchanged, with the chart rendered (nil when the chart
// or values differ: it is not rendered then).
func (c *Client) rendersSame(ctx context.Context, cfg *configuration, r Release, ch *Chart, vals map[string]any, last *release.Release) (bool, *release.Release, error) {
	if last.Chart == nil || last.Chart.Metadata == nil ||
		last.Chart.Metadata.Name != ch.Name || last.Chart.Metadata.Version != ch.Version ||
		!sameValues(last.Config, vals) {
		return false, nil, nil
	}
	endRender := event.Phase(ctx, event.PhaseRender, "chart "+ch.Ref+" (a server-side dry run, to compare with revision "+fmt.Sprint(last.Version)+")")
	rendered, err := c.render(ctx, cfg, r, ch, vals)
	endRender(err)
	if err != nil {
		return false, nil, err
	}
	return rendered.Manifest == last.Manifest && sameHooks(rendered.Hooks, last.Hooks), rendered, nil
}

// checkInstall is a server-side dry-run install: it changes nothing. It
// returns why an install would fail (the chart does not render, values
// break its schema, objects exist that another owner has), but not when
// only the manifests cannot be mapped yet, as custom resources whose
// definitions the install itself would create.
func (c *Client) checkInstall(ctx context.Context, cfg *configuration, r Release, ch *Chart, vals map[string]any, replace bool) error {
	chrt, err := ch.load()
	if err != nil {
		return err
	}
	_, err = dryRunInstall(ctx, cfg, r, chrt, vals, replace)
	if errors.Is(err, errUnmappable) {
		return nil
	}
	return oneLine(err)
}

// errUnmappable: the server cannot map the chart's objects yet (custom
// resources whose definitions the install itself would create).
var errUnmappable = errors.New("the chart's objects cannot be mapped yet")

// dryRunInstall is a server-side dry-run install of chrt as r. When the
// server cannot map the chart's objects yet, the error wraps
// errUnmappable.
func dryRunInstall(ctx context.Context, cfg *configuration, r Release, chrt *chart.Chart, vals map[string]any, replace bool) (*release.Release, error) {
	dry := dryInstall(cfg, r, action.DryRunServer, replace)
	rel, err := v1Release(dry.RunWithContext(ctx, chrt, vals))
	if err != nil && strings.Contains(err.Error(), "unable to build kubernetes objects from release manifest") {
		return nil, fmt.Errorf("%w: %w", errUnmappable, err)
	}
	return rel, err
}

// dryInstall is helm's install of r that changes nothing: the server
// renders and checks it (action.DryRunServer), or helm alone renders it
// (action.DryRunClient, on a configuration whose clients helm swaps for
// fakes: nothing to validate against). replace installs over an
// uninstalled revision kept in history.
func dryInstall(cfg *configuration, r Release, strategy action.DryRunStrategy, replace bool) *action.Install {
	dry := action.NewInstall(cfg.Configuration)
	dry.ReleaseName = r.Name
	dry.Namespace = r.Namespace
	dry.Replace = replace
	dry.DryRunStrategy = strategy
	dry.ServerSideApply = false
	dry.WaitStrategy = helmkube.HookOnlyStrategy
	dry.DisableOpenAPIValidation = noClientValidation || strategy == action.DryRunClient
	return dry
}

// render is a server-side dry-run upgrade: it changes nothing.
func (c *Client) render(ctx context.Context, cfg *configuration, r Release, ch *Chart, vals map[string]any) (*release.Release, error) {
	chrt, err := ch.load()
	if err != nil {
		return nil, err
	}
	dry := action.NewUpgrade(cfg.Configuration)
	dry.Namespace = r.Namespace
	dry.DryRunStrategy = action.DryRunServer
	dry.WaitStrategy = helmkube.HookOnlyStrategy
	dry.ResetValues = true
	dry.DisableOpenAPIValidation = noClientValidation
	rel, err := v1Release(dry.RunWithContext(ctx, r.Name, chrt, vals))
	return rel, oneLine(err)
}

func sameHooks(a, b []*release.Hook) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Path != b[i].Path || a[i].Manifest != b[i].Manifest {
			return false
		}
	}
	return true
}

// v1Release is the release an action returned, as the only kind of
// release Helm 4 stores for charts of API v1 and v2 (the kinds khook
// installs).
func v1Release(ri helmrelease.Releaser, err error) (*release.Release, error) {
	if err != nil {
		return nil, err
	}
	switch rel := ri.(type) {
	case *release.Release:
		return rel, nil
	case release.Release:
		return &rel, nil
	case nil:
		return nil, errors.New("helm returned no release")
	}
	return nil, fmt.Errorf("helm returned a release of an unknown kind %T", ri)
}

// waitReady waits until the resources of a deployed revision are ready,
// as Helm's --wait would.
func (c *Client) waitReady(ctx context.Context, cfg *configuration, r Release, rel *release.Release) error {
	resources, err := cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	timeout := budget(ctx, r.Timeout)
	strategy, opts := cfg.waitStrategy(ctx, true)
	w, err := cfg.kube.GetWaiterWithOptions(strategy, opts...)
	if err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	if err := w.Wait(resources, timeout); err != nil {
		return operationError(ctx, "wait", cfg, timeout, true, err)
	}
	return nil
}

// recoverPending recovers a release whose latest revision p judged
// abandoned (see Apply). reinstall says the release is gone and is to be
// installed again.
func (c *Client) recoverPending(ctx context.Context, cfg *configuration, r Release, hist []*release.Release, last *release.Release, p pending) (msg string, reinstall bool, err error) {
	state := last.Info.Status
	good := lastSuccessful(hist, last.Version)
	left := p.left()
	c.env.logf("release %s (%s): %s; recovering", r.Name, r.Namespace, left)
	switch {
	case state == rcommon.StatusUninstalling || (state == rcommon.StatusPendingInstall && good == nil):
		if _, err := c.uninstall(ctx, cfg, r.Name, r.Namespace, UninstallOptions{Timeout: r.Timeout}, false); err != nil {
			return left, false, fmt.Errorf("%s, and uninstalling it failed: %w", left, err)
		}
		return left + ": uninstalled it and installed again", true, nil
	}
	last.SetStatus(rcommon.StatusFailed, fmt.Sprintf("%s: interrupted; marked failed by khook", state))
	if err := cfg.Releases.Update(last); err != nil {
		return left, false, fmt.Errorf("%s, and marking it failed failed: %w", left, err)
	}
	if good == nil {
		return left + ": marked it failed", false, nil
	}
	rb := action.NewRollback(cfg.Configuration)
	rb.Version = good.Version
	rb.MaxHistory = maxHistory
	rb.Timeout = budget(ctx, r.Timeout)
	rb.WaitStrategy, rb.WaitOptions = cfg.waitStrategy(ctx, false)
	if err := rb.Run(r.Name); err != nil {
		return left, false, fmt.Errorf("%s, and rolling back to revision %d failed: %w", left, good.Version, err)
	}
	return fmt.Sprintf("%s: marked it failed and rolled back to revision %d", left, good.Version), false, nil
}

// requireNamespace fails when the namespace to install in is known not
// to exist (a step without createNamespace), with a clear error instead of
// Helm's failure to store the release. A client that may not read
// namespaces is let through: Helm's own error says it if the namespace is
// missing. With createNamespace, Helm's install creates it
// (createNamespaceKube).
func (c *Client) requireNamespace(ctx context.Context, ns string) error {
	missing, err := c.namespaceMissing(ctx, ns)
	if missing {
		return fmt.Errorf("namespace %s does not exist: create it in an earlier step or set createNamespace: true", ns)
	}
	return err
}

// namespaceMissing reports whether ns is known not to exist: false when
// it exists, and when the client may not read namespaces (the install's
// own error then says it).
func (c *Client) namespaceMissing(ctx context.Context, ns string) (bool, error) {
	exists, err := c.objects().NamespaceExists(ctx, ns)
	switch {
	case apierrors.IsForbidden(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("check %w", err)
	}
	return !exists, nil
}

// namespaceNote is what a plan or diff of an install says of its
// namespace: nothing when it exists (or may not be read), else whether
// the step creates it.
func (c *Client) namespaceNote(ctx context.Context, r Release) (string, error) {
	missing, err := c.namespaceMissing(ctx, r.Namespace)
	switch {
	case err != nil || !missing:
		return "", err
	case r.CreateNamespace:
		return "namespace " + r.Namespace + " will be created", nil
	}
	return "namespace " + r.Namespace + " does not exist: unless an earlier step creates it, the install will fail", nil
}

// objects is the object manager of the run's clients: namespaces are
// read and created through its one policy.
func (c *Client) objects() *objects.Manager {
	return objects.New(c.env.Kube, objects.Options{FieldManager: c.env.FieldManager, Redactor: c.env.Redactor})
}

// helmTimeout is the timeout Helm gets for an install or upgrade: with
// Atomic, half of the budget, since the rollback (or uninstall) gets the
// same timeout again.
func helmTimeout(ctx context.Context, r Release) time.Duration {
	t := budget(ctx, r.Timeout)
	if r.Atomic {
		t /= 2
	}
	return t
}

// operationError words a failed Helm operation; when Helm's own wait timed
// out, it says how long it waited and what was last seen not ready.
func operationError(ctx context.Context, op string, cfg *configuration, timeout time.Duration, waited bool, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s interrupted: %w", op, ctx.Err())
	}
	err = oneLine(err)
	if waited && errors.Is(err, context.DeadlineExceeded) {
		detail := fmt.Sprintf("waited %s for the resources to be ready", timeout.Round(time.Second))
		// both waits name what they last saw not ready, and why; the log's
		// line is for an error that does not (a hook's wait)
		if nr := cfg.log.lastNotReady(); nr != "" && !namesNotReady(err.Error()) {
			detail += "; last seen: " + nr
		}
		return logLines(fmt.Errorf("%s failed: %w (%s)", op, err, detail))
	}
	return logLines(fmt.Errorf("%s failed: %w", op, err))
}

// namesNotReady reports whether a wait's error message already names what
// was not ready: khook's ("waiting for readiness on Deployment ns/x:
// InProgress: ...") or Helm's status watcher's ("resource
// Deployment/ns/x not ready. status: InProgress, ...").
func namesNotReady(msg string) bool {
	return strings.Contains(msg, "waiting for readiness on ") || strings.Contains(msg, " not ready. status: ")
}

// oneLine wraps err so that its message is one line: Helm joins errors
// as "N errors occurred:\n\t* a\n\t* b".
func oneLine(err error) error {
	if err == nil || flatten(err.Error()) == err.Error() {
		return err
	}
	return &flatError{err}
}

type flatError struct{ err error }

func (e *flatError) Error() string { return flatten(e.err.Error()) }
func (e *flatError) Unwrap() error { return e.err }

var occurredRe = regexp.MustCompile(`(\d+) errors? occurred:\n\t\* `)

// helmWords are Helm 4's words for khook's: the spec's field is atomic.
var helmWords = strings.NewReplacer("due to rollback-on-failure being set", "due to atomic being set")

// flatten turns a multi-line error message into one line, in khook's
// words.
func flatten(msg string) string {
	msg = helmWords.Replace(msg)
	msg = occurredRe.ReplaceAllStringFunc(msg, func(m string) string {
		if strings.HasPrefix(m, "1 ") {
			return ""
		}
		return strings.Fields(m)[0] + " errors: "
	})
	msg = strings.ReplaceAll(msg, "\n\t* ", "; ")
	return strings.Join(strings.Fields(msg), " ")
}

// history returns the release's revisions, oldest first; none when it
// does not exist.
func history(cfg *configuration, name string) ([]*release.Release, error) {
	list, err := action.NewHistory(cfg.Configuration).Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the release history: %w", err)
	}
	hist := make([]*release.Release, 0, len(list))
	for _, ri := range list {
		rel, err := v1Release(ri, nil)
		if err != nil {
			return nil, fmt.Errorf("read the release history: %w", err)
		}
		hist = append(hist, rel)
	}
	sort.Slice(hist, func(i, j int) bool { return hist[i].Version < hist[j].Version })
	return hist, nil
}

func latest(hist []*release.Release) *release.Release {
	if len(hist) == 0 {
		return nil
	}
	return hist[len(hist)-1]
}

// installed reports whether rel is a release that exists (an uninstalled
// revision kept in history does not).
func installed(rel *release.Release) bool {
	return rel != nil && rel.Info != nil && rel.Info.Status != rcommon.StatusUninstalled
}

// lastSuccessful is the newest deployed or superseded revision other than
// except.
func lastSuccessful(hist []*release.Release, except int) *release.Release {
	for i := len(hist) - 1; i >= 0; i-- {
		h := hist[i]
		if h.Version != except && h.Info != nil &&
			(h.Info.Status == rcommon.StatusDeployed || h.Info.Status == rcommon.StatusSuperseded) {
			return h
		}
	}
	return nil
}

func statusOf(rel *release.Release) *Status {
	if rel == nil {
		return nil
	}
	s := &Status{Revision: rel.Version}
	if rel.Info != nil {
		s.Status = string(rel.Info.Status)
		s.Updated = rel.Info.LastDeployed
		s.Description = rel.Info.Description
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		s.Chart, s.ChartVersion = rel.Chart.Metadata.Name, rel.Chart.Metadata.Version
	}
	return s
}

// Get returns the latest revision of a release, or nil when there is
// none.
func (c *Client) Get(ctx context.Context, name, namespace string) (*Status, error) {
	cfg, err := c.configuration(ctx, namespace)
	if err != nil {
		return nil, c.env.Redactor.Error(err)
	}
	hist, err := history(cfg, name)
	if err != nil {
		return nil, c.env.Redactor.Error(fmt.Errorf("release %s (%s): %w", name, namespace, err))
	}
	return statusOf(latest(hist)), nil
}
