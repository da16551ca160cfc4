package cli

import (
	"context"

	"golang.org/x/sync/errgroup"

	"khook.io/core/event"
	"khook.io/core/plan"
	"khook.io/core/step"
)

// planParallelism caps how many steps are assessed at once.
const planParallelism = 8

// livePlan refines the offline plan with each executor's prediction,
// assessing steps in parallel. Planners only read the cluster; a step whose
// executor has none keeps the offline action (run).
func (s *session) livePlan(ctx context.Context) *plan.Plan {
	p := s.doc.OfflinePlan()
	p.Mode = plan.ModeLive
	s.sink = event.Discard
	preds := make([]*step.Prediction, len(s.doc.Spec.Steps))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(planParallelism)
	for i := range s.doc.Spec.Steps {
		if !s.doc.Included(i) {
			continue
		}
		exec, ok := s.registry.Get(s.doc.Spec.Steps[i].Type())
		planner, canPlan := exec.(step.Planner)
		if !ok || !canPlan {
			continue
		}
		g.Go(func() error {
			timeout := s.settings(i).Timeout.Duration()
			pctx, cancel := context.WithTimeout(gctx, timeout)
			defer cancel()
			pred, err := planner.Plan(pctx, s.request(i, 1, timeout, s.sink))
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
		ps := &p.Steps[byName[s.doc.Spec.Steps[i].Name]]
		ps.Action, ps.Reason, ps.Details = pred.Action, pred.Reason, pred.Details
	}
	return p
}
