package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/lock"
	"khook.io/core/redact"
	"khook.io/core/run"
	"khook.io/core/state"
	"khook.io/core/step"
)

// RunFlags are the flags of the commands that run steps (apply, destroy).
type RunFlags struct {
	Spec        SpecFlags
	Fleet       FleetFlags
	Output      *outputFlag
	Parallelism int
	// LockTimeout is how long to wait for the run lock another run holds
	// (0: fail at once).
	LockTimeout time.Duration
	// Select is --steps (and apply's --no-needs, --replace).
	Select SelectFlags
	// Destroy is destroy's --yes, --dry-run and --force-crds (confirm.go).
	Destroy DestroyFlags
	// FieldManager is --field-manager: the field manager of every write
	// the steps make, helm's included ("": khook's "khook", and helm's
	// "helm" for helm's writes).
	FieldManager string
}

// NewRunFlags returns apply's and destroy's flags with their defaults.
func NewRunFlags() *RunFlags {
	return &RunFlags{Spec: NewSpecFlags(), Fleet: NewFleetFlags(), Output: newOutputFlag("text", "text", "json", "junit"), Parallelism: defaultParallelism}
}

// defaultParallelism is how many steps apply and destroy run at once.
const defaultParallelism = 16

// AddFlags registers the flags; contextFlag is the connection's flag for
// one context.
func (f *RunFlags) AddFlags(cmd *cobra.Command, contextFlag string) {
	f.Spec.AddFlags(cmd)
	f.Fleet.AddFlags(cmd, contextFlag)
	f.Output.add(cmd, "output", "o", "report format (junit: a JUnit XML report, one test suite per cluster, one test case per step); progress always goes to standard error")
	cmd.Flags().IntVar(&f.Parallelism, "parallelism", defaultParallelism, "how many steps may run at once (0: no limit); with --contexts, on each cluster")
	AddFieldManagerFlag(cmd, &f.FieldManager)
	cmd.Flags().DurationVar(&f.LockTimeout, "lock-timeout", 0, "with a state record: how long to wait for the run lock when another run holds it (0: fail at once, naming the holder)")
}

// RunOptions is a ready-to-run apply or destroy.
type RunOptions struct {
	// Command is "apply" or "destroy".
	Command     string
	Spec        *SpecOptions
	Fleet       FleetFlags
	Output      string
	Parallelism int
	LockTimeout time.Duration
	Select      SelectFlags
	Destroy     DestroyFlags
	// FieldManager is --field-manager ("": the defaults).
	FieldManager string
	// Streams: the summary goes to Out, progress to Progress (standard
	// error).
	Streams  genericiooptions.IOStreams
	Progress ProgressOutput
	Redactor *redact.Redactor
	Clusters *Clusters
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
	if err := errors.Join(f.Fleet.check(), f.Select.check()); err != nil {
		return nil, err
	}
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return nil, err
	}
	return &RunOptions{Command: command, Spec: so, Fleet: f.Fleet, Output: f.Output.value, Parallelism: f.Parallelism, LockTimeout: f.LockTimeout, Select: f.Select, Destroy: f.Destroy, FieldManager: f.FieldManager,
		Streams: streams, Progress: progress, Redactor: src.Redactor, Clusters: clusters}, nil
}

