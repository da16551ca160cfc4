package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"khook.io/core/engine"
	"khook.io/core/engine/fleet"
	"khook.io/core/event"
	"khook.io/core/render"
	"khook.io/core/run"
	"khook.io/core/tracing"
)

// runFleet runs apply or destroy on every cluster of the fleet
// (fleet.Run), rendering its progress and its report; a destroy that
// asks shows every cluster's plan, its lock held, and asks once.
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
	ob := &fleetObserver{o: o, members: members, infos: make([]render.ClusterInfo, len(members)), spans: make([]*tracing.Sink, len(members))}
	for i, m := range members {
		ob.infos[i] = render.ClusterInfo{Context: m.Context, Steps: render.StepInfos(m.Doc, order)}
		ob.spans[i] = o.trace.Cluster(m.Context, true)
	}
	fr := &fleet.Run{Command: command, Members: members, Engine: o.Clusters.engine(), Parallelism: o.Fleet.Parallelism, StepParallelism: o.Parallelism,
		LockTimeout: o.LockTimeout, Spelling: o.Clusters.spelling(), Observer: ob, Prepare: func(i int) (engine.Target, engine.Options, error) {
			notes := memberOut(o.Streams.ErrOut, members[i])
			sel, err := o.Select.resolve(members[i].Doc, command, notes)
			t := target(members[i].Getter, notes, notes)
			if ob.spans[i] != nil {
				t.Events = ob.spans[i]
			}
			return t, o.engineOptions(sel), err
		}}
	dryRun := command == engine.CommandDestroy && o.Destroy.DryRun
	if !o.asks() && !dryRun {
		ob.start()
	}
	start := time.Now()
	clash := fr.Connect(ctx)
	if dryRun || o.asks() {
		defer fr.Release()
		// a fleet naming one cluster twice runs nowhere: its plan is
		// shown without locks (one record cannot be locked twice), and
		// the refusal follows the question, as any refusal of the run
		if o.asks() && clash == nil {
			fr.Lock(ctx)
		}
		if done, err := o.confirmFleet(ctx, doc.Spec.Metadata.Name, fr.Plans(ctx)); done || err != nil {
			return err
		}
		if clash != nil {
			return clash
		}
		ob.start()
	}
	if clash != nil {
		fr.Refuse()
		ob.progress.Close()
		return clash
	}
	results := fr.Execute(ctx)
	ob.progress.Close()
	return o.fleetReport(doc.Spec.Metadata.Name, ob.runs(results), results, time.Since(start))
}

// fleetObserver renders a fleet run: its live progress, and each
// cluster's spans of the trace.
type fleetObserver struct {
	o        *RunOptions
	members  []*fleet.Member
	infos    []render.ClusterInfo
	spans    []*tracing.Sink
	progress *render.FleetProgress
}

// start starts the progress block.
func (ob *fleetObserver) start() {
	ob.progress = ob.o.Progress.Fleet(ob.o.Command, ob.infos)
}

func (ob *fleetObserver) Connecting(i int) {
	if ob.progress != nil {
		ob.progress.Cluster(i).Connecting()
	}
}

func (ob *fleetObserver) Began(i int, r *engine.Run) event.Sink {
	ob.spans[i].Steps(traceSteps(ob.members[i].Doc, r.Dispositions()))
	return ob.progress.Cluster(i)
}

func (ob *fleetObserver) Finished(i int, res *fleet.Result) {
	if res.Err != fleet.ErrNamedTwice { // a cluster never begun keeps its span open
		status := res.Status
		if res.Run != nil {
			status = res.Run.Status
		}
		ob.spans[i].End(status, res.Err)
	}
	ob.progress.Cluster(i).Finished(res.Status, errorText(ob.o.Redactor, res.Err))
}

// runs are the fleet's results as its report shows them: a cluster whose
// steps never ran has them all skipped, saying why.
func (ob *fleetObserver) runs(results []*fleet.Result) []render.ClusterRun {
	runs := make([]render.ClusterRun, len(results))
	for i, r := range results {
		cr := render.ClusterRun{Context: r.Context, Started: r.Started, Status: r.Status, Result: r.Run, Duration: r.Duration, Err: errorText(ob.o.Redactor, r.Err), TraceID: ob.o.trace.ID()}
		if r.Run == nil {
			first, _, _ := strings.Cut(cr.Err, "\n")
			cr.Result = render.NotRun(ob.infos[i].Steps, "not run: "+first)
		}
		runs[i] = cr
	}
	return runs
}

// confirmFleet shows destroy's plan of every cluster of the fleet and
// asks once (done: the command ends, --dry-run printed the plan). A
// cluster that cannot be reached or locked is in the plan with its
// error, and fails alone.
func (o *RunOptions) confirmFleet(ctx context.Context, spec string, plans []fleet.Plan) (done bool, err error) {
	v := o.destroyView(spec, plans...)
	if err := ctx.Err(); err != nil { // Ctrl-C while destroy planned: no plan to show
		return true, err
	}
	if o.Destroy.DryRun {
		return true, render.DestroyPlan(o.Streams.Out, v)
	}
	return false, o.confirm(v)
}

// fleetReport prints a fleet run's report; its error says whether every
// cluster succeeded (a cluster refused as the command's usage exits 2).
func (o *RunOptions) fleetReport(name string, runs []render.ClusterRun, results []*fleet.Result, elapsed time.Duration) error {
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
		code := ExitFailed
		for _, r := range results {
			if r.Err != nil && exitCode(r.Err, ExitFailed) == ExitInvalid {
				code = ExitInvalid
			}
		}
		return &ExitError{Code: code, Silent: true}
	}
	return driftExit(o.DetailedExitCode, slices.ContainsFunc(runs, func(r render.ClusterRun) bool { return r.Result.Drifted() }))
}
