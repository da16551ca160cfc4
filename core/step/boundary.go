package step

import "context"

// The engine calls an executor only through these: each masks, with the
// request's redactor, everything the executor returns (its outcome, its
// prediction, its diff, its destroy plan, its error), in one place, so
// that a kind masks nothing itself and one that forgets cannot leak
// (decision 287). What an executor reports while it works goes through
// the request's Log, Warn and Notes, which the engine masks.

// RunStep is e's Run of req, masked.
func RunStep(ctx context.Context, e Executor, req *Request) (out Outcome, err error) {
	out, err = e.Run(ctx, req)
	req.redactOutcome(&out, &err)
	return out, err
}

// DestroyStep is d's Destroy of req, masked.
func DestroyStep(ctx context.Context, d Destroyer, req *Request) (out Outcome, err error) {
	out, err = d.Destroy(ctx, req)
	req.redactOutcome(&out, &err)
	return out, err
}

// PlanStep is p's Plan of req, masked: a failed plan returns no
// prediction.
func PlanStep(ctx context.Context, p Planner, req *Request) (pred Prediction, err error) {
	pred, err = p.Plan(ctx, req)
	req.redactPrediction(&pred, &err)
	return pred, err
}

// DiffStep is d's Diff of req, masked (an *UnavailableError's reason
// too): a failed diff returns no objects. The objects' content is masked
// where it is shown (diff.Prepare).
func DiffStep(ctx context.Context, d Differ, req *Request) (res Diff, err error) {
	res, err = d.Diff(ctx, req)
	req.redactDiff(&res, &err)
	return res, err
}

// PlanDestroyStep is p's PlanDestroy of req, masked; the plan's Carry
// is the executor's own and is not shown.
func PlanDestroyStep(ctx context.Context, p DestroyPlanner, req *Request) (plan DestroyPlan, err error) {
	plan, err = p.PlanDestroy(ctx, req)
	req.redactDestroyPlan(&plan, &err)
	return plan, err
}
