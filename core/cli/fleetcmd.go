package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/sync/errgroup"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/internal/english"
	"khook.io/core/plan"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/state"
)

// memberOutput is what one cluster of a fleet printed, and its error.
type memberOutput struct {
	out, errOut bytes.Buffer
	err         error
}

// silent reports whether err was already said in the output (diff's
// "there are differences").
func silent(err error) bool {
	var ee *ExitError
	return errors.As(err, &ee) && ee.Silent
}

// forEachMember runs fn on every cluster of a fleet, at most parallelism
// at once (0: no bound), each printing into buffers of its own, never
// interleaved. With sections, each cluster's output is printed under a
// "==> context NAME <==" line (its error, if any, last), in the fleet's
// order, as soon as it and the clusters before it are done. A cluster
// whose turn comes after Ctrl-C does not run.
func forEachMember(ctx context.Context, streams genericiooptions.IOStreams, red *redact.Redactor, members []*member, parallelism int, sections bool,
	fn func(ctx context.Context, i int, m *member, out, errOut io.Writer) error) []*memberOutput {
	outs := make([]*memberOutput, len(members))
	done := make([]chan struct{}, len(members))
	for i := range members {
		outs[i], done[i] = &memberOutput{}, make(chan struct{})
	}
	go func() {
		var g errgroup.Group
		if parallelism > 0 {
			g.SetLimit(parallelism)
		}
		for i, m := range members {
			g.Go(func() error {
				defer close(done[i])
				if ctx.Err() != nil {
					outs[i].err = errors.New(fleetInterrupted)
					return nil
				}
				outs[i].err = fn(ctx, i, m, &outs[i].out, &outs[i].errOut)
				return nil
			})
		}
		_ = g.Wait()
	}()
	for i, m := range members {
		<-done[i]
		if !sections {
			continue
		}
		if i > 0 {
			fmt.Fprintln(streams.Out)
		}
		fmt.Fprintf(streams.Out, "==> context %s <==\n", m.context)
		_, _ = streams.Out.Write(outs[i].out.Bytes())
		_, _ = streams.ErrOut.Write(outs[i].errOut.Bytes())
		if err := outs[i].err; err != nil && !silent(err) {
			fmt.Fprintf(streams.Out, "Error: %s\n", red.String(err.Error()))
		}
	}
	return outs
}

