package cli

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"khook.io/core/event"
	"khook.io/core/load"
	"khook.io/core/render"
	"khook.io/core/step"
)

// destroyPlan reads what destroy would do on every cluster of the run
// (one, or each of a fleet), changing nothing: the plan destroy shows
// before it asks, and destroy --dry-run prints. A cluster that cannot be
// reached is in the plan with its error.
func (o *RunOptions) destroyPlan(ctx context.Context) (render.DestroyPlanView, error) {
	type target struct {
		context string
		connect func() (*session, error)
	}
	var (
		targets []target
		doc     *load.Document
	)
	if o.Fleet.enabled() {
		members, err := loadFleet(o.Clusters, &o.Fleet, o.Spec)
		if err != nil {
			return render.DestroyPlanView{}, err
		}
		doc = members[0].doc
		for _, m := range members {
			targets = append(targets, target{context: m.context, connect: func() (*session, error) {
				return o.Clusters.newSession(ctx, m.doc, m.getter, &linePrefixer{w: o.Streams.ErrOut, prefix: m.context + ": "})
			}})
		}
	} else {
		d, err := o.Spec.Load()
		if err != nil {
			return render.DestroyPlanView{}, err
		}
		doc = d
		targets = append(targets, target{connect: func() (*session, error) { return o.Clusters.connect(ctx, d) }})
	}
	v := render.DestroyPlanView{Spec: doc.Spec.Metadata.Name, Clusters: make([]render.DestroyCluster, len(targets))}
	var g errgroup.Group
	if p := o.Fleet.Parallelism; p > 0 {
		g.SetLimit(p)
	}
	for i, t := range targets {
		g.Go(func() error {
			c := &v.Clusters[i]
			c.Context = t.context
			s, err := t.connect()
			if err != nil {
				if !o.Fleet.enabled() {
					return err
				}
				c.Err = o.Redactor.String(err.Error())
				return nil
			}
			if s.sel, err = o.Select.resolve(s.doc, o.Command); err != nil {
				return err
			}
			c.Context, c.Server = s.clients.Identity.Context, s.clients.Server
			if c.Context == "" {
				c.Context = t.context
			}
			c.Steps, err = s.planDestroy(ctx, o.Destroy.ForceCRDs)
			if err != nil && ctx.Err() != nil {
				return err
			}
			return nil
		})
	}
	err := g.Wait()
	return v, err
}

// planDestroy is one cluster's destroy plan, step by step in destroy's
// order. A step whose objects cannot be read says why (its objects are
// unknown); the other steps are still planned.
func (s *session) planDestroy(ctx context.Context, forceCRDs bool) ([]render.DestroyStep, error) {
	var out []render.DestroyStep
	var errs []error
	for _, i := range s.doc.Graph.Reverse() {
		st := &s.doc.Spec.Steps[i]
		ds := render.DestroyStep{Name: st.Name, Type: st.Type()}
		exec, err := s.executor(i)
		if err != nil {
			return nil, err
		}
		d, destroys := exec.(step.Destroyer)
		switch {
		case s.sel != nil && !s.sel.in[i]:
			ds.Note = "skipped: " + NotSelected
		case !s.doc.Included(i):
			ds.Note = "skipped: when: " + st.When + " is false"
		case !destroys:
			ds.Note = fmt.Sprintf("left alone: destroy leaves %s steps alone", st.Type())
		default:
			p, ok := d.(step.DestroyPlanner)
			if !ok {
				ds.Note = "undone"
				break
			}
			timeout := s.settings(i).Timeout.Duration()
			sctx, cancel := context.WithTimeout(ctx, timeout)
			req := s.request(i, 1, timeout, event.Discard)
			req.ForceCRDs = forceCRDs
			plan, err := p.PlanDestroy(sctx, req)
			cancel()
			for _, it := range plan.Items {
				do := render.DestroyObject{Object: it.Object, Action: it.Action, Reason: it.Reason}
				for _, f := range it.Fields {
					do.Fields = append(do.Fields, render.DestroyField{Path: f.Path, Outcome: f.Outcome, Value: f.Value, Reason: f.Reason})
				}
				ds.Items = append(ds.Items, do)
			}
			if err != nil {
				errs = append(errs, err)
				if len(ds.Items) == 0 {
					ds.Note = "unknown: " + s.red.String(err.Error())
				}
			}
		}
		out = append(out, ds)
	}
	return out, errors.Join(errs...)
}
