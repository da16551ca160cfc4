package engine

import (
	"context"

	"golang.org/x/sync/errgroup"

	"khook.io/core/event"
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
	applyFates(doc, p, disp)
	markHashCannotSee(p, doc, reg)
	return &PlanResult{Plan: p, Dispositions: disp}, nil
}

// Plan is the live plan of the cluster: the state record is read
// (without writing it or taking the lock) and each step gets the fate
// apply will give it; the executor of every step apply runs or may run
// predicts its action, reading the cluster only, conditional steps
// predicted from their triggers' dry runs. A step apply skips (resumed
// from the record, not selected) is planned from the record, as apply
// skips it: no request (Fate.Predicted). A note says when a run holds the
// record's lock.
func (c *Cluster) Plan(ctx context.Context) (*PlanResult, error) {
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
	p := c.livePlan(ctx, disp)
	if ctx.Err() != nil {
		return nil, &StoppedError{Cause: context.Cause(ctx)}
	}
	dry := c.dryRunTriggers(ctx, disp)
	byName := make(map[string]*plan.Step, len(p.Steps))
	for k := range p.Steps {
		byName[p.Steps[k].Name] = &p.Steps[k]
	}
	ResolveTriggers(c.doc, disp, func(j int) Change {
		name := c.doc.Spec.Steps[j].Name
		if changes, ok := dry[j]; ok {
			if changes {
				return ChangeSome
			}
			return ChangeNone
		}
		switch t := byName[name]; {
		case t == nil, t.Action == plan.ActionSkip:
			return ChangeNone
		case ChangingAction(t.Action):
			return ChangeSome
		case t.Action == plan.ActionUnknown:
			return ChangeUnknown
		}
		return ChangeNone
	})
	applyFates(c.doc, p, disp)
	markHashCannotSee(p, c.doc, c.registry)
	res := &PlanResult{Plan: p, Dispositions: disp}
	if r.rec != nil {
		res.Status = c.compare(r.rec, r.ins, r.resumed)
	}
	return res, nil
}

// applyFates gives each step of p the fate disp decided: a skipped step
// is skip with its reason (a step when: excludes is already), a forced,
// triggered or conditional one keeps its action with the reason.
func applyFates(doc *load.Document, p *plan.Plan, disp []Disposition) {
	for k := range p.Steps {
		ps := &p.Steps[k]
		i, ok := doc.Graph.Index(ps.Name)
		if !ok {
			continue
		}
		d := disp[i]
		switch d.Fate {
		case FateNotSelected, FateResume, FateNotTriggered:
			ps.Action, ps.Reason, ps.Details, ps.Drift, ps.Kept = plan.ActionSkip, d.Reason(doc, i), nil, nil, nil
		case FateForced, FateTriggered, FateConditional:
			ps.Reason = d.Reason(doc, i)
		}
	}
}

// actionChanges are the live-plan actions that change the cluster.
var actionChanges = map[string]bool{
	"create": true, "configure": true, "delete": true, "restart": true, "run": true,
	"install": true, "upgrade": true, "patch": true, "repair": true,
}

// ChangingAction reports whether a live plan's action changes the
// cluster.
func ChangingAction(a string) bool { return actionChanges[a] }

// livePlan refines the offline plan with each executor's prediction,
// assessing steps in parallel. Planners only read the cluster; a step whose
// executor has none keeps the offline action (run).
func (c *Cluster) livePlan(ctx context.Context, disp []Disposition) *plan.Plan {
	p := c.doc.OfflinePlan()
	p.Mode = plan.ModeLive
	c.sink = event.Discard
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
			pctx, req, cancel := c.stepCall(gctx, i, disp[i], c.sink)
			defer cancel()
			pred, err := planner.Plan(pctx, req)
			if err != nil {
				pred = step.Prediction{Action: plan.ActionUnknown, Reason: err.Error()}
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
		ps.Action, ps.Reason, ps.Details = pred.Action, pred.Reason, pred.Details
		ps.Drift, ps.Kept = pred.Drift, pred.Kept
	}
	return p
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
