package cli

import (
	"context"
	"strings"
	"time"

	"khook.io/core/engine"
	"khook.io/core/engine/fleet"
	"khook.io/core/kube"
	"khook.io/core/render"
	"khook.io/core/run"
	"khook.io/core/tracing"
)

// fleetMember is one cluster of a fleet run: connected once, its run
// begun once (destroy's before the question, apply's in its turn).
type fleetMember struct {
	*fleet.Member
	c  *engine.Cluster
	r  *engine.Run
	id kube.ClusterID
	// spans are the cluster's in the fleet's trace (nil: not traced)
	spans   *tracing.Sink
	started time.Time
	// err: the cluster cannot be used (unreachable, its identity
	// unreadable, its lock held, its turn never came); it fails alone.
	err error
}

// runFleet runs apply or destroy on every cluster of the fleet, at most
// --fleet-parallelism at once, each with its own connection, state record
// and variables; a cluster that fails (unreachable, a step failed, its
// record not writable) fails alone. Every cluster is connected to (and
// told apart from the others) before any runs: a fleet naming one cluster
// twice with one state record runs nowhere. A destroy that asks takes
// every cluster's lock, shows every cluster's plan and asks once. Ctrl-C
// cancels every cluster: those running stop their steps cleanly, those
// not started yet never start.
func (o *RunOptions) runFleet(ctx context.Context) error {
	members, err := loadFleet(o.Clusters, &o.Fleet, o.Spec)
	if err != nil {
		return err
	}
	command := engine.Command(o.Command)
	doc := members[0].Doc
	o.trace.SetSpec(doc.Spec.Metadata.Name)
	if _, err := o.Select.resolve(doc, command, nil); err != nil {
		return err
	}
	order := doc.Graph.Order()
	if command == engine.CommandDestroy {
		order = doc.Graph.Reverse()
	}
	infos := make([]render.ClusterInfo, len(members))
	for i, m := range members {
		infos[i] = render.ClusterInfo{Context: m.Context, Steps: stepInfos(m.Doc, order)}
	}
	dryRun := command == engine.CommandDestroy && o.Destroy.DryRun
	var progress *render.FleetProgress
	if !o.asks() && !dryRun {
		popts, w := o.Progress.options(o.Command)
		progress = render.NewFleetProgress(w, infos, popts)
	}
	start := time.Now()
	fm := o.connectFleet(ctx, members, progress)
	var clash error
	if ctx.Err() == nil && !dryRun {
		ids, known := make([]kube.ClusterID, len(fm)), make([]bool, len(fm))
		for i, m := range fm {
			ids[i], known[i] = m.id, m.err == nil
		}
		clash = fleet.SameClusters(members, ids, known)
	}
	if dryRun || o.asks() {
		defer func() {
			for _, m := range fm {
				m.r.Release()
			}
		}()
		// a fleet naming one cluster twice runs nowhere: its plan is
		// shown without locks (one record cannot be locked twice), and
		// the refusal follows the question, as any refusal of the run
		if done, err := o.confirmFleet(ctx, doc.Spec.Metadata.Name, fm, clash == nil); done || err != nil {
			return err
		}
		if clash != nil {
			return clash
		}
		popts, w := o.Progress.options(o.Command)
		progress = render.NewFleetProgress(w, infos, popts)
	}
	if clash != nil {
		for i, m := range fm {
			if m.err == nil {
				progress.Cluster(i).Finished(run.RunFailed, "not run: the fleet names one cluster twice")
			}
		}
		progress.Close()
		return clash
	}
	runs := make([]render.ClusterRun, len(members))
	fleet.Visit(ctx, len(fm), o.Fleet.Parallelism, func(ctx context.Context, i int) error {
		runs[i] = o.runMember(ctx, fm[i], progress.Cluster(i), infos[i].Steps)
		return nil
	}, func(i int, err error) {
		if err != nil { // its turn never came
			runs[i] = o.memberFailed(ctx, fm[i], progress.Cluster(i), infos[i].Steps, err)
		}
	})
	progress.Close()
	return o.fleetReport(doc.Spec.Metadata.Name, runs, time.Since(start))
}

// connectFleet connects to every cluster of the fleet (checking each up
// front, as a single run does), at most --fleet-parallelism at once, and
// reads each one's identity; each connection serves its cluster's run.
func (o *RunOptions) connectFleet(ctx context.Context, members []*fleet.Member, progress *render.FleetProgress) []*fleetMember {
	fm := make([]*fleetMember, len(members))
	for i, m := range members {
		fm[i] = &fleetMember{Member: m, started: time.Now(), spans: o.trace.Cluster(m.Context, true)}
	}
	e := o.Clusters.engine()
	fleet.Visit(ctx, len(fm), o.Fleet.Parallelism, func(ctx context.Context, i int) error {
		m := fm[i]
		m.started = time.Now()
		if progress != nil {
			progress.Cluster(i).Connecting()
		}
		notes := memberOut(o.Streams.ErrOut, m.Member)
		sel, err := o.Select.resolve(m.Doc, engine.Command(o.Command), notes)
		if err != nil {
			return err
		}
		t := target(m.Getter, notes, notes)
		if m.spans != nil {
			t.Events = m.spans
		}
		if m.c, err = e.Connect(ctx, m.Doc, t, o.engineOptions(sel)); err != nil {
			return err
		}
		m.id, err = m.c.ID(ctx)
		return err
	}, func(i int, err error) { fm[i].err = err })
	return fm
}

