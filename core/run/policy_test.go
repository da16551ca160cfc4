package run

import (
	"context"
	"fmt"
	"testing"

	"khook.io/core/event"
	"khook.io/core/spec"
)

func TestSatisfies(t *testing.T) {
	for status, want := range map[string]bool{StatusOK: true, StatusSkipped: true, StatusFailed: false, StatusInterrupted: false} {
		if got := satisfies(StepResult{Status: status}); got != want {
			t.Errorf("%s: satisfies = %v, want %v", status, got, want)
		}
	}
}

func TestStopAfter(t *testing.T) {
	tests := []struct {
		onError, status string
		want            string // "" for no stop
	}{
		{spec.OnErrorFail, StatusOK, ""},
		{spec.OnErrorFail, StatusSkipped, ""},
		{spec.OnErrorFail, StatusFailed, "not run: step x failed (onError: fail)"},
		{"", StatusFailed, "not run: step x failed (onError: fail)"},
		{spec.OnErrorContinue, StatusFailed, ""},
		{spec.OnErrorContinue, StatusInterrupted, "not run: the run was interrupted"},
		{spec.OnErrorFail, StatusInterrupted, "not run: the run was interrupted"},
	}
	for _, tt := range tests {
		t.Run(tt.onError+" "+tt.status, func(t *testing.T) {
			err := stopAfter(&Task{OnError: tt.onError}, StepResult{Name: "x", Status: tt.status})
			if got := fmt.Sprint(err); (err == nil) != (tt.want == "") || (err != nil && got != tt.want) {
				t.Fatalf("stopAfter = %v, want %q", err, tt.want)
			}
			// the reason of what the stop leaves unreached is its text,
			// its cause an interruption's when an interruption stopped it
			if err == nil {
				return
			}
			reason, cause := unreached(err)
			if wantCause := map[bool]event.SkipCause{true: event.SkipInterrupted, false: event.SkipUnreached}[tt.status == StatusInterrupted]; reason != tt.want || cause != wantCause {
				t.Fatalf("unreached: %q, cause %v, want %v", reason, cause, wantCause)
			}
		})
	}
}

func TestBlockedReason(t *testing.T) {
	for status, want := range map[string]string{
		StatusFailed:      "needs db, which failed",
		StatusSkipped:     "needs db, which was skipped",
		StatusInterrupted: "needs db, which was interrupted",
	} {
		if got := blockedReason(StepResult{Name: "db", Status: status}); got != want {
			t.Errorf("%s: %q, want %q", status, got, want)
		}
	}
}

func TestUnreachedReason(t *testing.T) {
	tests := []struct {
		cause     error
		want      string
		wantCause event.SkipCause
	}{
		{nil, "not run: its needs never completed", event.SkipUnreached},
		{context.Canceled, "not run: the run was interrupted", event.SkipInterrupted},
		{context.DeadlineExceeded, "not run: the run was interrupted", event.SkipInterrupted},
		{stopError{reason: "not run: step a failed (onError: fail)"}, "not run: step a failed (onError: fail)", event.SkipUnreached},
		{fmt.Errorf("wrapped: %w", stopError{reason: "not run: step b failed (onError: fail)"}), "not run: step b failed (onError: fail)", event.SkipUnreached},
		{stopError{reason: interruptedReason, interrupted: true}, "not run: the run was interrupted", event.SkipInterrupted},
	}
	for _, tt := range tests {
		if got, cause := unreached(tt.cause); got != tt.want || cause != tt.wantCause {
			t.Errorf("%v: %q (cause %v), want %q (cause %v)", tt.cause, got, cause, tt.want, tt.wantCause)
		}
	}
}

func TestRunStatus(t *testing.T) {
	ok := StepResult{Status: StatusOK}
	failed := StepResult{Status: StatusFailed}
	interrupted := StepResult{Status: StatusInterrupted}
	skipped := StepResult{Status: StatusSkipped, SkipReason: "needs a, which failed"}
	notStarted := StepResult{Status: StatusSkipped, SkipReason: interruptedReason, Skip: event.SkipInterrupted}
	tests := []struct {
		name  string
		steps []StepResult
		want  string
	}{
		{"no steps", nil, RunOK},
		{"all ok or skipped", []StepResult{ok, skipped, ok}, RunOK},
		{"a failure", []StepResult{ok, failed, skipped}, RunFailed},
		{"an interrupted step wins over a failure", []StepResult{failed, interrupted, ok}, RunInterrupted},
		{"a step the interruption kept from starting", []StepResult{ok, notStarted}, RunInterrupted},
		{"failed before the interruption", []StepResult{failed, notStarted}, RunInterrupted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runStatus(tt.steps); got != tt.want {
				t.Fatalf("runStatus = %s, want %s", got, tt.want)
			}
		})
	}
}
