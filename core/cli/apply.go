package cli

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
	"khook.io/core/engine/fleet"
	"khook.io/core/event"
	"khook.io/core/render"
	"khook.io/core/run"
	"khook.io/core/timeline"
	"khook.io/core/tracing"
)

// RunFlags are the flags of the commands that run steps (apply, destroy).
type RunFlags struct {
	ClusterFlags
	Output      *outputFlag
	Parallelism int
	// LockTimeout is how long to wait for the run lock another run holds
	// (0: fail at once).
	LockTimeout time.Duration
	// Destroy is destroy's --yes, --dry-run and --force-crds (confirm.go).
	Destroy DestroyFlags
	// FieldManager is --field-manager: the field manager of every write
	// the steps make, helm's included ("": khook's "khook", and helm's
	// "helm" for helm's writes).
	FieldManager string
	// Trace is --trace-file and --timeline.
	Trace TraceFlags
	// DetailedExitCode is apply's --detailed-exitcode: exit 4 on drift
	// left.
	DetailedExitCode bool
}

// NewRunFlags returns apply's and destroy's flags with their defaults.
func NewRunFlags() *RunFlags {
	return &RunFlags{ClusterFlags: newClusterFlags(), Output: newOutputFlag("text", "text", "json", "junit"), Parallelism: defaultParallelism}
}

// defaultParallelism is how many steps apply and destroy run at once.
const defaultParallelism = 16

// AddFlags registers the flags of command ("apply" or "destroy");
// contextFlag is the connection's flag for one context.
func (f *RunFlags) AddFlags(cmd *cobra.Command, contextFlag, command string) {
	f.ClusterFlags.AddFlags(cmd, contextFlag, command)
	f.Output.add(cmd, "output", "o", "report format (junit: a JUnit XML report, one test suite per cluster, one test case per step); progress always goes to standard error")
	cmd.Flags().IntVar(&f.Parallelism, "parallelism", defaultParallelism, "how many steps may run at once (0: no limit); with --contexts, on each cluster")
	AddFieldManagerFlag(cmd, &f.FieldManager)
	cmd.Flags().DurationVar(&f.LockTimeout, "lock-timeout", 0, "with a state record: how long to wait for the run lock when another run holds it (0: fail at once, naming the holder)")
	f.Trace.AddFlags(cmd)
}

// RunOptions is a ready-to-run apply or destroy.
type RunOptions struct {
	ClusterOptions
	// Command is "apply" or "destroy".
	Command     string
	Output      string
	Parallelism int
	LockTimeout time.Duration
	Destroy     DestroyFlags
	// FieldManager is --field-manager ("": the defaults).
	FieldManager string
	// DetailedExitCode: a run that succeeds having found drift it leaves
	// as it is (drift mode warn) exits ExitDrift.
	DetailedExitCode bool
	// Progress is where progress goes (standard error).
	Progress ProgressOutput
	// Trace is --trace-file and --timeline; Environ the environment the
	// OpenTelemetry variables are read from (nil: the process's).
	Trace   TraceFlags
	Environ []string
	// trace is the run's trace, nil when it is not traced.
	trace *tracing.Trace
}

// ToOptions resolves the flags of command ("apply" or "destroy").
func (f *RunFlags) ToOptions(command string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, progress ProgressOutput) (*RunOptions, error) {
	if f.Parallelism < 0 {
		return nil, invalid(fmt.Errorf("--parallelism must not be negative"))
	}
	if f.LockTimeout < 0 {
		return nil, invalid(fmt.Errorf("--lock-timeout must not be negative"))
	}
	if err := checkFieldManager(f.FieldManager); err != nil {
		return nil, err
	}
	co, err := f.toOptions(streams, src, clusters, f.Trace.check(f.Fleet.enabled()))
	if err != nil {
		return nil, err
	}
	return &RunOptions{ClusterOptions: co, Command: command, Output: f.Output.value, Parallelism: f.Parallelism, LockTimeout: f.LockTimeout, Destroy: f.Destroy, FieldManager: f.FieldManager, DetailedExitCode: f.DetailedExitCode,
		Progress: progress, Trace: f.Trace, Environ: src.Environ}, nil
}

// newRunCommand is apply's or destroy's command, cmd its help.
func newRunCommand(cmd *cobra.Command, command string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, progress ProgressOutput) *cobra.Command {
	f := NewRunFlags()
	runs(cmd, func() (*RunOptions, error) { return f.ToOptions(command, streams, src, clusters, progress) })
	f.AddFlags(cmd, clusters.contextFlag(), command)
	if command == "destroy" {
		f.Destroy.AddFlags(cmd)
	} else {
		DetailedExitCodeFlag(cmd, &f.DetailedExitCode)
	}
	return cmd
}

