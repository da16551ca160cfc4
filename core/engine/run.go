package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/lock"
	"khook.io/core/run"
	"khook.io/core/state"
	"khook.io/core/step"
)

// Run is a run of apply or destroy on one cluster, ready to start: the
// state record's run lock is held (with a state: block), the record read,
// every step's fate decided and its task built. What Execute runs is what
// Dispositions and DestroyPlan said, whatever time passed since: no other
// run can change the record meanwhile. Release ends it (deferred, always).
type Run struct {
	c       *Cluster
	command Command
	disp    []Disposition
	tasks   []run.Task
	// undoes[i]: step i's executor undoes something (a Destroyer)
	undoes []bool
	// order is the steps' order in progress (the DAG's, reversed for
	// destroy).
	order []int
	// graph is what the walk follows: the DAG, reversed for destroy.
	graph run.Graph
	rs    *journal // nil without a state record
	// lock is the run lock of the state record, held for the run; nil
	// without a state record.
	lock *lock.Lock
	// started: Execute was called (a run executes once)
	started bool
	// planned[i]: step i's destroy plan as DestroyPlan read it (what the
	// question showed), which its Destroy carries out; nil: planned when
	// the step runs (destroy --yes)
	planned []*step.DestroyPlan
	// tail bounds what the run does after its steps (its last record
	// write, the release of its lock): not cancelled with the run, but
	// ended kube.Grace after it (Ctrl-C during an outage); nil before
	// Execute
	tail       context.Context
	cancelTail context.CancelFunc
	// id identifies the run to its steps (takeLock); sink receives its
	// events, the executors' progress lines among them (Execute)
	id   step.RunInfo
	sink event.Sink
}

// Begin starts command (apply or destroy) on the cluster: it takes the
// state record's run lock (notes: waiting for it, taking it over) before
// the record is read, reads the record, decides every step's fate
// (Dispose) and builds the tasks. With the lock held nothing the run
// shows can change before Execute: destroy shows its plan and asks in
// between. The error says nothing ran; the lock is then released.
// Only apply and destroy are runs: any other command is refused before
// anything is read (plan, diff and status take no lock and write nothing).
func (c *Cluster) Begin(ctx context.Context, command Command, lockTimeout time.Duration) (*Run, error) {
	if command != CommandApply && command != CommandDestroy {
		return nil, fmt.Errorf("%s is not a run: only apply and destroy begin one", command)
	}
	lk, id, err := c.takeLock(ctx, command, lockTimeout)
	if err != nil {
		return nil, err
	}
	if lk != nil {
		// from here on every write of the run's clients (helm's too)
		// waits while the lock is unconfirmed and is refused once it is
		// lost
		c.clients.Writes.Set(lk)
	}
	pctx, cancel := c.preflight(ctx)
	defer cancel()
	r, err := c.prepare(pctx, command, lk, id)
	if err != nil {
		tail, cancel := kube.Bind(context.WithoutCancel(ctx), ctx)
		defer cancel()
		c.releaseLock(tail, lk)
		return nil, err
	}
	return r, nil
}

