package run

import (
	"context"
	"slices"
	"time"

	"khook.io/core/event"
)

// Step statuses. A step is interrupted when the run was cancelled (Ctrl-C)
// while it ran or waited to retry: it did not fail, it was cut short.
const (
	StatusOK          = "ok"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
	StatusSkipped     = "skipped"
)

// Run statuses.
const (
	RunOK          = "ok"
	RunFailed      = "failed"
	RunInterrupted = "interrupted"
)

// Outcome is what a successful attempt reports.
type Outcome struct {
	// Skipped: the step's own check (skipIf) found nothing to do; it still
	// satisfies needs.
	Skipped    bool
	SkipReason string
	Message    string
	// Changed: the attempt changed something in the cluster (created,
	// configured, upgraded, patched, deleted, restarted, ran a Job); the
	// tasks it triggers run (Task.Triggers).
	Changed bool
	// Drift and Kept are step.Outcome's: what the step found drifted and
	// left (drift mode warn), and the fields it left to other writers.
	Drift, Kept []string
}

// AttemptFunc makes one attempt; ctx carries the attempt's deadline.
type AttemptFunc func(ctx context.Context, attempt int) (Outcome, error)

// Task is one step as the scheduler sees it.
type Task struct {
	Name string
	Type string
	// Skip, when set, skips the task without running it; the task still
	// satisfies its needers (a when: exclusion, a resumed step).
	// SkipCause says why (event.SkipUpFront when it does not).
	Skip      string
	SkipCause event.SkipCause
	// Timeout bounds each attempt; Retries more attempts follow a failed
	// one, RetryDelay apart; OnError is spec.OnErrorFail or Continue.
	Timeout    time.Duration
	Retries    int
	RetryDelay time.Duration
	OnError    string
	Attempt    AttemptFunc
	// Triggers, when set, are tasks (by index) this task needs,
	// transitively: it runs only when one of them ended ok having changed
	// something in this run (Outcome.Changed); otherwise it is skipped
	// with NotTriggered as the reason, satisfying its needers.
	Triggers     []int
	NotTriggered string
}

// Options tune a run.
type Options struct {
	// Parallelism caps how many steps run at once; 0 means no cap.
	Parallelism int
	Events      event.Sink
}

// StepResult is how one step ended.
type StepResult struct {
	Name       string        `json:"name"`
	Type       string        `json:"type"`
	Status     string        `json:"status"`
	Attempts   int           `json:"attempts"`
	Duration   time.Duration `json:"-"`
	Error      string        `json:"error,omitempty"`
	SkipReason string        `json:"skipReason,omitempty"`
	// Skip is why a skipped step was skipped (SkipReason says it).
	Skip    event.SkipCause `json:"-"`
	Message string          `json:"message,omitempty"`
	// Changed: the step ended ok having changed something (Outcome).
	Changed bool `json:"-"`
	// Drift are the objects the step found drifted and left as they are
	// (drift mode warn), Kept the fields it left to other writers or
	// ignored, a line each (Outcome).
	Drift []string `json:"drift,omitempty"`
	Kept  []string `json:"kept,omitempty"`
	// Started and Finished are zero for steps that never ran.
	Started  time.Time `json:"-"`
	Finished time.Time `json:"-"`
}

// Result is how the run ended.
type Result struct {
	Status   string
	Steps    []StepResult // in task order
	Duration time.Duration
}

// Drifted reports whether a step of r found drift it left as it is (its
// drift policy's warn mode); false for nil.
func (r *Result) Drifted() bool {
	return r != nil && slices.ContainsFunc(r.Steps, func(s StepResult) bool { return len(s.Drift) > 0 })
}

// Counts are how many steps ended each way.
type Counts struct {
	OK, Failed, Interrupted, Skipped int
}

// Counts counts the steps by status.
func (r *Result) Counts() Counts {
	var c Counts
	for _, s := range r.Steps {
		switch s.Status {
		case StatusOK:
			c.OK++
		case StatusFailed:
			c.Failed++
		case StatusInterrupted:
			c.Interrupted++
		case StatusSkipped:
			c.Skipped++
		}
	}
	return c
}

// InterruptNoter is an error an attempt returns when the run was
// interrupted, saying what it left behind ("deleted Job x, which was still
// running"); the step's error becomes "interrupted: " and the note.
type InterruptNoter interface {
	error
	InterruptNote() string
}
