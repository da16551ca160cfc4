package engine

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"khook.io/core/diff"
	"khook.io/core/internal/english"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
)

// StepDiff is what diff found for one step.
type StepDiff struct {
	// Headline follows "=== name (type): ".
	Headline string
	// Details are lines under the headline (notes, planner details,
	// objects that cannot be diffed).
	Details []string
	Objects []ObjectDiff
	// Changes: apply would change something in this step besides the
	// content of its objects; ObjectChanges: an object's content would
	// change (with an external diff program, its exit status decides).
	Changes, ObjectChanges bool
	// Counted is the summary's category (Cat...).
	Counted string
	// Err is why the step could not be diffed.
	Err error
	// Drift are the objects the step finds drifted and leaves as they are
	// (drift mode warn): no difference, but drift (--detailed-exitcode).
	Drift []string
	// raw is a Differ's result, before diffResult prepares it
	raw *step.Diff
}

// ObjectDiff is one object of a step's diff, prepared for display.
type ObjectDiff struct {
	Object step.ObjectDiff
	Pair   diff.Pair
}

// The diff summary's categories of steps, in the order it lists them.
const (
	CatChange       = "would change"
	CatUnchanged    = "unchanged"
	CatUnavailable  = "diff unavailable"
	CatResumed      = "resumed from the state record"
	CatExcluded     = "excluded by when:"
	CatNotSelected  = "not selected"
	CatNotTriggered = "not triggered"
	CatFailed       = "failed"
)

// Categories are the diff summary's categories in order.
var Categories = []string{CatChange, CatUnchanged, CatUnavailable, CatResumed, CatExcluded, CatNotSelected, CatNotTriggered, CatFailed}

// Diff diffs every step of one cluster, a command made from the session
// (NewDiff) in helm's action style, at most Parallelism at once (0: no
// bound), changing nothing: each step as its fate says (a step apply
// skips is not diffed), a conditional step only when a trigger differs. A
// note says when a run holds the record's lock. The result is by step
// index; a step that could not be diffed has its Err (the error is the
// diff's own: an unreadable record, a blocked --no-needs, Ctrl-C).
type Diff struct {
	c *Cluster
	// Parallelism bounds how many steps are diffed at once (0: no bound).
	Parallelism int
}

// NewDiff is the diff of c's cluster.
func NewDiff(c *Cluster) *Diff { return &Diff{c: c} }