// prepare reads the state record (with a state: block; its writes fenced
// by the run lock lk), decides every step's fate and builds the tasks of
// command. A blocked step (--no-needs) refuses the run.
func (c *Cluster) prepare(ctx context.Context, command Command, lk *lock.Lock, id step.RunInfo) (*Run, error) {
	rs, err := c.openState(ctx, lk)
	if err != nil {
		return nil, err
	}
	doc := c.doc
	r := &Run{c: c, command: command, rs: rs, lock: lk, id: id, sink: event.Discard, order: doc.Graph.Order(), graph: run.Graph(doc.Graph), undoes: make([]bool, len(doc.Spec.Steps)), planned: make([]*step.DestroyPlan, len(doc.Spec.Steps))}
	if command == CommandDestroy {
		r.order, r.graph = doc.Graph.Reverse(), run.Reverse(doc.Graph)
	}
	execs := make([]step.Executor, len(doc.Spec.Steps))
	for i := range execs {
		if execs[i], err = c.executor(i); err != nil {
			return nil, err
		}
		_, r.undoes[i] = execs[i].(step.Destroyer)
	}
	facts := Facts{Resumed: make([]bool, len(doc.Spec.Steps))}
	if rs != nil {
		facts.Resumed = Resumes(doc, rs.store.Previous(), rs.hashes)
	}
	if command == CommandDestroy {
		facts.Undoes = r.undoes
	}
	r.disp = Dispose(doc, command, c.opts.Selection, facts)
	if err := CheckBlocked(doc, r.disp); err != nil {
		return nil, err
	}
	r.tasks = make([]run.Task, len(doc.Spec.Steps))
	for i := range r.tasks {
		r.tasks[i] = r.task(i, r.disp[i], execs[i])
	}
	if rs != nil {
		rs.partial = c.opts.Selection.Partial()
	}
	return r, nil
}

// task is the scheduler's task of step i with disposition d; a step
// destroy undoes carries out planned[i] when DestroyPlan filled it in
// (the plan the question showed), else plans when it runs.
func (r *Run) task(i int, d Disposition, exec step.Executor) run.Task {
	c := r.c
	st := &c.doc.Spec.Steps[i]
	set := c.doc.Settings(i)
	t := run.Task{
		Name:       st.Name,
		Type:       st.Type(),
		Timeout:    set.Timeout.Duration(),
		Retries:    set.Retries,
		RetryDelay: set.RetryDelay.Duration(),
		OnError:    set.OnError,
	}
	runStep := func(ctx context.Context, req *step.Request) (step.Outcome, error) {
		return step.RunStep(ctx, exec, req)
	}
	switch d.Fate {
	case FateRun:
		t.Attempt = r.attempt(i, d, t.Timeout, runStep)
	case FateForced:
		t.Attempt = withNote(r.attempt(i, d, t.Timeout, runStep), d.Reason(c.doc, i))
	case FateConditional:
		t.Attempt = r.attempt(i, d, t.Timeout, runStep)
		t.Triggers = d.Triggers
		t.NotTriggered = notTriggered(c.doc, i, d.Resumed)
	case FateUndo:
		destroyer := exec.(step.Destroyer)
		t.Attempt = r.attempt(i, d, t.Timeout, func(ctx context.Context, req *step.Request) (step.Outcome, error) {
			req.Planned = r.planned[i]
			return step.DestroyStep(ctx, destroyer, req)
		})
	default:
		t.Skip, t.SkipCause = d.Reason(c.doc, i), skipCause(d.Fate)
	}
	return t
}

// withNote wraps the attempt of a step run for a reason of the
// command's (--replace): its outcome says so.
func withNote(fn run.AttemptFunc, note string) run.AttemptFunc {
	return func(ctx context.Context, attempt int) (run.Outcome, error) {
		out, err := fn(ctx, attempt)
		if err == nil {
			if out.Message != "" {
				out.Message += "; "
			}
			out.Message += note
		}
		return out, err
	}
}

// attempt adapts an executor method to the scheduler for step i with fate
// d; progress lines go to the run's event sink.
func (r *Run) attempt(i int, d Disposition, timeout time.Duration, fn func(context.Context, *step.Request) (step.Outcome, error)) run.AttemptFunc {
	c := r.c
	return func(ctx context.Context, attempt int) (run.Outcome, error) {
		req := c.request(i, attempt, timeout, d, call{sink: r.sink, run: r.id})
		// the phases and the causes of waits deep inside the step go to
		// the run's events
		ctx = event.WithAttempt(ctx, redacting(r.sink, c.red), req.Step.Name, req.Step.Type(), attempt)
		if req.Warn != nil {
			ctx = kube.WithWarnings(ctx, req.Warn) // the API server's warnings of the step's requests
		}
		out, err := fn(ctx, req)
		return run.Outcome{Skipped: out.Skipped, SkipReason: out.SkipReason, Message: out.Message, Changed: out.Changed, Drift: out.Drift, Kept: out.Kept}, err
	}
}

