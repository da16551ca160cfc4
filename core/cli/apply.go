package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"khook.io/core/run"
	"khook.io/core/state"
	"khook.io/core/step"
)

// RunFlags are the flags of the commands that run steps (apply, destroy).
type RunFlags struct {
	Spec        SpecFlags
	Output      *outputFlag
	Parallelism int
}

func (f *RunFlags) add(cmd *cobra.Command) {
	f.Spec.AddFlags(cmd)
	f.Output.add(cmd, "output", "o", "summary format; progress always goes to standard error")
	cmd.Flags().IntVar(&f.Parallelism, "parallelism", 16, "how many steps may run at once (0: no limit)")
}

// RunOptions is a ready-to-run apply or destroy.
type RunOptions struct {
	flags   *RunFlags
	app     *app
	command string
}

func newRunFlags() *RunFlags { return &RunFlags{Output: newOutputFlag("text", "text", "json")} }

// ToOptions resolves the flags.
func (f *RunFlags) ToOptions(a *app, command string) (*RunOptions, error) {
	if f.Parallelism < 0 {
		return nil, invalid(fmt.Errorf("--parallelism must not be negative"))
	}
	if _, err := f.Spec.loadOptions(a); err != nil {
		return nil, err
	}
	return &RunOptions{flags: f, app: a, command: command}, nil
}

func (a *app) newApplyCommand() *cobra.Command {
	f := newRunFlags()
	cmd := &cobra.Command{
		Use:   "apply -f SPEC",
		Short: "Run a spec against the cluster",
		Long: `Run a spec against the cluster: every step as soon as its needs have
succeeded, independent steps in parallel, each attempt bounded by its timeout,
with retries and onError as the spec says. Progress goes to standard error
(live on a terminal), the summary to standard output. Exit code 0 when every
step succeeded or was skipped, 1 otherwise (also when Ctrl-C interrupted the
run: the steps it cut short are reported interrupted, not failed), 2 for an
invalid spec.`,
		Example: a.examples(`apply -f bootstrap.yaml
apply -f bootstrap.yaml -o json > result.json`),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.ToOptions(a, "apply")
			if err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f.add(cmd)
	return cmd
}

func (a *app) newDestroyCommand() *cobra.Command {
	f := newRunFlags()
	cmd := &cobra.Command{
		Use:   "destroy -f SPEC",
		Short: "Undo what a spec's steps created, in reverse order",
		Long: `Undo what a spec's steps created, in reverse dependency order (independent
branches in parallel): helm releases are uninstalled, apply: objects deleted
(last manifest first) and waited gone, each step's Job deleted (never one
khook does not own). delete, patch, wait and rollout steps are skipped, and
so are steps a when: excludes. What is already gone counts as success, so a
destroy can be re-run. Namespaces are left in place.`,
		Example: a.examples(`destroy -f bootstrap.yaml`),
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.ToOptions(a, "destroy")
			if err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f.add(cmd)
	return cmd
}

// Run connects, runs the steps and prints the summary.
func (o *RunOptions) Run(ctx context.Context) error {
	s, err := o.app.connect(ctx, &o.flags.Spec)
	if err != nil {
		return err
	}
	pctx, cancel := s.preflight(ctx)
	defer cancel()
	rs, err := s.openState(pctx)
	if err != nil {
		return err
	}
	build, order, graph := s.applyTasks, s.doc.Graph.Order(), run.Graph(s.doc.Graph)
	if o.command == "destroy" {
		build, order, graph = s.destroyTasks, s.doc.Graph.Reverse(), run.Reverse(s.doc.Graph)
	}
	tasks, err := build(rs)
	if err != nil {
		return err
	}
	progress := s.progress(o.command, order)
	s.sink = progress
	if rs != nil {
		if err := rs.begin(pctx, o.command, s, tasks); err != nil {
			progress.Close()
			return err
		}
		s.sink = rs.sink(progress, s, o.command, tasks)
	}
	res := run.Run(ctx, graph, tasks, run.Options{Parallelism: o.flags.Parallelism, Events: s.sink})
	progress.Close()
	var stateErr error
	if rs != nil {
		stateErr = rs.finish(ctx, o.command, res.Status)
	}
	err = s.finish(o.command, o.flags.Output.value, res)
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
		out, err := fn(ctx, s.request(i, attempt, timeout, s.sink))
		return run.Outcome{Skipped: out.Skipped, SkipReason: out.SkipReason, Message: out.Message}, err
	}
}
