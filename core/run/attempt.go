package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"khook.io/core/event"
)

// The attempt policy: each attempt bounded by the task's timeout, more
// attempts after a failed one (Retries, RetryDelay apart), and an
// interruption (the run's context ended) told apart from a failure.

// attemptLoop runs a task's attempts: each bounded by the task's
// timeout, up to Retries more after a failed one, RetryDelay apart. An
// attempt that ends because the run's context did is interrupted, not
// failed, and so is a wait for the next try.
func attemptLoop(ctx context.Context, t *Task, res StepResult, sink event.Sink) StepResult {
	res.Started = time.Now()
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		sink.Emit(event.Event{Kind: event.StepStarted, Time: time.Now(), Step: t.Name, Type: t.Type, Attempt: attempt})
		out, err := attemptOnce(ctx, t, attempt)
		switch {
		case err == nil:
			res.Status, res.Message, res.Changed = StatusOK, out.Message, out.Changed
			res.Drift, res.Kept = out.Drift, out.Kept
			if out.Skipped {
				res.Status, res.SkipReason = StatusSkipped, out.SkipReason
			}
			return ended(res, res.Status, "")
		case ctx.Err() != nil:
			return ended(res, StatusInterrupted, interruptedError(err))
		case attempt > t.Retries:
			return ended(res, StatusFailed, err.Error())
		}
		sink.Emit(event.Event{Kind: event.StepRetrying, Time: time.Now(), Step: t.Name, Type: t.Type, Attempt: attempt, Message: err.Error(), Delay: t.RetryDelay})
		if !sleep(ctx, t.RetryDelay) {
			return ended(res, StatusInterrupted, fmt.Sprintf("interrupted while waiting to retry (attempt %d failed: %v)", attempt, err))
		}
	}
}

// attemptOnce makes one attempt bounded by the task's timeout; an attempt
// that outlives it fails "timed out after" the timeout.
func attemptOnce(ctx context.Context, t *Task, attempt int) (Outcome, error) {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if t.Timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, t.Timeout)
	}
	defer cancel()
	out, err := callAttempt(actx, t, attempt)
	if err != nil && actx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		err = fmt.Errorf("timed out after %s: %w", t.Timeout, err)
	}
	return out, err
}

// sleep waits d; false when ctx ended first. It does not wait at all when
// d is not positive.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ended is res finished now with status and error text (none for a
// success).
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