// fleetError is the error of a fleet command whose clusters failed (code
// is the exit code), or nil.
func fleetError(members []*member, outs []*memberOutput, code int) error {
	var failed []string
	for i, o := range outs {
		if o.err != nil && !silent(o.err) {
			failed = append(failed, members[i].context)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &ExitError{Code: code, Err: fmt.Errorf("%d of %d clusters failed: %s", len(failed), len(members), strings.Join(failed, ", "))}
}

// errorText is err's text for a report, redacted; "" for nil.
func errorText(red *redact.Redactor, err error) string {
	if err == nil {
		return ""
	}
	return red.String(err.Error())
}

// ---- plan ----

// fleetPlan is plan --contexts -o json (or yaml).
type fleetPlan struct {
	Clusters []clusterPlan `json:"clusters"`
}

type clusterPlan struct {
	Context string     `json:"context"`
	Plan    *plan.Plan `json:"plan,omitempty"`
	Error   string     `json:"error,omitempty"`
}

// runFleet plans every cluster of the fleet: live (or offline with
// --offline), each with its own variables.
func (o *PlanOptions) runFleet(ctx context.Context) error {
	members, err := loadFleet(o.Clusters, &o.Fleet, o.Spec)
	if err != nil {
		return err
	}
	structured := o.Output != "text"
	plans := make([]*plan.Plan, len(members))
	outs := forEachMember(ctx, o.Streams, o.Redactor, members, o.Fleet.Parallelism, !structured, func(ctx context.Context, i int, m *member, out, errOut io.Writer) error {
		sel, err := o.Select.resolve(m.doc, "plan")
		if err != nil {
			return err
		}
		sel.warn(errOut)
		p, err := offlinePlan(m.doc, sel)
		if err != nil {
			return err
		}
		if !o.Offline {
			s, err := o.Clusters.newSession(ctx, m.doc, m.getter, &linePrefixer{w: o.Streams.ErrOut, prefix: m.context + ": "})
			if err != nil {
				return err
			}
			s.sel = sel
			if p = s.livePlan(ctx); ctx.Err() != nil {
				return fmt.Errorf("plan stopped (%v) before every step was assessed", context.Cause(ctx))
			}
			if err := s.planRecord(ctx, p); err != nil {
				return err
			}
		}
		markHashCannotSee(p, m.doc, o.Clusters)
		plans[i] = p
		if structured {
			return nil
		}
		return render.PlanText(out, p)
	})
	if structured {
		fp := fleetPlan{Clusters: make([]clusterPlan, len(members))}
		for i, m := range members {
			fp.Clusters[i] = clusterPlan{Context: m.context, Plan: plans[i], Error: errorText(o.Redactor, outs[i].err)}
		}
		var err error
		if o.Output == "yaml" {
			err = render.YAML(o.Streams.Out, fp)
		} else {
			err = render.JSON(o.Streams.Out, fp)
		}
		if err != nil {
			return err
		}
	}
	return fleetError(members, outs, ExitFailed)
}

// ---- diff ----

// runFleet diffs every cluster of the fleet; the exit code is the worst
// of theirs (an error, then differences).
func (o *DiffOptions) runFleet(ctx context.Context) error {
	members, err := loadFleet(o.Clusters, &o.Fleet, o.Spec)
	if err != nil {
		return err
	}
	differs := make([]bool, len(members))
	outs := forEachMember(ctx, o.Streams, o.Redactor, members, o.Fleet.Parallelism, true, func(ctx context.Context, i int, m *member, out, errOut io.Writer) error {
		s, err := o.Clusters.newSession(ctx, m.doc, m.getter, &linePrefixer{w: o.Streams.ErrOut, prefix: m.context + ": "})
		if err != nil {
			return err
		}
		if err := s.bindSelection(&o.Select, "diff", errOut); err != nil {
			return err
		}
		s.fieldManager = o.FieldManager
		differs[i], err = o.diff(ctx, s, out, errOut)
		return err
	})
	var differ []string
	for i, m := range members {
		if differs[i] {
			differ = append(differ, m.context)
		}
	}
	line := fmt.Sprintf("\nNo differences on %s", english.CountNoun(len(members), "cluster"))
	if len(differ) > 0 {
		line = fmt.Sprintf("\nDifferences on %d of %s: %s", len(differ), english.CountNoun(len(members), "cluster"), strings.Join(differ, ", "))
	}
	if err := fleetError(members, outs, ExitDiffError); err != nil {
		fmt.Fprintf(o.Streams.Out, "%s; %s.\n", line, err)
		return err
	}
	fmt.Fprintln(o.Streams.Out, line+".")
	if len(differ) > 0 {
		return &ExitError{Code: ExitFailed, Silent: true}
	}
	return nil
}

// ---- status ----

// fleetStatus is status --contexts -o json.
type fleetStatus struct {
	Clusters []clusterStatus `json:"clusters"`
}

type clusterStatus struct {
	Context string               `json:"context"`
	Status  *render.StatusReport `json:"status,omitempty"`
	Error   string               `json:"error,omitempty"`
}

// runFleet shows the state record of every cluster of the fleet.
func (o *StatusOptions) runFleet(ctx context.Context) error {
	members, err := loadFleet(o.Clusters, &o.Fleet, o.Spec)
	if err != nil {
		return err
	}
	var problems []ContextProblem
	for _, m := range members {
		if err := needsState(m.doc); err != nil {
			problems = append(problems, ContextProblem{Context: m.context, Err: err})
		}
	}
	if len(problems) > 0 {
		return &ExitError{Code: ExitInvalid, Err: &FleetInvalidError{Contexts: len(members), Problems: problems}}
	}
	structured := o.Output == "json"
	statuses := make([]*state.Status, len(members))
	outs := forEachMember(ctx, o.Streams, o.Redactor, members, o.Fleet.Parallelism, !structured, func(ctx context.Context, i int, m *member, out, _ io.Writer) error {
		clients, err := o.Clusters.clientsFor(ctx, m.getter, &linePrefixer{w: o.Streams.ErrOut, prefix: m.context + ": "})
		if err != nil {
			return err
		}
		if statuses[i], err = readStatus(ctx, o.Redactor, m.doc, clients.Typed, o.Clusters); err != nil {
			return err
		}
		if err := o.Select.filterStatus(statuses[i], m.doc); err != nil {
			return err
		}
		if structured {
			return nil
		}
		return o.print(statuses[i], m.doc, out)
	})
	if structured {
		fs := fleetStatus{Clusters: make([]clusterStatus, len(members))}
		for i, m := range members {
			fs.Clusters[i] = clusterStatus{Context: m.context, Error: errorText(o.Redactor, outs[i].err)}
			if outs[i].err == nil {
				r := render.NewStatusReport(statuses[i])
				fs.Clusters[i].Status = &r
			}
		}
		if err := render.JSON(o.Streams.Out, fs); err != nil {
			return err
		}
	}
	return fleetError(members, outs, ExitFailed)
}
