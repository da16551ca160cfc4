package fleet

import (
	"context"
	"errors"
	"time"

	"khook.io/core/engine"
	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/run"
)

// Run is apply or destroy on every member of a fleet, at most Parallelism
// clusters at once, each with its own connection, state record and
// variables; a cluster that fails (unreachable, a step failed, its record
// not writable) fails alone. Its phases are methods, in this order:
// Connect (every cluster connected to, and told apart from the others,
// before any runs), then for a destroy that asks Lock and Plans (every
// cluster's lock taken and its plan read before the one question), then
// Execute; Release lets go of the runs Lock began. A cancelled ctx stops
// every cluster: those running stop their steps cleanly, those not
// started yet never start.
type Run struct {
	// Command is apply or destroy.
	Command engine.Command
	Members []*Member
	Engine  *engine.Engine
	// Parallelism bounds how many clusters are worked on at once (0: no
	// bound); StepParallelism how many steps each runs at once.
	Parallelism, StepParallelism int
	// LockTimeout is how long each cluster waits for its run lock.
	LockTimeout time.Duration
	// Spelling is how the caller spells the settings the messages name.
	Spelling engine.Spelling
	// Prepare is member i's target and options (its notes routed, its
	// selection resolved); an error fails that member alone.
	Prepare func(i int) (engine.Target, engine.Options, error)
	// Observer hears how each member's turn goes; nil: nothing does. It
	// may be set between the phases.
	Observer Observer

	members []*member
}

// Observer hears a fleet run, member by member (by index), from the
// members' goroutines.
type Observer interface {
	// Connecting: member i's turn came; it is connected to.
	Connecting(i int)
	// Began: member i's run began (its fates decided); its events go to
	// the sink returned.
	Began(i int, r *engine.Run) event.Sink
	// Finished: member i's run ended.
	Finished(i int, res *Result)
}

// Result is how one member's run ended.
type Result struct {
	Context string
	// Status is ok, failed or interrupted.
	Status string
	// Err is the member's own error, not a step's: it could not be
	// reached, its lock or record failed, or its turn never came.
	Err error
	// Run is its steps' run; nil when they never ran.
	Run      *run.Result
	Started  time.Time
	Duration time.Duration
}

// member is one cluster of the run: connected once, its run begun once
// (destroy's before the question, apply's in its turn).
type member struct {
	*Member
	c       *engine.Cluster
	r       *engine.Run
	id      kube.ClusterID
	started time.Time
	// err: the cluster cannot be used (unreachable, its identity
	// unreadable, its lock held, its turn never came); it fails alone.
	err error
}

// ErrNamedTwice is why the members of a fleet that names one cluster
// twice did not run.
var ErrNamedTwice = errors.New("not run: the fleet names one cluster twice")

// Connect connects to every member (each checked up front, as a single
// run does) and reads each one's identity; each connection serves its
// member's run. A member that cannot be connected fails alone. The error
// is a fleet naming one cluster twice (SameClusters): nothing may run.
func (f *Run) Connect(ctx context.Context) error {
	f.members = make([]*member, len(f.Members))
	for i, m := range f.Members {
		f.members[i] = &member{Member: m, started: time.Now()}
	}
	Visit(ctx, len(f.members), f.Parallelism, func(ctx context.Context, i int) error {
		m := f.members[i]
		m.started = time.Now()
		if f.Observer != nil {
			f.Observer.Connecting(i)
		}
		t, o, err := f.Prepare(i)
		if err != nil {
			return err
		}
		if m.c, err = f.Engine.Connect(ctx, m.Doc, t, o); err != nil {
			return err
		}
		m.id, err = m.c.ID(ctx)
		return err
	}, func(i int, err error) { f.members[i].err = err })
	if ctx.Err() != nil {
		return nil
	}
	ids, known := make([]kube.ClusterID, len(f.members)), make([]bool, len(f.members))
	for i, m := range f.members {
		ids[i], known[i] = m.id, m.err == nil
	}
	return SameClusters(f.Members, ids, known, f.Spelling)
}