// Order is the steps' order in progress: the DAG's, reversed for destroy.
func (r *Run) Order() []int { return r.order }

// Dispositions are the steps' fates, by step index.
func (r *Run) Dispositions() []Disposition { return r.disp }

// Execute runs the steps, progress receiving the run's events: with a
// state record it first marks the run begun in it (the steps start only
// once that write is acknowledged), records each step as it ends and how
// the run ended. A nil result means the run never started (the error says
// why, no step ran); otherwise the error is the state record's or the
// lock's once it did (a run that loses its lock, or whose record finds
// another writer, stops and says why). A step that failed is in the
// result, not an error.
func (r *Run) Execute(ctx context.Context, progress event.Sink, parallelism int) (*run.Result, error) {
	if r.started {
		return nil, errors.New("the run was executed already")
	}
	r.started = true
	if progress == nil {
		progress = event.Discard
	}
	c := r.c
	r.sink = event.Tee(progress, c.events)
	progress = r.sink
	if r.rs != nil {
		pctx, cancel := c.preflight(ctx)
		err := r.rs.begin(pctx, r)
		cancel()
		if err != nil {
			return nil, err
		}
		r.sink = r.rs.sink(progress, r)
	}
	var store *state.Store
	if r.rs != nil {
		store = r.rs.store
	}
	rctx, stop := watchLost(ctx, r.lock, store)
	res := run.Schedule(rctx, r.graph, r.tasks, run.Options{Parallelism: parallelism, Events: r.sink})
	stop()
	// the run's last writes outlive its cancellation, by kube.Grace
	r.tail, r.cancelTail = kube.Bind(context.WithoutCancel(ctx), ctx)
	lost := lostError(r.lock, store)
	if r.rs == nil {
		return res, lost
	}
	if r.lock != nil && r.lock.Err() != nil {
		// the record is the lock's new holder's: this run writes no more
		store.Abandon()
		return res, lost
	}
	err := r.rs.finish(r.tail, c, r.command, res.Status)
	if lost != nil {
		return res, errors.Join(lost, err)
	}
	return res, err
}

// Release releases the run lock (also after Ctrl-C or a failure), then
// lets the cluster's writes through unfenced again; a release that fails
// is a warning note, not the run's error: the next run takes the lock
// over once it has seen it unchanged for the lease duration.
func (r *Run) Release() {
	if r == nil {
		return
	}
	tail := r.tail
	if tail == nil {
		tail = context.Background()
	}
	r.c.releaseLock(tail, r.lock)
	r.lock = nil
	if r.cancelTail != nil {
		r.cancelTail()
	}
}

// RunOptions tune Cluster.Execute.
type RunOptions struct {
	// LockTimeout is how long to wait for the run lock another run holds
	// (0: fail at once).
	LockTimeout time.Duration
	// Parallelism is how many steps run at once (0: no limit).
	Parallelism int
	// Progress returns the sink of the run's events, given the steps'
	// order, and what closes it when the steps ended; nil: discarded.
	Progress func(order []int) (sink event.Sink, done func())
}

// Execute is Begin, Execute and Release in one: apply's or destroy's run on
// the cluster, as the CLI's apply and destroy --yes do it.
func (c *Cluster) Execute(ctx context.Context, command Command, o RunOptions) (*run.Result, error) {
	r, err := c.Begin(ctx, command, o.LockTimeout)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	sink, done := event.Sink(event.Discard), func() {}
	if o.Progress != nil {
		sink, done = o.Progress(r.order)
	}
	res, err := r.Execute(ctx, sink, o.Parallelism)
	done()
	return res, err
}