// confirmFleet is destroy's plan of every cluster of the fleet and its one
// question (done: the command ends, --dry-run printed the plan): with the
// question, every cluster's run lock is taken first (engine.Cluster.Begin)
// and held until the runs end, so what each cluster runs is what the plan
// showed (lock false: the plan is previewed without them, for a fleet the
// run then refuses). A cluster that cannot be reached or locked is in the
// plan with its error, and fails alone.
func (o *RunOptions) confirmFleet(ctx context.Context, spec string, fm []*fleetMember, lock bool) (done bool, err error) {
	if o.asks() && lock {
		fleet.Visit(ctx, len(fm), o.Fleet.Parallelism, func(ctx context.Context, i int) error {
			if fm[i].err == nil {
				fm[i].r, fm[i].err = fm[i].c.Begin(ctx, engine.CommandDestroy, o.LockTimeout)
			}
			return nil
		}, nil)
	}
	v := render.DestroyPlanView{Spec: spec, Clusters: make([]render.DestroyCluster, len(fm))}
	fleet.Visit(ctx, len(fm), o.Fleet.Parallelism, func(ctx context.Context, i int) error {
		if m := fm[i]; m.err != nil {
			v.Clusters[i] = render.DestroyCluster{Context: m.Context, Err: o.Redactor.String(m.err.Error())}
		} else {
			v.Clusters[i] = o.destroyCluster(ctx, m.c, m.Context, m.r)
		}
		return nil
	}, nil)
	if err := ctx.Err(); err != nil { // Ctrl-C while destroy planned: no plan to show
		return true, err
	}
	if o.Destroy.DryRun {
		return true, render.DestroyPlan(o.Streams.Out, v)
	}
	return false, o.confirm(v)
}

// runMember runs the command on one cluster of the fleet, connected (its
// run begun already when destroy asked).
func (o *RunOptions) runMember(ctx context.Context, m *fleetMember, cp *render.ClusterProgress, steps []render.StepInfo) render.ClusterRun {
	if m.err != nil {
		return o.memberFailed(ctx, m, cp, steps, m.err)
	}
	started := time.Now()
	r := m.r
	if r == nil {
		var err error
		if r, err = m.c.Begin(ctx, engine.Command(o.Command), o.LockTimeout); err != nil {
			return o.memberFailed(ctx, m, cp, steps, err)
		}
		defer r.Release()
	}
	m.spans.Steps(traceSteps(m.Doc, r.Dispositions()))
	res, stateErr := r.Execute(ctx, cp, o.Parallelism)
	if res == nil {
		return o.memberFailed(ctx, m, cp, steps, stateErr)
	}
	m.spans.End(res.Status, stateErr)
	cr := render.ClusterRun{Context: m.Context, Started: started, TraceID: o.trace.ID()}
	cr.Result, cr.Status, cr.Duration = res, res.Status, time.Since(cr.Started)
	if stateErr != nil {
		cr.Err = o.Redactor.String(stateErr.Error())
		if cr.Status == run.RunOK {
			cr.Status = run.RunFailed
		}
	}
	cp.Finished(cr.Status, cr.Err)
	return cr
}

// memberFailed ends a cluster's run before its steps ran (interrupted
// when ctx was cancelled).
func (o *RunOptions) memberFailed(ctx context.Context, m *fleetMember, cp *render.ClusterProgress, steps []render.StepInfo, err error) render.ClusterRun {
	cr := render.ClusterRun{Context: m.Context, Started: m.started, Status: run.RunFailed, Err: o.Redactor.String(err.Error()), TraceID: o.trace.ID()}
	if ctx.Err() != nil {
		cr.Status = run.RunInterrupted
	}
	m.spans.End(cr.Status, err)
	first, _, _ := strings.Cut(cr.Err, "\n")
	cr.Result = render.NotRun(steps, "not run: "+first)
	cr.Duration = time.Since(cr.Started)
	cp.Finished(cr.Status, cr.Err)
	return cr
}

// fleetReport prints a fleet run's report; its error says whether every
// cluster succeeded.
func (o *RunOptions) fleetReport(name string, runs []render.ClusterRun, elapsed time.Duration) error {
	var err error
	switch o.Output {
	case "json":
		err = render.JSON(o.Streams.Out, render.NewFleetReport(name, o.Command, runs, elapsed))
	case "junit":
		err = render.JUnit(o.Streams.Out, name, o.Command, runs, elapsed, o.Redactor)
	default:
		err = render.FleetSummary(o.Streams.Out, name, o.Command, runs, elapsed)
	}
	if err != nil {
		return err
	}
	if render.FleetStatus(runs) != run.RunOK {
		return &ExitError{Code: ExitFailed, Silent: true}
	}
	results := make([]*run.Result, len(runs))
	for i, r := range runs {
		results[i] = r.Result
	}
	return driftExit(o.DetailedExitCode, runDrift(results...))
}
