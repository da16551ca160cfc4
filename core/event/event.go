// Package event is what the engine reports while it runs: a stream of
// values the CLI renders (live lines on a terminal, one line per change
// when piped, JSON at the end). Events carry raw text; whoever prints them
// passes that text through the redactor first.
package event

import (
	"context"
	"time"
)

// Kind names what happened.
type Kind string

const (
	RunStarted    Kind = "run-started"
	StepPending   Kind = "step-pending" // known, waiting for its needs
	StepStarted   Kind = "step-started" // an attempt began
	StepProgress  Kind = "step-progress"
	StepRetrying  Kind = "step-retrying" // an attempt failed; another follows after Delay
	StepSucceeded Kind = "step-succeeded"
	StepFailed    Kind = "step-failed"
	// StepInterrupted: the run was interrupted (Ctrl-C) while the step ran
	// or waited to retry; Message says what it left behind.
	StepInterrupted Kind = "step-interrupted"
	StepSkipped     Kind = "step-skipped"
	RunFinished     Kind = "run-finished"
	// PhaseStarted and PhaseEnded bound a phase of a run (Step empty: the
	// run lock, the state record) or of a step's attempt (fetching and
	// rendering, the install or apply, a wait, a chart's hooks): Phase
	// names it, and PhaseEnded's Message is its error ("" when it
	// succeeded). Progress shows none of them; the trace and the timeline
	// are drawn from them.
	PhaseStarted Kind = "phase-started"
	PhaseEnded   Kind = "phase-ended"
	// StepCause is a cause a wait of the step's attempt found for being
	// stuck (Message: what is wrong, and the object), when it appears or
	// changes, and the cause its failure ends with (Final).
	StepCause Kind = "step-cause"
)

// The phases the engine and the step kinds report (PhaseStarted's Phase).
const (
	PhaseLock    = "lock"   // taking the state record's run lock
	PhaseRecord  = "record" // reading or writing the state record
	PhaseFetch   = "fetch"  // fetching sources: a chart, values, manifests
	PhaseRender  = "render" // rendering a chart (a dry run) to compare it
	PhaseInstall = "install"
	PhaseUpgrade = "upgrade"
	PhaseApply   = "apply" // writing objects: apply, patch, a Job's create
	PhaseDelete  = "delete"
	PhaseWait    = "wait" // waiting for objects to become ready or gone
	PhaseHook    = "hook" // waiting for a chart's hook to complete
)

// Event is one thing that happened during a run.
type Event struct {
	Kind    Kind
	Time    time.Time
	Step    string // empty for run events
	Type    string // the step type
	Attempt int    // 1-based, for step events
	// Message is a progress line (StepProgress), the outcome (StepSucceeded),
	// the error (StepFailed, StepInterrupted, StepRetrying) or the reason
	// (StepSkipped).
	Message string
	// Delay is the pause before the next attempt (StepRetrying).
	Delay time.Duration
	// Elapsed is the step's time so far (StepSucceeded, StepFailed,
	// StepInterrupted) or the
	// run's (RunFinished).
	Elapsed time.Duration
	// Phase names the phase (PhaseStarted, PhaseEnded); Detail says what
	// it is about ("chart cmdeploy 0.1.0", "state record ns/x"), raw.
	Phase  string
	Detail string
	// Final: the cause a failed wait ends with (StepCause).
	Final bool
	// Skip says why a step was skipped (StepSkipped), typed: whoever
	// must tell skips apart reads it, never the Message.
	Skip SkipCause
}

// SkipCause is why a step was skipped (Event.Skip).
type SkipCause uint8

// The causes of a skip.
const (
	// SkipByStep: the step's own check (skipIf) found nothing to do, in
	// an attempt (Attempt > 0).
	SkipByStep SkipCause = iota
	// SkipUpFront: decided before the run (run.Task.Skip), for a reason
	// the task does not type; the engine's tasks say which of the next.
	SkipUpFront
	// SkipExcluded: its when: is false.
	SkipExcluded
	// SkipNotSelected: --steps leaves it out.
	SkipNotSelected
	// SkipResumed: the state record resumes it.
	SkipResumed
	// SkipLeftAlone: destroy leaves steps of its kind alone.
	SkipLeftAlone
	// SkipNotTriggered: none of its triggers changed anything in the run
	// (run.Task.NotTriggered).
	SkipNotTriggered
	// SkipBlocked: a step it needs ended without satisfying it.
	SkipBlocked
	// SkipUnreached: the run stopped starting steps before it (a failed
	// step's onError: fail), or its needs never completed.
	SkipUnreached
	// SkipInterrupted: the run was interrupted (Ctrl-C) before it
	// started.
	SkipInterrupted
)

// UpFront reports whether the skip was decided before the run: by the
// step's fate (when:, --steps, the state record, destroy).
func (c SkipCause) UpFront() bool { return c >= SkipUpFront && c <= SkipLeftAlone }

// Sink receives events. Implementations must be safe for concurrent use;
// the engine calls Emit from many goroutines.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// Discard drops every event.
var Discard Sink = discard{}

type discard struct{}

func (discard) Emit(Event) {}

// Tee sends every event to each sink, in order; nil and Discard are
// left out.
func Tee(sinks ...Sink) Sink {
	var out []Sink
	for _, s := range sinks {
		if s != nil && s != Discard {
			out = append(out, s)
		}
	}
	switch len(out) {
	case 0:
		return Discard
	case 1:
		return out[0]
	}
	return SinkFunc(func(e Event) {
		for _, s := range out {
			s.Emit(e)
		}
	})
}

// What code deep inside a step (a helm install, a wait) reports of the
// attempt it serves goes through the attempt's context: the engine puts
// the attempt there (WithAttempt), and Phase and Cause emit events for it
// to the run's sink. Without one they do nothing.

type attemptKey struct{}

// attempt is the step attempt a context serves.
type attempt struct {
	sink    Sink
	step    string
	typ     string
	attempt int
}

// WithAttempt returns ctx serving attempt n of the named step of type
// typ: the phases and causes reported through it go to sink.
func WithAttempt(ctx context.Context, sink Sink, step, typ string, n int) context.Context {
	if sink == nil {
		sink = Discard
	}
	return context.WithValue(ctx, attemptKey{}, &attempt{sink: sink, step: step, typ: typ, attempt: n})
}

// Phase reports that a phase of the attempt ctx serves begins (detail
// says what it is about); the function it returns reports its end, err
// its error (nil: it succeeded). Without an attempt in ctx, nothing is
// reported.
func Phase(ctx context.Context, phase, detail string) func(err error) {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	if a == nil {
		return func(error) {}
	}
	a.sink.Emit(Event{Kind: PhaseStarted, Time: time.Now(), Step: a.step, Type: a.typ, Attempt: a.attempt, Phase: phase, Detail: detail})
	return func(err error) {
		e := Event{Kind: PhaseEnded, Time: time.Now(), Step: a.step, Type: a.typ, Attempt: a.attempt, Phase: phase, Detail: detail}
		if err != nil {
			e.Message = err.Error()
		}
		a.sink.Emit(e)
	}
}

// Cause reports a cause a wait of the attempt ctx serves found for being
// stuck (final: the cause its failure ends with).
func Cause(ctx context.Context, cause string, final bool) {
	if a, _ := ctx.Value(attemptKey{}).(*attempt); a != nil && cause != "" {
		a.sink.Emit(Event{Kind: StepCause, Time: time.Now(), Step: a.step, Type: a.typ, Attempt: a.attempt, Message: cause, Final: final})
	}
}
