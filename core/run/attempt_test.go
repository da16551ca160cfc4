package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"khook.io/core/event"
)

// TestAttemptLoop: the attempt policy alone: timeouts, retries and their
// delay, interrupted against failed, with the events of each attempt.
func TestAttemptLoop(t *testing.T) {
	flaky := func(okFrom int) AttemptFunc {
		return func(_ context.Context, attempt int) (Outcome, error) {
			if attempt < okFrom {
				return Outcome{}, fmt.Errorf("attempt %d failed", attempt)
			}
			return Outcome{Message: "up"}, nil
		}
	}
	untilDone := func(ctx context.Context, _ int) (Outcome, error) {
		<-ctx.Done()
		return Outcome{}, ctx.Err()
	}
	tests := []struct {
		name string
		task Task
		// cancel cancels the run's context once this event is seen
		cancelOn event.Kind
		status   string
		attempts int
		text     string // the message, skip reason or error; a prefix for timeouts
		events   string
	}{
		{name: "ok", task: Task{Attempt: flaky(1)},
			status: StatusOK, attempts: 1, text: "up", events: "[step-started]"},
		{name: "skipIf", task: Task{Attempt: func(context.Context, int) (Outcome, error) {
			return Outcome{Skipped: true, SkipReason: "skipIf installed: release exists", Message: "m"}, nil
		}}, status: StatusSkipped, attempts: 1, text: "skipIf installed: release exists", events: "[step-started]"},
		{name: "failed, no retries", task: Task{Attempt: flaky(2)},
			status: StatusFailed, attempts: 1, text: "attempt 1 failed", events: "[step-started]"},
		{name: "retried until it succeeds", task: Task{Retries: 3, Attempt: flaky(3)},
			status: StatusOK, attempts: 3, text: "up", events: "[step-started step-retrying step-started step-retrying step-started]"},
		{name: "retries exhausted", task: Task{Retries: 1, Attempt: flaky(5)},
			status: StatusFailed, attempts: 2, text: "attempt 2 failed", events: "[step-started step-retrying step-started]"},
		{name: "each attempt times out", task: Task{Timeout: 10 * time.Millisecond, Retries: 1, Attempt: untilDone},
			status: StatusFailed, attempts: 2, text: "timed out after 10ms: context deadline exceeded", events: "[step-started step-retrying step-started]"},
		{name: "interrupted while running", task: Task{Timeout: time.Hour, Retries: 3, Attempt: untilDone}, cancelOn: event.StepStarted,
			status: StatusInterrupted, attempts: 1, text: "interrupted", events: "[step-started]"},
		{name: "interrupted, saying what it left", task: Task{Attempt: func(ctx context.Context, _ int) (Outcome, error) {
			<-ctx.Done()
			return Outcome{}, fmt.Errorf("waiting: %w", noted{ctx.Err()})
		}}, cancelOn: event.StepStarted,
			status: StatusInterrupted, attempts: 1, text: "interrupted: deleted Job ns/x, which was still running", events: "[step-started]"},
		{name: "interrupted while waiting to retry", task: Task{Retries: 2, RetryDelay: time.Hour, Attempt: flaky(5)}, cancelOn: event.StepRetrying,
			status: StatusInterrupted, attempts: 1, text: "interrupted while waiting to retry (attempt 1 failed: attempt 1 failed)", events: "[step-started step-retrying]"},
		{name: "a panic is a failure", task: Task{Type: "job", Attempt: func(context.Context, int) (Outcome, error) { panic("nil map") }},
			status: StatusFailed, attempts: 1, text: "internal error in the job step: nil map", events: "[step-started]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var kinds []event.Kind
			sink := event.SinkFunc(func(e event.Event) {
				kinds = append(kinds, e.Kind)
				if e.Kind == tt.cancelOn {
					cancel()
				}
			})
			tt.task.Name = "s"
			res := attemptLoop(ctx, &tt.task, StepResult{Name: "s"}, sink)
			text := res.Error
			switch res.Status {
			case StatusOK:
				text = res.Message
			case StatusSkipped:
				text = res.SkipReason
			}
			if res.Status != tt.status || res.Attempts != tt.attempts || text != tt.text {
				t.Errorf("got %s after %d attempts: %q; want %s after %d: %q", res.Status, res.Attempts, text, tt.status, tt.attempts, tt.text)
			}
			if got := fmt.Sprint(kinds); got != tt.events {
				t.Errorf("events %s, want %s", got, tt.events)
			}
			if res.Started.IsZero() || res.Finished.Before(res.Started) || res.Duration != res.Finished.Sub(res.Started) {
				t.Errorf("times: started %v finished %v duration %v", res.Started, res.Finished, res.Duration)
			}
		})
	}
}

// TestRetryDelay: the next attempt starts RetryDelay after a failed one,
// and the retrying event says how long it waits and why.
func TestRetryDelay(t *testing.T) {
	var starts []time.Time
	var retrying []event.Event
	sink := event.SinkFunc(func(e event.Event) {
		switch e.Kind {
		case event.StepStarted:
			starts = append(starts, time.Now())
		case event.StepRetrying:
			retrying = append(retrying, e)
		}
	})
	task := Task{Name: "s", Retries: 1, RetryDelay: 30 * time.Millisecond, Attempt: fail("not yet")}
	attemptLoop(context.Background(), &task, StepResult{}, sink)
	if len(starts) != 2 || starts[1].Sub(starts[0]) < 30*time.Millisecond {
		t.Fatalf("attempts started at %v", starts)
	}
	if e := retrying[0]; e.Attempt != 1 || e.Message != "not yet" || e.Delay != 30*time.Millisecond {
		t.Fatalf("retrying event %+v", e)
	}
}

// TestTimeoutIsPerAttempt: each attempt gets a deadline of its own, the
// timeout from its start, and the run's own deadline ending is an
// interruption, not a timeout.
func TestTimeoutIsPerAttempt(t *testing.T) {
	var starts, deadlines, ends []time.Time
	task := Task{Name: "s", Timeout: time.Minute, Retries: 2, Attempt: func(ctx context.Context, _ int) (Outcome, error) {
		starts = append(starts, time.Now())
		dl, _ := ctx.Deadline()
		deadlines = append(deadlines, dl)
		time.Sleep(time.Millisecond)
		ends = append(ends, time.Now())
		return Outcome{}, errors.New("no")
	}}
	attemptLoop(context.Background(), &task, StepResult{}, event.Discard)
	for i, dl := range deadlines {
		if dl.After(starts[i].Add(time.Minute)) || (i > 0 && !dl.After(ends[i-1].Add(time.Minute-time.Millisecond))) {
			t.Fatalf("attempt %d started %v with deadline %v; the one before ended %v", i+1, starts[i], dl, ends[max(i-1, 0)])
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	task = Task{Name: "s", Timeout: time.Hour, Attempt: func(ctx context.Context, _ int) (Outcome, error) {
		<-ctx.Done()
		return Outcome{}, ctx.Err()
	}}
	res := attemptLoop(ctx, &task, StepResult{}, event.Discard)
	if res.Status != StatusInterrupted || strings.Contains(res.Error, "timed out") {
		t.Fatalf("the run's deadline: %s %q", res.Status, res.Error)
	}
}
