package engine

import (
	"context"

	"golang.org/x/sync/errgroup"

	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/state"
	"khook.io/core/step"
)

// planParallelism caps how many steps are assessed at once.
const planParallelism = 8

// PlanResult is a plan with the fate of each step it shows.
type PlanResult struct {
	Plan *plan.Plan
	// Dispositions are the steps' fates, by step index (as apply will
	// decide them: the same Dispose, on the same record).
	Dispositions []Disposition
	// Status is the state record compared with the spec (a live plan of
	// a spec with a state: block whose record exists; else nil).
	Status *state.Status
	// Actions are the steps' actions as the plan shows them, by step
	// index: what their kinds declare of them (whether they change the
	// cluster, are drift), read instead of the words.
	Actions []step.Action
	// index is each step's index, by name
	index map[string]int
}

// Skips reports whether the plan skips the step named name: its fate
// does (a when: exclusion, a step left out, resumed or not triggered),
// or its kind predicts step.ActionSkip.
func (r *PlanResult) Skips(name string) bool {
	i, ok := r.index[name]
	return ok && r.Actions[i] == step.ActionSkip
}

// newPlanResult is the plan p of doc with its steps' fates and actions.
func newPlanResult(doc *load.Document, p *plan.Plan, disp []Disposition, acts []step.Action) *PlanResult {
	index := make(map[string]int, len(doc.Spec.Steps))
	for i := range doc.Spec.Steps {
		index[doc.Spec.Steps[i].Name] = i
	}
	return &PlanResult{Plan: p, Dispositions: disp, Actions: acts, index: index}
}

// OfflinePlan is doc's plan from the spec alone, with the selection's
// fates (sel nil: every step); reg, when set, names what each step's
// input hash cannot see. --no-needs missing a need is refused only
// without a record (with one, the record could show it done).
func OfflinePlan(doc *load.Document, sel *Selection, reg *step.Registry) (*PlanResult, error) {
	p := doc.OfflinePlan()
	disp := Dispose(doc, CommandPlan, sel, Facts{})
	if err := CheckBlocked(doc, disp); err != nil {
		return nil, err
	}
	acts := offlineActions(doc)
	applyFates(doc, p, disp, acts)
	markHashCannotSee(p, doc, reg)
	return newPlanResult(doc, p, disp, acts), nil
}

// offlineActions are the offline plan's actions, by step index: run, or
// skip for a step its when: excludes.
func offlineActions(doc *load.Document) []step.Action {
	acts := make([]step.Action, len(doc.Spec.Steps))
	for i := range acts {
		acts[i] = step.ActionRun
		if !doc.Included(i) {
			acts[i] = step.ActionSkip
		}
	}
	return acts
}

// Plan is the live plan of one cluster, a command made from the session
// (NewPlan) in helm's action style: the state record is read
// (without writing it or taking the lock) and each step gets the fate
// apply will give it; the executor of every step apply runs or may run
// predicts its action, reading the cluster only, conditional steps
// predicted from their triggers' dry runs. A step apply skips (resumed
// from the record, not selected) is planned from the record, as apply
// skips it: no request (Fate.Predicted). A note says when a run holds the
// record's lock.
type Plan struct{ c *Cluster }

// NewPlan is the live plan of c's cluster.
func NewPlan(c *Cluster) *Plan { return &Plan{c: c} }

// Run plans: see Plan.
func (pl *Plan) Run(ctx context.Context) (*PlanResult, error) {
	c := pl.c
	c.noteLock(ctx)
	r, err := c.dispose(ctx, CommandPlan)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &StoppedError{Cause: context.Cause(ctx)}
		}
		return nil, err
	}
	disp := r.disp
	// a step the run skips (resumed, not selected) is planned from the
	// record: no request
	p, acts := c.livePlan(ctx, disp)
	if ctx.Err() != nil {
		return nil, &StoppedError{Cause: context.Cause(ctx)}
	}
	dry := c.dryRunTriggers(ctx, disp)
	ResolveTriggers(c.doc, disp, func(j int) Change {
		if changes, ok := dry[j]; ok {
			if changes {
				return ChangeSome
			}
			return ChangeNone
		}
		switch a := acts[j]; {
		case a.Changes:
			return ChangeSome
		case a.Unknown:
			return ChangeUnknown
		}
		return ChangeNone
	})
	applyFates(c.doc, p, disp, acts)
	markHashCannotSee(p, c.doc, c.registry)
	res := newPlanResult(c.doc, p, disp, acts)
	if r.rec != nil {
		res.Status = c.compare(r.rec, r.ins, r.resumed)
	}
	return res, nil
}

