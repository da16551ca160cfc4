// Package event is what the engine reports while it runs: a stream of
// values the CLI renders (live lines on a terminal, one line per change
// when piped, JSON at the end). Events carry raw text; whoever prints them
// passes that text through the redactor first.
package event

import "time"

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
}

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
var Discard Sink = SinkFunc(func(Event) {})