// Lock begins every connected member's run, taking its run lock (held
// until Release): what each then runs is what Plans showed. A member
// whose lock cannot be taken fails alone.
func (f *Run) Lock(ctx context.Context) {
	Visit(ctx, len(f.members), f.Parallelism, func(ctx context.Context, i int) error {
		if m := f.members[i]; m.err == nil {
			m.r, m.err = m.c.Begin(ctx, f.Command, f.LockTimeout)
		}
		return nil
	}, nil)
}

// Release ends the runs Lock began.
func (f *Run) Release() {
	for _, m := range f.members {
		m.r.Release()
	}
}

// Plan is one member's destroy plan: Err says why it could not be made.
type Plan struct {
	Context, Server string
	Steps           []engine.DestroyStep
	Err             error
}

// Plans is every member's destroy plan: the plan of the run Lock began
// (what it will run), or without it the plan previewed without the lock.
func (f *Run) Plans(ctx context.Context) []Plan {
	out := make([]Plan, len(f.members))
	Visit(ctx, len(f.members), f.Parallelism, func(ctx context.Context, i int) error {
		if m := f.members[i]; m.err != nil {
			out[i] = Plan{Context: m.Context, Err: m.err}
		} else {
			out[i] = DestroyPlan(ctx, m.c, m.Context, m.r)
		}
		return nil
	}, nil)
	return out
}

// DestroyPlan is cluster c's destroy plan: of the run r holds the lock
// for, or without r the plan previewed without the lock; context names
// the cluster when its connection does not. A step whose objects cannot
// be read says why in the plan.
func DestroyPlan(ctx context.Context, c *engine.Cluster, context string, r *engine.Run) Plan {
	p := Plan{Context: c.Clients().Identity.Context, Server: c.Clients().Server}
	if p.Context == "" {
		p.Context = context
	}
	if r != nil {
		p.Steps, _ = r.DestroyPlan(ctx)
	} else {
		p.Steps, _ = c.PreviewDestroy(ctx)
	}
	return p
}

// Refuse ends every connected member unrun, the fleet naming one cluster
// twice.
func (f *Run) Refuse() {
	for i, m := range f.members {
		if m.err == nil {
			f.finished(i, &Result{Context: m.Context, Status: run.RunFailed, Err: ErrNamedTwice})
		}
	}
}

// Execute runs the command on every member, at most Parallelism at once,
// and returns how each ended, in the fleet's order.
func (f *Run) Execute(ctx context.Context) []*Result {
	out := make([]*Result, len(f.members))
	Visit(ctx, len(f.members), f.Parallelism, func(ctx context.Context, i int) error {
		out[i] = f.execute(ctx, i)
		return nil
	}, func(i int, err error) {
		if err != nil { // its turn never came
			out[i] = f.failed(ctx, i, err)
		}
	})
	return out
}

// execute runs member i, connected (its run begun already when Lock was
// called).
func (f *Run) execute(ctx context.Context, i int) *Result {
	m := f.members[i]
	if m.err != nil {
		return f.failed(ctx, i, m.err)
	}
	started := time.Now()
	r := m.r
	if r == nil {
		var err error
		if r, err = m.c.Begin(ctx, f.Command, f.LockTimeout); err != nil {
			return f.failed(ctx, i, err)
		}
		defer r.Release()
	}
	var sink event.Sink = event.Discard
	if f.Observer != nil {
		sink = f.Observer.Began(i, r)
	}
	res, stateErr := r.Execute(ctx, sink, f.StepParallelism)
	if res == nil {
		return f.failed(ctx, i, stateErr)
	}
	out := &Result{Context: m.Context, Started: started, Run: res, Status: res.Status, Err: stateErr, Duration: time.Since(started)}
	if stateErr != nil && out.Status == run.RunOK {
		out.Status = run.RunFailed
	}
	f.finished(i, out)
	return out
}

// failed ends member i's run before its steps ran (interrupted when ctx
// was cancelled).
func (f *Run) failed(ctx context.Context, i int, err error) *Result {
	m := f.members[i]
	out := &Result{Context: m.Context, Started: m.started, Status: run.RunFailed, Err: err}
	if ctx.Err() != nil {
		out.Status = run.RunInterrupted
	}
	out.Duration = time.Since(out.Started)
	f.finished(i, out)
	return out
}

func (f *Run) finished(i int, res *Result) {
	if f.Observer != nil {
		f.Observer.Finished(i, res)
	}
}