// applyFates gives each step of p the fate disp decided: a skipped step
// is skip with its reason (a step when: excludes is already), a forced,
// triggered or conditional one keeps its action with the reason. acts,
// the steps' actions by index, follow.
func applyFates(doc *load.Document, p *plan.Plan, disp []Disposition, acts []step.Action) {
	for k := range p.Steps {
		ps := &p.Steps[k]
		i, ok := doc.Graph.Index(ps.Name)
		if !ok {
			continue
		}
		d := disp[i]
		switch d.Fate {
		case FateNotSelected, FateResume, FateNotTriggered:
			acts[i] = step.ActionSkip
			ps.Action, ps.Reason, ps.Details, ps.Drift, ps.Kept = acts[i].Word, d.Reason(doc, i), nil, nil, nil
		case FateForced, FateTriggered, FateConditional:
			ps.Reason = d.Reason(doc, i)
		}
	}
}

// livePlan refines the offline plan with each executor's prediction,
// assessing steps in parallel, and returns the steps' actions by index.
// Planners only read the cluster; a step whose executor has none keeps
// the offline action (run).
func (c *Cluster) livePlan(ctx context.Context, disp []Disposition) (*plan.Plan, []step.Action) {
	p := c.doc.OfflinePlan()
	acts := offlineActions(c.doc)
	p.Mode = plan.ModeLive
	preds := make([]*step.Prediction, len(c.doc.Spec.Steps))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(planParallelism)
	for i := range c.doc.Spec.Steps {
		if !disp[i].Fate.Predicted() {
			continue
		}
		exec, ok := c.registry.Get(c.doc.Spec.Steps[i].Type())
		planner, canPlan := exec.(step.Planner)
		if !ok || !canPlan {
			continue
		}
		g.Go(func() error {
			pctx, req, cancel := c.stepCall(gctx, i, disp[i], quiet)
			defer cancel()
			pred, err := step.PlanStep(pctx, planner, req)
			if err != nil {
				pred = step.Prediction{Action: step.ActionUnknown, Reason: err.Error()}
			}
			preds[i] = &pred
			return nil
		})
	}
	_ = g.Wait() // planners report their errors as unknown predictions
	byName := make(map[string]int, len(p.Steps))
	for k, ps := range p.Steps {
		byName[ps.Name] = k
	}
	for i, pred := range preds {
		if pred == nil {
			continue
		}
		ps := &p.Steps[byName[c.doc.Spec.Steps[i].Name]]
		acts[i] = pred.Action
		ps.Action, ps.Reason, ps.Details = pred.Action.Word, pred.Reason, pred.Details
		ps.Drift, ps.Kept = pred.Drift, pred.Kept
	}
	return p, acts
}

// dryRunTriggers diffs each step some conditional step is triggered by
// (a server-side dry run, as diff does), so that the plan predicts
// whether it changes anything: a live plan's configure does not say.
// A trigger apply skips (as ResolveTriggers reads it) is not diffed, nor
// one whose diff fails (its plan action decides).
func (c *Cluster) dryRunTriggers(ctx context.Context, disp []Disposition) map[int]bool {
	out := map[int]bool{}
	for i := range disp {
		if disp[i].Fate != FateConditional {
			continue
		}
		for _, j := range disp[i].Triggers {
			if _, done := out[j]; done || disp[j].Fate.Skipped() || disp[j].Fate == FateBlocked {
				continue
			}
			exec, err := c.executor(j)
			if err != nil {
				continue
			}
			d := c.diffStep(ctx, j, disp[j], exec)
			if d.raw != nil {
				d = diffResult(*d.raw, c.red)
			}
			if d.Counted != CatFailed {
				out[j] = d.Changes || d.ObjectChanges
			}
		}
	}
	return out
}
