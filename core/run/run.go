// Package run schedules a spec's steps. It knows nothing of step kinds: it
// receives tasks (a name, needs, settings and an attempt function) and
// runs each as soon as all its needs are satisfied — levels are how plan
// shows the DAG, not a barrier — with per-attempt timeouts, retries and
// onError, reporting everything as events.
package run

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"khook.io/core/event"
	"khook.io/core/spec"
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
}

// AttemptFunc makes one attempt; ctx carries the attempt's deadline.
type AttemptFunc func(ctx context.Context, attempt int) (Outcome, error)

// Task is one step as the scheduler sees it.
type Task struct {
	Name  string
	Type  string
	Needs []int // indexes into the task list
	// Skip, when set, skips the task without running it; the task still
	// satisfies its needers (a when: exclusion, a resumed step).
	Skip string
	// Timeout bounds each attempt; Retries more attempts follow a failed
	// one, RetryDelay apart; OnError is spec.OnErrorFail or Continue.
	Timeout    time.Duration
	Retries    int
	RetryDelay time.Duration
	OnError    string
	Attempt    AttemptFunc
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
	Message    string        `json:"message,omitempty"`
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

// interruptedReason is the skip reason of the steps an interruption kept
// from starting.
const interruptedReason = "not run: the run was interrupted"

type state int

const (
	waiting state = iota
	running
	done
)

type finished struct {
	index int
	res   StepResult
}

// Run executes the tasks and returns when every task has ended. Cancelling
// ctx interrupts the run: running attempts are cancelled, nothing new
// starts, and every task not yet run is reported skipped.
func Run(ctx context.Context, tasks []Task, opts Options) *Result {
	sink := opts.Events
	if sink == nil {
		sink = event.Discard
	}
	start := time.Now()
	sink.Emit(event.Event{Kind: event.RunStarted, Time: start})

	n := len(tasks)
	results := make([]StepResult, n)
	st := make([]state, n)
	unmet := make([]int, n)
	needers := make([][]int, n)
	for i, t := range tasks {
		results[i] = StepResult{Name: t.Name, Type: t.Type}
		unmet[i] = len(t.Needs)
		for _, j := range t.Needs {
			needers[j] = append(needers[j], i)
		}
	}

	var (
		ready     []int
		active    int
		remaining = n
		stopped   string // why nothing new starts (onError: fail, interrupted)
		doneCh    = make(chan finished, n)
		wg        sync.WaitGroup
	)
	var finish func(i int, res StepResult, satisfied bool)
	// skip ends a task that never ran; it satisfies its needers only when
	// the skip was decided up front (Task.Skip).
	skip := func(i int, reason string) {
		res := results[i]
		res.Status, res.SkipReason = StatusSkipped, reason
		finish(i, res, reason == tasks[i].Skip)
	}
	// finish records a task's end and releases its needers when satisfied
	// is set (success, a skipIf, a when: exclusion, a resumed step), or
	// skips them otherwise.
	finish = func(i int, res StepResult, satisfied bool) {
		results[i] = res
		st[i] = done
		remaining--
		switch res.Status {
		case StatusSkipped:
			sink.Emit(event.Event{Kind: event.StepSkipped, Time: time.Now(), Step: res.Name, Type: res.Type, Attempt: res.Attempts, Message: res.SkipReason, Elapsed: res.Duration})
		case StatusOK:
			sink.Emit(event.Event{Kind: event.StepSucceeded, Time: time.Now(), Step: res.Name, Type: res.Type, Attempt: res.Attempts, Message: res.Message, Elapsed: res.Duration})
		case StatusFailed:
			sink.Emit(event.Event{Kind: event.StepFailed, Time: time.Now(), Step: res.Name, Type: res.Type, Attempt: res.Attempts, Message: res.Error, Elapsed: res.Duration})
		case StatusInterrupted:
			sink.Emit(event.Event{Kind: event.StepInterrupted, Time: time.Now(), Step: res.Name, Type: res.Type, Attempt: res.Attempts, Message: res.Error, Elapsed: res.Duration})
		}
		for _, j := range needers[i] {
			if st[j] != waiting {
				continue
			}
			if !satisfied {
				why := fmt.Sprintf("needs %s, which failed", res.Name)
				switch res.Status {
				case StatusSkipped:
					why = fmt.Sprintf("needs %s, which was skipped", res.Name)
				case StatusInterrupted:
					why = fmt.Sprintf("needs %s, which was interrupted", res.Name)
				}
				skip(j, why)
				continue
			}
			unmet[j]--
			if unmet[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	for i := range tasks {
		if unmet[i] == 0 {
			ready = append(ready, i)
		}
	}
	for i, t := range tasks {
		if st[i] == waiting && unmet[i] > 0 {
			sink.Emit(event.Event{Kind: event.StepPending, Time: time.Now(), Step: t.Name, Type: t.Type})
		}
	}

	for remaining > 0 {
		if stopped == "" && ctx.Err() != nil {
			stopped = interruptedReason
		}
		// start (or skip) everything ready, within the parallelism cap
		for len(ready) > 0 && stopped == "" && (opts.Parallelism <= 0 || active < opts.Parallelism) {
			i := ready[0]
			ready = ready[1:]
			if st[i] != waiting {
				continue
			}
			if tasks[i].Skip != "" {
				skip(i, tasks[i].Skip)
				continue
			}
			st[i] = running
			active++
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				doneCh <- finished{index: i, res: attemptLoop(ctx, &tasks[i], results[i], sink)}
			}(i)
		}
		if active == 0 {
			// nothing runs and nothing can start: the rest never will
			reason := stopped
			for i := range tasks {
				if st[i] == waiting {
					if reason == "" {
						reason = "not run: its needs never completed"
					}
					skip(i, reason)
				}
			}
			break
		}
		f := <-doneCh
		active--
		switch {
		case stopped != "":
		case f.res.Status == StatusInterrupted:
			stopped = interruptedReason
		case f.res.Status == StatusFailed && tasks[f.index].OnError != spec.OnErrorContinue:
			stopped = fmt.Sprintf("not run: step %s failed (onError: fail)", f.res.Name)
		}
		finish(f.index, f.res, f.res.Status == StatusOK || f.res.Status == StatusSkipped)
	}
	wg.Wait()

	res := &Result{Status: RunOK, Steps: results, Duration: time.Since(start)}
	c := res.Counts()
	if c.Failed > 0 {
		res.Status = RunFailed
	}
	// interrupted: a step was cut short, or one never started because of
	// it (a cancellation after the last step ended changes nothing)
	for _, s := range results {
		if s.Status == StatusInterrupted || s.SkipReason == interruptedReason {
			res.Status = RunInterrupted
		}
	}
	sink.Emit(event.Event{Kind: event.RunFinished, Time: time.Now(), Message: res.Status, Elapsed: res.Duration})
	return res
}

// attemptLoop runs a task's attempts with its timeout, retries and retry
// delay.
func attemptLoop(ctx context.Context, t *Task, res StepResult, sink event.Sink) StepResult {
	res.Started = time.Now()
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		sink.Emit(event.Event{Kind: event.StepStarted, Time: time.Now(), Step: t.Name, Type: t.Type, Attempt: attempt})
		actx, cancel := ctx, context.CancelFunc(func() {})
		if t.Timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, t.Timeout)
		}
		out, err := callAttempt(actx, t, attempt)
		timedOut := err != nil && actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		cancel()
		if err == nil {
			res.Status = StatusOK
			res.Message = out.Message
			if out.Skipped {
				res.Status = StatusSkipped
				res.SkipReason = out.SkipReason
			}
			res.Finished = time.Now()
			res.Duration = res.Finished.Sub(res.Started)
			return res
		}
		if ctx.Err() != nil {
			return ended(res, StatusInterrupted, interruptedError(err))
		}
		if timedOut {
			err = fmt.Errorf("timed out after %s: %w", t.Timeout, err)
		}
		if attempt > t.Retries {
			return ended(res, StatusFailed, err.Error())
		}
		sink.Emit(event.Event{Kind: event.StepRetrying, Time: time.Now(), Step: t.Name, Type: t.Type, Attempt: attempt, Message: err.Error(), Delay: t.RetryDelay})
		if t.RetryDelay > 0 {
			timer := time.NewTimer(t.RetryDelay)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return ended(res, StatusInterrupted, fmt.Sprintf("interrupted while waiting to retry (attempt %d failed: %v)", attempt, err))
			}
		}
	}
}

// ended is res finished now with status and error text.
func ended(res StepResult, status, msg string) StepResult {
	res.Status, res.Error = status, msg
	res.Finished = time.Now()
	res.Duration = res.Finished.Sub(res.Started)
	return res
}

// interruptedError is the error text of an attempt the interruption cut
// short: "interrupted", with what the step says it left behind.
func interruptedError(err error) string {
	var n InterruptNoter
	if errors.As(err, &n) && n.InterruptNote() != "" {
		return "interrupted: " + n.InterruptNote()
	}
	return "interrupted"
}

// callAttempt runs one attempt, turning a panic into an error so one
// broken step cannot take the run down without a summary.
func callAttempt(ctx context.Context, t *Task, attempt int) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error in the %s step: %v", t.Type, r)
		}
	}()
	return t.Attempt(ctx, attempt)
}