// NewCmdApply is the apply command.
func NewCmdApply(name string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, progress ProgressOutput) *cobra.Command {
	return newRunCommand(&cobra.Command{
		Use:   "apply -f SPEC",
		Short: "Run a spec against the cluster",
		Long: `Run a spec against the cluster: every step as soon as its needs have
succeeded, independent steps in parallel, each attempt bounded by its timeout,
with retries and onError as the spec says. Progress goes to standard error
(live on a terminal), the summary to standard output. Exit code 0 when every
step succeeded or was skipped, 1 otherwise (also when Ctrl-C interrupted the
run: the steps it cut short are reported interrupted, not failed), 2 for an
invalid spec.

With --contexts, the spec runs on each kubeconfig context named (names and
glob patterns), several clusters at once (--fleet-parallelism), each with its
own connection, state record and variables (KHOOK_CONTEXT is the context's
name; --var-dir adds DIR/<context>.yaml), then a summary line per cluster.
Exit code 1 when any cluster failed.`,
		Example: examples(name, `apply -f bootstrap.yaml
apply -f bootstrap.yaml -o json > result.json
apply -f bootstrap.yaml --contexts 'prod-*,staging-eu' --var-dir vars/ -o junit > report.xml`),
	}, "apply", streams, src, clusters, progress)
}

// NewCmdDestroy is the destroy command.
func NewCmdDestroy(name string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, progress ProgressOutput) *cobra.Command {
	return newRunCommand(&cobra.Command{
		Use:   "destroy -f SPEC",
		Short: "Undo what a spec's steps did, in reverse order, after showing the plan and asking",
		Long: `Undo what a spec's steps did, in reverse dependency order (independent
branches in parallel): helm releases are uninstalled; apply: objects this spec
created (annotated khook.io/created-by) are deleted (last manifest first, CRDs
last) and waited gone, while objects that existed before khook get back what
khook took: each field khook wrote goes back to the value it recorded, goes
when khook added it, and stays when another writer changed it since; each
step's Job is deleted (never one khook does not own). delete, patch, wait and rollout steps are skipped, and so are steps a
when: excludes. What is already gone counts as success, so a destroy can be
re-run. Namespaces are left in place. A CRD the spec created whose kind has
custom resources the spec did not create is refused unless --force-crds.

destroy first shows its plan (per cluster: context, server, and what each
step deletes, reverts or leaves, and why) and asks for the spec's name (or
"yes"); --yes does not ask, and without a terminal --yes is required.
--dry-run prints the plan and changes nothing. With --contexts, on each
cluster of a fleet, as apply: every cluster's plan is shown before the one
question.`,
		Example: examples(name, `destroy -f bootstrap.yaml
destroy -f bootstrap.yaml --dry-run
destroy -f bootstrap.yaml --yes
destroy -f bootstrap.yaml --contexts 'staging-*'`),
	}, "destroy", streams, src, clusters, progress)
}

// Run connects, runs the steps and prints the summary; with --contexts,
// on every cluster of the fleet. With a state record, the run holds the
// record's run lock from before it reads the record until it ends;
// destroy takes it before it shows its plan and holds it through the
// question, so what runs is what was approved.
func (o *RunOptions) Run(ctx context.Context) (err error) {
	if o.asks() && !isTerminal(o.Streams.In) {
		return o.refuseWithoutTerminal()
	}
	if o.trace, err = o.startTrace(ctx); err != nil {
		return err
	}
	defer func() { o.endTrace(o.trace, err) }()
	if o.Fleet.enabled() {
		return o.runFleet(ctx)
	}
	return o.runOne(ctx)
}

