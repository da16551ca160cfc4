package engine

import (
	"context"
	"errors"
	"fmt"

	"khook.io/core/event"
	"khook.io/core/step"
)

// DestroyStep is one step of a destroy plan: its objects (or release, or
// Job), or Note when destroy leaves the step alone or cannot say more.
type DestroyStep struct {
	Name, Type, Note string
	Items            []DestroyObject
}

// DestroyObject is one object of a destroy plan: Action is what destroy
// does with it, as the step's kind declares it (step.DestroyDelete,
// DestroyRevert, ...: its word, how the plan's headline counts it), Reason
// why; Fields, for an object destroy reverts, what becomes of each field
// khook wrote on it.
type DestroyObject struct {
	Object string
	Action step.DestroyAction
	Reason string
	Fields []DestroyField
}

// DestroyField is one field of a reverted object: Outcome is restore
// (back to Value), remove (Value: what the server sets instead, if
// anything), stay (another writer changed or shares it), lost (khook
// cannot give it back) or same (khook did not change it: counted, not
// listed).
type DestroyField struct {
	Path, Outcome, Value, Reason string
}

// DestroyPlan is what the run of destroy will do, step by step in
// destroy's order, changing nothing: what each step deletes, reverts or
// leaves, and why. It reads the fates the run will follow (taken with the
// lock held) and keeps each step's plan for Execute to carry out as it
// was read (decision 261): what it shows is what Execute runs, and an
// object changed in between is refused, not planned again. A step whose
// objects cannot be read says why (its objects are unknown); the other
// steps are still planned, and the error joins what could not be read.
func (r *Run) DestroyPlan(ctx context.Context) ([]DestroyStep, error) {
	if r.command != CommandDestroy {
		return nil, fmt.Errorf("a destroy plan of a run of %s", r.command)
	}
	c := r.c
	var out []DestroyStep
	var errs []error
	for _, i := range r.order {
		st := &c.doc.Spec.Steps[i]
		ds := DestroyStep{Name: st.Name, Type: st.Type()}
		d := r.disp[i]
		switch d.Fate {
		case FateNotSelected, FateExcluded:
			ds.Note = "skipped: " + d.Reason(c.doc, i)
		case FateLeftAlone:
			ds.Note = fmt.Sprintf("left alone: destroy leaves %s steps alone", st.Type())
		default:
			exec, err := c.executor(i)
			if err != nil {
				return nil, err
			}
			p, ok := exec.(step.DestroyPlanner)
			if !ok {
				ds.Note = "undone"
				break
			}
			sctx, req, cancel := c.stepCall(ctx, i, d, call{sink: event.Discard, run: r.id})
			plan, err := step.PlanDestroyStep(sctx, p, req)
			cancel()
			if r.planned != nil && ctx.Err() == nil {
				r.planned[i] = &plan
			}
			for _, it := range plan.Items {
				do := DestroyObject{Object: it.Object, Action: it.Action, Reason: it.Reason}
				for _, f := range it.Fields {
					do.Fields = append(do.Fields, DestroyField{Path: f.Path, Outcome: f.Outcome, Value: f.Value, Reason: f.Reason})
				}
				ds.Items = append(ds.Items, do)
			}
			if err != nil {
				errs = append(errs, err)
				if len(ds.Items) == 0 {
					ds.Note = "unknown: " + c.red.String(err.Error())
				}
			}
		}
		out = append(out, ds)
	}
	return out, errors.Join(errs...)
}

// PreviewDestroy is the destroy plan of the cluster without a run: the
// fates destroy would decide (they depend on the spec, the selection and
// the executors, not on the record), read without the lock (destroy
// --dry-run, which changes nothing and, as plan, takes no lock).
func (c *Cluster) PreviewDestroy(ctx context.Context) ([]DestroyStep, error) {
	r := &Run{c: c, command: CommandDestroy, order: c.doc.Graph.Reverse(), undoes: make([]bool, len(c.doc.Spec.Steps))}
	for i := range r.undoes {
		exec, err := c.executor(i)
		if err != nil {
			return nil, err
		}
		_, r.undoes[i] = exec.(step.Destroyer)
	}
	r.disp = Dispose(c.doc, CommandDestroy, c.opts.Selection, Facts{Undoes: r.undoes})
	return r.DestroyPlan(ctx)
}
