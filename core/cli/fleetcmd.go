package cli

import (
	"context"
	"io"
	"slices"

	"khook.io/core/engine"
	"khook.io/core/engine/fleet"
	"khook.io/core/plan"
	"khook.io/core/render"
	"khook.io/core/state"
)

// runFleet plans every cluster of the fleet: live (or offline with
// --offline), each with its own variables.
func (o *PlanOptions) runFleet(ctx context.Context) error {
	members, err := loadFleet(o.Clusters, &o.Fleet, o.Spec)
	if err != nil {
		return err
	}
	structured := o.Output != "text"
	plans := make([]*plan.Plan, len(members))
	outs := forEachMember(ctx, o.Streams, o.Redactor, members, o.Fleet.Parallelism, !structured, func(ctx context.Context, i int, m *fleet.Member, out, errOut io.Writer) error {
		p, err := o.plan(ctx, m.Doc, target(m.Getter, memberOut(o.Streams.ErrOut, m), errOut), errOut)
		if plans[i] = p; err != nil || structured {
			return err
		}
		return render.PlanText(out, p)
	})
	if structured {
		fr := fleetResults(o.Redactor.String, members, outs, func(i int, r *render.ClusterResult) { r.Plan = plans[i] })
		if err := o.print(o.Streams.Out, fr); err != nil {
			return err
		}
	}
	if err := fleetError(members, outs, ExitFailed); err != nil {
		return err
	}
	return driftExit(o.DetailedExitCode, slices.ContainsFunc(plans, (*plan.Plan).Drifted))
}

// runFleet diffs every cluster of the fleet; the exit code is the worst
// of theirs (an error, then differences).
func (o *DiffOptions) runFleet(ctx context.Context) error {
	members, err := loadFleet(o.Clusters, &o.Fleet, o.Spec)
	if err != nil {
		return err
	}
	differs := make([]bool, len(members))
	outs := forEachMember(ctx, o.Streams, o.Redactor, members, o.Fleet.Parallelism, true, func(ctx context.Context, i int, m *fleet.Member, out, errOut io.Writer) error {
		var err error
		differs[i], err = o.diff(ctx, m.Doc, target(m.Getter, memberOut(o.Streams.ErrOut, m), errOut), out, errOut)
		return err
	})
	var differ []string
	for i, m := range members {
		if differs[i] {
			differ = append(differ, m.Context)
		}
	}
	if err := fleetError(members, outs, ExitDiffError); err != nil {
		render.FleetDiff(o.Streams.Out, len(members), differ, err.Error())
		return err
	}
	render.FleetDiff(o.Streams.Out, len(members), differ, "")
	if len(differ) > 0 {
		return &ExitError{Code: ExitFailed, Silent: true}
	}
	for _, out := range outs {
		if exitCode(out.err, ExitOK) == ExitDrift {
			return out.err
		}
	}
	return nil
}

// runFleet shows the state record of every cluster of the fleet.
func (o *StatusOptions) runFleet(ctx context.Context) error {
	members, err := loadFleet(o.Clusters, &o.Fleet, o.Spec)
	if err != nil {
		return err
	}
	if err := fleet.Check(members, engine.NeedsState); err != nil {
		return err
	}
	structured := o.Output == "json"
	statuses := make([]*state.Status, len(members))
	outs := forEachMember(ctx, o.Streams, o.Redactor, members, o.Fleet.Parallelism, !structured, func(ctx context.Context, i int, m *fleet.Member, out, errOut io.Writer) error {
		var err error
		if statuses[i], err = o.status(ctx, m.Doc, target(m.Getter, memberOut(o.Streams.ErrOut, m), errOut)); err != nil || structured {
			return err
		}
		return o.print(statuses[i], m.Doc, out)
	})
	if structured {
		fr := fleetResults(o.Redactor.String, members, outs, func(i int, r *render.ClusterResult) {
			if outs[i].err == nil {
				sr := render.NewStatusReport(statuses[i])
				r.Status = &sr
			}
		})
		if err := render.JSON(o.Streams.Out, fr); err != nil {
			return err
		}
	}
	return fleetError(members, outs, ExitFailed)
}

// fleetResults is the structured output of a fleet command: each
// cluster's context and error, and what result sets.
func fleetResults(redact func(string) string, members []*fleet.Member, outs []*memberOutput, result func(i int, r *render.ClusterResult)) render.FleetResults {
	fr := render.FleetResults{Clusters: make([]render.ClusterResult, len(members))}
	for i, m := range members {
		fr.Clusters[i] = render.ClusterResult{Context: m.Context}
		if err := outs[i].err; err != nil {
			fr.Clusters[i].Error = redact(err.Error())
		}
		result(i, &fr.Clusters[i])
	}
	return fr
}