// runOne is Run on the connection's one cluster.
func (o *RunOptions) runOne(ctx context.Context) (err error) {
	// the cluster's spans: the run's lock, record, steps
	spans := o.trace.Cluster("", false)
	defer func() { spans.End("", err) }()
	doc, err := o.Spec.Load()
	if err != nil {
		return err
	}
	o.trace.SetSpec(doc.Spec.Metadata.Name)
	sel, err := o.Select.resolve(doc, engine.Command(o.Command), o.Streams.ErrOut)
	if err != nil {
		return err
	}
	c, err := o.Clusters.connect(ctx, doc, o.engineOptions(sel), spans)
	if err != nil {
		return err
	}
	o.trace.SetContext(c.Name())
	if o.Command == "destroy" && o.Destroy.DryRun {
		v := o.destroyView(doc.Spec.Metadata.Name, fleet.DestroyPlan(ctx, c, "", nil))
		if err := ctx.Err(); err != nil { // Ctrl-C while destroy planned: no plan to show
			return err
		}
		return render.DestroyPlan(o.Streams.Out, v)
	}
	r, err := c.Begin(ctx, engine.Command(o.Command), o.LockTimeout)
	if err != nil {
		return err
	}
	defer r.Release()
	if o.asks() {
		v := o.destroyView(doc.Spec.Metadata.Name, fleet.DestroyPlan(ctx, c, "", r))
		if err := ctx.Err(); err != nil { // Ctrl-C while destroy planned: no plan to show
			return err
		}
		if err := o.confirm(v); err != nil {
			return err
		}
	}
	spans.Steps(traceSteps(doc, r.Dispositions()))
	p := o.Progress.Progress(o.Command, doc, r.Order())
	var (
		times *timeline.Collector
		sink  event.Sink = p
	)
	if o.Trace.Timeline != "" {
		times = timeline.NewCollector()
		sink = event.Tee(p, times)
	}
	res, stateErr := r.Execute(ctx, sink, o.Parallelism)
	p.Close()
	if res == nil {
		return stateErr
	}
	spans.End(res.Status, stateErr)
	err = o.finish(c, res, stateErr)
	if times != nil {
		tl := times.Run(doc.Spec.Metadata.Name, o.Command, o.trace.ID(), engine.TimelineDefs(doc, engine.Command(o.Command)), engine.Resumed(doc, r.Dispositions()))
		if werr := writeTimeline(o.Trace.Timeline, tl, o.Redactor); werr != nil && err == nil && stateErr == nil {
			err = werr
		}
	}
	var exitErr *ExitError
	if res.Status == run.RunInterrupted && (err == nil || errors.As(err, &exitErr)) {
		// the summary said so; the state record's error, if any, follows
		// (the first Ctrl-C ends the command with its usual code, 1)
		return &ExitError{Code: ExitFailed, Err: stateErr, Silent: stateErr == nil}
	}
	if err != nil && stateErr == nil {
		return err
	}
	return stateErr
}

// engineOptions are the engine's options of the run.
func (o *RunOptions) engineOptions(sel *engine.Selection) engine.Options {
	return engine.Options{Selection: sel, FieldManager: o.FieldManager, ForceCRDs: o.Destroy.ForceCRDs, TraceID: o.trace.ID(), Spelling: flagOf}
}

// finish prints the run's result on cluster c (stateErr is the error of
// the state record's last write) and returns the command's error: nil
// when every step succeeded or was skipped.
func (o *RunOptions) finish(c *engine.Cluster, res *run.Result, stateErr error) error {
	name := c.Doc().Spec.Metadata.Name
	var err error
	switch o.Output {
	case "json":
		rep := render.Report(name, o.Command, res)
		rep.TraceID = o.trace.ID()
		err = render.JSON(o.Streams.Out, rep)
	case "junit":
		cr := render.ClusterRun{Context: c.Name(), Status: res.Status, Result: res, Duration: res.Duration, Started: time.Now().Add(-res.Duration), TraceID: o.trace.ID()}
		if stateErr != nil {
			cr.Err = stateErr.Error()
		}
		err = render.JUnit(o.Streams.Out, name, o.Command, []render.ClusterRun{cr}, res.Duration, o.Redactor)
	default:
		err = render.Summary(o.Streams.Out, name, o.Command, res)
	}
	if err != nil {
		return err
	}
	if res.Status != run.RunOK {
		return &ExitError{Code: ExitFailed, Silent: true}
	}
	return driftExit(o.DetailedExitCode, res.Drifted())
}

// AddFieldManagerFlag registers --field-manager, kubectl's flag.
func AddFieldManagerFlag(cmd *cobra.Command, manager *string) {
	cmd.Flags().StringVar(manager, "field-manager", "",
		`the field manager of every write the steps make, helm's included, as kubectl's --field-manager (default "khook", and "helm" for helm's writes); name kubectl's ("kubectl", "kubectl-client-side-apply") to take over objects kubectl applied`)
}

// checkFieldManager refuses a field manager the API server would refuse
// on every write: at most 128 characters, printable.
func checkFieldManager(m string) error {
	if len(m) > 128 {
		return invalid(fmt.Errorf("--field-manager %q: at most 128 characters", m))
	}
	for _, r := range m {
		if !unicode.IsPrint(r) {
			return invalid(fmt.Errorf("--field-manager %q: only printable characters", m))
		}
	}
	return nil
}