// Run diffs: see Diff.
func (df *Diff) Run(ctx context.Context) ([]*StepDiff, error) {
	c, parallelism := df.c, df.Parallelism
	c.noteLock(ctx)
	r, err := c.dispose(ctx, CommandDiff)
	if err != nil {
		return nil, err
	}
	disp := r.disp
	steps := c.doc.Spec.Steps
	results := make([]*StepDiff, len(steps))
	g, gctx := errgroup.WithContext(ctx)
	if parallelism > 0 {
		g.SetLimit(parallelism)
	}
	for _, i := range c.doc.Graph.Order() {
		d := disp[i]
		switch d.Fate {
		case FateExcluded:
			results[i] = &StepDiff{Headline: "skipped: " + d.Reason(c.doc, i), Counted: CatExcluded}
			continue
		case FateNotSelected:
			results[i] = &StepDiff{Headline: "skipped: " + NotSelected, Counted: CatNotSelected}
			continue
		case FateResume:
			results[i] = &StepDiff{Headline: "resumed from the state record (it succeeded before with these inputs), not diffed: apply skips it", Counted: CatResumed}
			continue
		}
		exec, err := c.executor(i)
		if err != nil {
			return nil, err
		}
		g.Go(func() error {
			results[i] = c.diffStep(gctx, i, d, exec)
			return nil // a step's error is its result
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// what every step showed of the cluster is learned before any step's
	// objects are masked: a value khook wrote from a secret before it was
	// rotated shows in other steps too (a patch's object, a wait's value)
	for _, r := range results {
		if r.raw == nil {
			continue
		}
		for _, od := range r.raw.Objects {
			if od.Live != nil && od.Merged != nil {
				diff.Learn(c.red, od.Merged.Object, od.Live.Object)
			}
		}
	}
	for i, r := range results {
		if r.raw != nil {
			results[i] = diffResult(*r.raw, c.red)
		}
	}
	ResolveTriggers(c.doc, disp, func(j int) Change {
		if r := results[j]; r != nil && (r.Changes || r.ObjectChanges) {
			return ChangeSome
		}
		return ChangeNone
	})
	for i, d := range disp {
		switch d.Fate {
		case FateForced:
			results[i].Details = append([]string{d.spell.forcedNote()}, results[i].Details...)
		case FateTriggered:
			results[i].Details = append([]string{d.Reason(c.doc, i)}, results[i].Details...)
		case FateNotTriggered:
			results[i] = &StepDiff{Headline: "skipped: " + d.Reason(c.doc, i), Counted: CatNotTriggered}
		}
	}
	return results, nil
}

// diffStep diffs step i (fate disp) with its executor's Differ, or says
// what its Planner predicts; bounded by the step's timeout.
func (c *Cluster) diffStep(ctx context.Context, i int, disp Disposition, exec step.Executor) *StepDiff {
	ctx, req, cancel := c.stepCall(ctx, i, disp, quiet)
	defer cancel()
	red := c.red
	if d, ok := exec.(step.Differ); ok {
		res, err := step.DiffStep(ctx, d, req)
		var un *step.UnavailableError
		switch {
		case errors.As(err, &un):
			return &StepDiff{Headline: red.String(un.Error()), Changes: true, Counted: CatUnavailable}
		case err != nil:
			return &StepDiff{Headline: "diff failed: " + red.String(err.Error()), Counted: CatFailed, Err: err}
		}
		return &StepDiff{raw: &res}
	}
	if p, ok := exec.(step.Planner); ok {
		pred, err := step.PlanStep(ctx, p, req)
		if err != nil {
			return &StepDiff{Headline: "diff failed: " + red.String(err.Error()), Counted: CatFailed, Err: err}
		}
		return predictionResult(pred, &c.doc.Spec.Steps[i])
	}
	return &StepDiff{Headline: "run (this step type cannot be diffed)", Changes: true, Counted: CatChange}
}

// diffResult prepares a Differ's objects for display.
func diffResult(res step.Diff, red *redact.Redactor) *StepDiff {
	sd := &StepDiff{Changes: res.Changes, Details: res.Notes, Drift: res.Drift}
	if res.Skip != "" {
		sd.Headline, sd.Counted = "skipped: "+res.Skip, CatUnchanged
		return sd
	}
	changed, unavailable := 0, 0
	for _, od := range res.Objects {
		if od.Unavailable != "" {
			unavailable++
			sd.Details = append(sd.Details, od.Name+": diff unavailable: "+od.Unavailable)
			continue
		}
		pair, err := diff.Prepare(od.Live, od.Merged, red)
		if err != nil {
			return &StepDiff{Headline: "diff failed: " + od.Name + ": " + err.Error(), Counted: CatFailed, Err: err}
		}
		sd.Objects = append(sd.Objects, ObjectDiff{Object: od, Pair: pair})
		if pair.Changed() {
			changed++
		}
	}
	n := len(res.Objects)
	switch {
	case changed > 0 && changed == n:
		sd.Headline = english.CountNoun(n, "object") + " would change"
	case changed > 0:
		sd.Headline = fmt.Sprintf("%d of %s would change", changed, english.CountNoun(n, "object"))
	case unavailable == 0 && res.Changes:
		sd.Headline = fmt.Sprintf("no object changes (%s), still a change", english.CountNoun(n, "object"))
	case unavailable == 0:
		sd.Headline = fmt.Sprintf("no changes (%s)", english.CountNoun(n, "object"))
	}
	if unavailable > 0 {
		if sd.Headline != "" {
			sd.Headline += ", "
		}
		sd.Headline += fmt.Sprintf("%d diff unavailable", unavailable)
	}
	sd.ObjectChanges = changed > 0
	sd.Changes = sd.Changes || unavailable > 0
	switch {
	case changed > 0 || res.Changes:
		sd.Counted = CatChange
	case unavailable > 0:
		sd.Counted = CatUnavailable
	default:
		sd.Counted = CatUnchanged
	}
	return sd
}

// predictionResult is the one line of a step without a Differ.
func predictionResult(p step.Prediction, st *spec.Step) *StepDiff {
	sd := &StepDiff{Headline: p.Action.Word, Details: p.Details, Drift: p.Drift}
	if p.Reason != "" {
		sd.Headline += ": " + p.Reason
	}
	switch {
	case p.Action.Unknown:
		sd.Headline = "diff unavailable: " + p.Reason
		// waiting changes nothing, whatever it waits for
		sd.Changes = !st.OnlyWaits()
		sd.Counted = CatUnavailable
	case p.Action.Changes:
		sd.Changes, sd.Counted = true, CatChange
	default: // no-op, skip, wait
		sd.Counted = CatUnchanged
	}
	return sd
}
