// Package helm is the helm: step: declarative install-or-upgrade of a
// chart release, in-process through package khook.io/core/helm (the only
// package that uses the Helm SDK). It is also the release form of delete:
// (Executor.Uninstall, injected into the delete executor) and the destroy
// of a helm: step.
//
// Semantics where the spec is silent:
//   - namespace: the step's namespace, else the run's default namespace
//     (-n), else "default";
//   - a re-run with the same chart version, values and rendered manifests
//     reads the release's objects: when the cluster has them as the
//     manifest says, it makes no new revision (reported "unchanged"; with
//     wait: true the resources are still waited for); when objects are
//     missing or fields the manifest sets were changed out of band, it
//     upgrades to a new revision that puts them back (reported "repaired",
//     naming them; see khook.io/core/helm's drift check). Changing
//     anything in the step, or the chart, upgrades; --replace upgrades
//     even a release that needs nothing (a new revision, hooks run);
//   - every revision an install or upgrade makes carries the run's id
//     (step.Request.Run) as the label step.RunLabel, and the run lock it
//     holds as step.RunLockLabel;
//   - a release left pending (pending-install, -upgrade, -rollback,
//     uninstalling) is recovered only when it is provably abandoned: older
//     than the step timeout, or left by a run known to be gone (one whose
//     lock this run took over, one that wrote it under the lock this run
//     holds now, or this run itself, when no other step of it is working
//     on the release: see khook.io/core/helm.Client.Apply); the outcome
//     says how. Otherwise
//     another operation may be working on it and the step fails at once,
//     naming the revision, its status, its age and who last wrote it; so
//     does an uninstall (delete.release, destroy) of such a release;
//   - atomic: keeps half of the step timeout for the rollback/uninstall;
//   - upgrades never reuse the release's previous values, and keep at most
//     10 revisions;
//   - uninstall (delete.release, destroy) purges the release history and
//     deletes with background propagation, then waits until the objects of
//     the release's manifest are gone (their dependents are left to the
//     garbage collector), bounded by the step timeout.
package helm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	khelm "khook.io/core/helm"
	"khook.io/core/internal/english"
	"khook.io/core/spec"
	"khook.io/core/step"
)

// Options configure the executor. There are none yet; the run's clients
// come with each request.
type Options struct{}

// Executor runs helm: steps. It implements step.Executor, step.Planner,
// step.Destroyer and step.Differ, and the delete executor's ReleaseDeleter
// and ReleaseChecker. It holds no state: one Executor serves parallel steps.
type Executor struct{}

// New returns the helm executor.
func New(Options) *Executor { return &Executor{} }

// Run installs or upgrades the step's release.
func (e *Executor) Run(ctx context.Context, req *step.Request) (out step.Outcome, err error) {
	r, err := releaseOf(req)
	if err != nil {
		return step.Outcome{}, err
	}
	res, err := client(req).Apply(ctx, r)
	if err != nil {
		return step.Outcome{}, err
	}
	subject := fmt.Sprintf("release %s (%s)", r.Name, r.Namespace)
	switch res.Action {
	case khelm.Skipped:
		out.Skipped = true
		out.SkipReason = fmt.Sprintf("skipIf installed: %s exists at %s", subject, res.Previous)
		out.Message = out.SkipReason
	case khelm.Installed:
		out.Changed = true
		out.Message = fmt.Sprintf("installed %s revision %d: chart %s", subject, res.Revision, res.ChartRef)
	case khelm.Upgraded:
		out.Changed = true
		out.Message = fmt.Sprintf("upgraded %s to revision %d: chart %s (was %s)", subject, res.Revision, res.ChartRef, res.Previous)
		if res.Forced {
			out.Message = fmt.Sprintf("upgraded %s to revision %d: chart %s with the same values and objects as %s", subject, res.Revision, res.ChartRef, res.Previous)
		}
	case khelm.Repaired:
		out.Changed = true
		out.Message = fmt.Sprintf("upgraded %s to revision %d with the chart and values of revision %d: chart %s; repaired: %s",
			subject, res.Revision, res.Previous.Revision, res.ChartRef, res.Drift.Summary("re-created"))
	case khelm.Unchanged:
		out.Message = fmt.Sprintf("%s unchanged at revision %d: chart %s with these values is deployed", subject, res.Revision, res.ChartRef)
	}
	if n := len(res.SkippedCRDs); n > 0 {
		names := make([]string, n)
		for i, c := range res.SkippedCRDs {
			names[i] = c.Name + " (" + c.File + ")"
		}
		out.Message += fmt.Sprintf("; skipped %s of the chart's crds/ that exist (helm installs them only when absent): %s", english.CountNoun(n, "CRD"), strings.Join(names, ", "))
	}
	out.Drift, out.Kept = res.Drift.LeftLines(), res.Drift.KeptLines()
	if res.Drift.Left() {
		out.Message += "; drift left as it is (drift mode warn): " + res.Drift.Summary("missing")
	}
	if len(out.Kept) > 0 {
		out.Message += "; " + strings.Join(out.Kept, "; ")
	}
	if len(res.Drift.Unknown) > 0 {
		out.Message += "; not compared with the cluster (may not be read): " + strings.Join(res.Drift.Unknown, ", ")
	}
	if res.Recovered != "" {
		out.Changed = true
		out.Message += "; recovered: " + res.Recovered
	}
	if req.Notes != nil && res.Notes != "" {
		req.Notes(subject, res.Notes)
	}
	return out, nil
}