// newRunCommand is apply's or destroy's command, cmd its help.
func newRunCommand(cmd *cobra.Command, command string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, progress ProgressOutput) *cobra.Command {
	f := NewRunFlags()
	cmd.Args = noArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		o, err := f.ToOptions(command, streams, src, clusters, progress)
		if err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
	f.AddFlags(cmd, clusters.contextFlag())
	f.Select.AddFlags(cmd, command)
	if command == "destroy" {
		f.Destroy.AddFlags(cmd)
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
// record's run lock from before it reads the record until it ends.
func (o *RunOptions) Run(ctx context.Context) error {
	if o.Command == "destroy" {
		if done, err := o.confirmDestroy(ctx); done || err != nil {
			return err
		}
	}
	if o.Fleet.enabled() {
		return o.runFleet(ctx)
	}
	doc, err := o.Spec.Load()
	if err != nil {
		return err
	}
	sel, err := o.Select.resolve(doc, o.Command)
	if err != nil {
		return err
	}
	sel.warn(o.Streams.ErrOut)
	s, err := o.Clusters.connect(ctx, doc)
	if err != nil {
		return err
	}
	s.sel = sel
	s.forceCRDs = o.Destroy.ForceCRDs
	s.fieldManager = o.FieldManager
	res, stateErr, err := s.execute(ctx, o.Command, o.LockTimeout, o.Parallelism, o.Streams.ErrOut, func(ex *execution) (event.Sink, func()) {
		p := o.Progress.progress(o.Command, s.doc, ex.order)
		return p, p.Close
	})
	if err != nil {
		return err
	}
	err = s.finish(o.Streams.Out, o.Command, o.Output, res, stateErr)
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

// execute is apply's or destroy's run on the session's cluster, the one
// sequence a single run, each cluster of a fleet and an embedding program
// follow: take the state record's run lock (notes: waiting for it, taking
// it over), read the record, mark the run begun, run the steps with the
// progress progress builds (closed when they end), record how it ended,
// release the lock. err says the run never started (no step ran);
// stateErr is the record's or the lock's error once it did.
func (s *session) execute(ctx context.Context, command string, lockTimeout time.Duration, parallelism int, notes io.Writer,
	progress func(*execution) (event.Sink, func())) (res *run.Result, stateErr, err error) {
	lk, err := s.takeLock(ctx, command, lockTimeout, notes)
	if err != nil {
		return nil, nil, err
	}
	defer s.releaseLock(lk, notes)
	if lk != nil {
		// from here on every write of the run's clients (helm's too)
		// waits while the lock is unconfirmed and is refused once it is
		// lost
		s.clients.Writes.Set(lk)
	}
	pctx, cancel := s.preflight(ctx)
	defer cancel()
	ex, err := s.prepare(pctx, command, lk)
	if err != nil {
		return nil, nil, err
	}
	ex.lock = lk
	sink, done := progress(ex)
	if err := s.start(pctx, ex, sink); err != nil {
		done()
		return nil, nil, err
	}
	res, stateErr = s.runSteps(ctx, ex, parallelism)
	done()
	return res, stateErr, nil
}

// execution is a run of apply or destroy on one cluster, ready to start.
type execution struct {
	command string
	tasks   []run.Task
	// order is the steps' order in progress (the DAG's, reversed for
	// destroy).
	order []int
	// graph is what the walk follows: the DAG, reversed for destroy.
	graph run.Graph
	rs    *runState // nil without a state record
	// lock is the run lock of the state record, held for the run; nil
	// without a state record.
	lock *lock.Lock
}

// prepare reads the state record (with a state: block; its writes fenced
// by the run lock lk) and builds the tasks of command.
func (s *session) prepare(ctx context.Context, command string, lk *lock.Lock) (*execution, error) {
	rs, err := s.openState(ctx, lk)
	if err != nil {
		return nil, err
	}
	build, order, graph := s.applyTasks, s.doc.Graph.Order(), run.Graph(s.doc.Graph)
	if command == "destroy" {
		build, order, graph = s.destroyTasks, s.doc.Graph.Reverse(), run.Reverse(s.doc.Graph)
	}
	tasks, err := build(rs)
	if err != nil {
		return nil, err
	}
	if err := s.shape(command, tasks, rs); err != nil {
		return nil, err
	}
	return &execution{command: command, tasks: tasks, order: order, graph: graph, rs: rs}, nil
}

// start points the run's events at progress and, with a state record,
// marks the run begun in it (see runState.begin): the steps start only
// once that write is acknowledged.
func (s *session) start(ctx context.Context, ex *execution, progress event.Sink) error {
	s.sink = progress
	if ex.rs == nil {
		return nil
	}
	if err := ex.rs.begin(ctx, ex.command, s, ex.tasks); err != nil {
		return err
	}
	s.sink = ex.rs.sink(progress, s, ex.command, ex.tasks)
	return nil
}

// runSteps runs the tasks and records how the run ended; it returns the
// result and the error of the state record's last write. A run that loses
// its lock, or whose record finds another writer, stops (its running
// steps are interrupted) and says why.
func (s *session) runSteps(ctx context.Context, ex *execution, parallelism int) (*run.Result, error) {
	var store *state.Store
	if ex.rs != nil {
		store = ex.rs.store
	}
	rctx, stop := watchLost(ctx, ex.lock, store)
	res := run.Run(rctx, ex.graph, ex.tasks, run.Options{Parallelism: parallelism, Events: s.sink})
	stop()
	lost := lostError(ex.lock, store)
	if ex.rs == nil {
		return res, lost
	}
	if ex.lock != nil && ex.lock.Err() != nil {
		// the record is the lock's new holder's: this run writes no more
		store.Abandon()
		return res, lost
	}
	err := ex.rs.finish(ctx, ex.command, res.Status)
	if lost != nil {
		return res, errors.Join(lost, err)
	}
	return res, err
}

// baseTask fills the scheduling fields of step i.
func (s *session) baseTask(i int) run.Task {
	st := &s.doc.Spec.Steps[i]
	set := s.settings(i)
	t := run.Task{
		Name:       st.Name,
		Type:       st.Type(),
		Timeout:    set.Timeout.Duration(),
		Retries:    set.Retries,
		RetryDelay: set.RetryDelay.Duration(),
		OnError:    set.OnError,
	}
	if !s.doc.Included(i) {
		t.Skip = "when: " + st.When + " is false"
	}
	return t
}

func (s *session) executor(i int) (step.Executor, error) {
	typ := s.doc.Spec.Steps[i].Type()
	exec, ok := s.registry.Get(typ)
	if !ok {
		return nil, fmt.Errorf("this build of khook has no executor for %s steps", typ)
	}
	return exec, nil
}

// applyTasks maps the steps to tasks; with a state record, a step that
// succeeded before with the same inputs resumes (is skipped, satisfying
// its needers). when: is decided first and wins over the record.
func (s *session) applyTasks(rs *runState) ([]run.Task, error) {
	tasks := make([]run.Task, len(s.doc.Spec.Steps))
	for i := range tasks {
		exec, err := s.executor(i)
		if err != nil {
			return nil, err
		}
		t := s.baseTask(i)
		if t.Skip == "" && rs != nil && rs.store.Previous().Resumes(t.Name, rs.hashes[i]) {
			t.Skip = state.ResumeReason
		}
		t.Attempt = s.attempt(i, t.Timeout, exec.Run)
		tasks[i] = t
	}
	return tasks, nil
}

// destroyTasks maps the steps to the tasks of destroy, which walks the DAG
// reversed: a step is undone once every step that needs it has been.
func (s *session) destroyTasks(*runState) ([]run.Task, error) {
	tasks := make([]run.Task, len(s.doc.Spec.Steps))
	for i := range tasks {
		exec, err := s.executor(i)
		if err != nil {
			return nil, err
		}
		t := s.baseTask(i)
		if d, ok := exec.(step.Destroyer); ok {
			t.Attempt = s.attempt(i, t.Timeout, d.Destroy)
		} else if t.Skip == "" {
			t.Skip = fmt.Sprintf("nothing to undo: destroy leaves %s steps alone", t.Type)
		}
		tasks[i] = t
	}
	return tasks, nil
}

// attempt adapts an executor method to the scheduler; progress lines go to
// the run's event sink.
func (s *session) attempt(i int, timeout time.Duration, fn func(context.Context, *step.Request) (step.Outcome, error)) run.AttemptFunc {
	return func(ctx context.Context, attempt int) (run.Outcome, error) {
		req := s.request(i, attempt, timeout, s.sink)
		if req.Warn != nil {
			ctx = kube.WithWarnings(ctx, req.Warn) // the API server's warnings of the step's requests
		}
		out, err := fn(ctx, req)
		return run.Outcome{Skipped: out.Skipped, SkipReason: out.SkipReason, Message: out.Message, Changed: out.Changed}, err
	}
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