// warn is the request's Warn as the helm package takes it (nil: none).
func warn(req *step.Request) func(string) {
	if req.Warn == nil {
		return nil
	}
	return func(text string) { req.Warnf("%s", text) }
}

// The helm step's own actions: a release installed, upgraded, or
// repaired (upgraded to a new revision that puts drifted objects back).
var (
	ActionInstall = step.Action{Word: string(khelm.PlanInstall), Changes: true, Drift: true}
	ActionUpgrade = step.Action{Word: string(khelm.PlanUpgrade), Changes: true, Drift: true}
	ActionRepair  = step.Action{Word: string(khelm.PlanRepair), Changes: true, Drift: true}
)

// planActions are the step's actions by what the helm engine predicts.
var planActions = map[khelm.PlanAction]step.Action{
	khelm.PlanInstall: ActionInstall, khelm.PlanUpgrade: ActionUpgrade, khelm.PlanRepair: ActionRepair,
	khelm.PlanNoOp: step.ActionNoOp, khelm.PlanSkip: step.ActionSkip, khelm.PlanUnknown: step.ActionUnknown,
}

// planAction is the step's action of what the helm engine predicts: one
// it names and planActions does not is shown, and changes nothing.
func planAction(a khelm.PlanAction) step.Action {
	if s, ok := planActions[a]; ok {
		return s
	}
	return step.Action{Word: string(a)}
}

// Plan predicts install, upgrade, no-op or skip, or unknown when the chart
// or its values cannot be fetched or the chart does not render. It changes
// nothing.
func (e *Executor) Plan(ctx context.Context, req *step.Request) (pred step.Prediction, err error) {
	r, err := releaseOf(req)
	if err != nil {
		return step.Prediction{}, err
	}
	p, err := client(req).Plan(ctx, r)
	if err != nil {
		return step.Prediction{}, err
	}
	pred = step.Prediction{Action: planAction(p.Action), Reason: p.Reason, Kept: p.Kept, Drift: p.Drift}
	pred.Details = append(pred.Details, fmt.Sprintf("release %s in namespace %s", r.Name, r.Namespace))
	pred.Details = append(pred.Details, p.Details...)
	return pred, nil
}

// Diff is the release's current manifest against the chart rendered by a
// server-side dry-run upgrade (or install), object by object. A pending
// release is unavailable: apply recovers an abandoned one before it
// upgrades, and fails on one another operation may be working on (the
// reason says which).
func (e *Executor) Diff(ctx context.Context, req *step.Request) (d step.Diff, err error) {
	r, err := releaseOf(req)
	if err != nil {
		return step.Diff{}, err
	}
	rd, err := client(req).Diff(ctx, r)
	if err != nil {
		return step.Diff{}, err
	}
	subject := fmt.Sprintf("release %s (%s)", r.Name, r.Namespace)
	switch rd.Action {
	case khelm.PlanSkip:
		d.Skip = rd.Reason
		return d, nil
	case khelm.PlanUnknown:
		return step.Diff{}, &step.UnavailableError{Reason: subject + ": " + rd.Reason}
	case khelm.PlanInstall:
		d.Notes = append(d.Notes, fmt.Sprintf("install %s: chart %s", subject, rd.Target))
		d.Changes = true
	case khelm.PlanUpgrade, khelm.PlanRepair:
		// a new revision even when every object stays the same
		d.Changes = true
	case khelm.PlanNoOp:
		d.Notes = append(d.Notes, fmt.Sprintf("%s unchanged at %s", subject, rd.Current))
	}
	d.Notes = append(d.Notes, rd.Notes...)
	d.Kept, d.Drift = rd.Kept, rd.Drift
	for _, o := range rd.Objects {
		d.Objects = append(d.Objects, step.ObjectDiff{Name: o.Name(), Live: o.Current, Merged: o.Rendered})
	}
	return d, nil
}

// Destroy uninstalls the step's release and waits until its objects are
// gone; an absent release is success.
func (e *Executor) Destroy(ctx context.Context, req *step.Request) (step.Outcome, error) {
	r, err := releaseOf(req)
	if err != nil {
		return step.Outcome{}, err
	}
	var planned *khelm.Planned
	if req.Planned != nil {
		// the plan shown and confirmed: a release changed since is left
		planned, _ = req.Planned.Carry.(*khelm.Planned)
	}
	return e.uninstall(ctx, req, r.Name, r.Namespace, true, planned)
}

// Uninstall is delete.release: it uninstalls release from namespace (the
// request's default namespace when empty), purging its history, and waits
// until its objects are gone, bounded by ctx. An absent release is success
// when ignoreNotFound is set.
func (e *Executor) Uninstall(ctx context.Context, req *step.Request, release, namespace string, ignoreNotFound bool) (out step.Outcome, err error) {
	return e.uninstall(ctx, req, release, namespace, ignoreNotFound, nil)
}

// uninstall is Uninstall of a release as planned says it was (nil: not
// planned: as it is).
func (e *Executor) uninstall(ctx context.Context, req *step.Request, release, namespace string, ignoreNotFound bool, planned *khelm.Planned) (out step.Outcome, err error) {
	ns := req.Namespace(namespace)
	subject := fmt.Sprintf("release %s (%s)", release, ns)
	res, err := client(req).Uninstall(ctx, release, ns, khelm.UninstallOptions{IgnoreNotFound: ignoreNotFound, Timeout: req.Timeout, Run: runOf(req), Planned: planned})
	if errors.Is(err, khelm.ErrReleaseNotFound) {
		return step.Outcome{}, fmt.Errorf("%s not found (set ignoreNotFound: true to accept that)", subject)
	}
	if err != nil {
		return step.Outcome{}, err
	}
	if res.Absent {
		return step.Outcome{Message: subject + " not found: nothing to uninstall"}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "uninstalled %s (was %s)", subject, res.Previous)
	if res.Deleted > 0 {
		fmt.Fprintf(&b, "; %s gone", english.CountNoun(res.Deleted, "object"))
	}
	if res.Kept > 0 {
		fmt.Fprintf(&b, "; %d kept by helm.sh/resource-policy: keep", res.Kept)
	}
	return step.Outcome{Message: b.String(), Changed: true}, nil
}

// ReleaseExists reports whether release exists in namespace (the
// request's default namespace when empty): the delete executor's live plan
// asks it.
func (e *Executor) ReleaseExists(ctx context.Context, req *step.Request, release, namespace string) (bool, error) {
	st, err := client(req).Get(ctx, release, req.Namespace(namespace))
	if err != nil {
		return false, err
	}
	return st != nil && st.Status != "uninstalled", nil
}

func client(req *step.Request) *khelm.Client {
	return khelm.NewClient(khelm.Env{
		Kube:              req.Kube,
		HTTP:              req.HTTP,
		Redactor:          req.Redactor,
		Log:               req.Log,
		BaseDir:           req.BaseDir,
		StepsFieldManager: req.FieldManager,
		FieldManager:      req.FieldManager,
		Warn:              warn(req),
	})
}

// runOf is the request's run, as the helm package takes it.
func runOf(req *step.Request) khelm.Run {
	return khelm.Run{ID: req.Run.ID, Abandoned: req.Run.IsAbandoned, Lock: req.Run.Lock, Enter: req.Run.Ops.Enter}
}

// releaseOf is the step's desired release.
func releaseOf(req *step.Request) (khelm.Release, error) {
	h := spec.BlockOf[Helm](req.Step)
	if h == nil {
		return khelm.Release{}, errors.New("not a helm step")
	}
	r := khelm.Release{
		Name:            h.ReleaseName(req.Step.Name),
		Namespace:       req.Namespace(h.Namespace),
		Source:          khelm.Source{Chart: h.Chart, Repo: h.Repo, Version: h.Version},
		Values:          h.Values,
		CreateNamespace: h.CreateNamespace,
		Atomic:          h.Atomic,
		Wait:            h.Wait,
		SkipIfInstalled: h.SkipIf == SkipIfInstalled,
		Timeout:         req.Timeout,
		Run:             runOf(req),
		Replace:         req.Replace,
	}
	policy, err := req.DriftPolicy(h.Drift)
	if err != nil {
		return khelm.Release{}, err
	}
	r.Drift = policy
	if h.Auth != nil {
		r.Source.Auth = &khelm.Credentials{Username: h.Auth.Username, Password: h.Auth.Password}
	}
	for _, v := range h.ValuesFrom {
		r.ValuesFrom = append(r.ValuesFrom, khelm.ValuesSource{File: v.File, URL: v.URL})
	}
	return r, nil
}

// Interface checks.
var (
	_ step.Executor  = (*Executor)(nil)
	_ step.Planner   = (*Executor)(nil)
	_ step.Destroyer = (*Executor)(nil)
	_ step.Differ    = (*Executor)(nil)
)
