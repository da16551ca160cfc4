package run

import (
	"context"
	"fmt"
	"testing"

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
			// the reason of what the stop leaves unreached is its text
			if err != nil && unreachedReason(err) != tt.want {
				t.Fatalf("unreached reason %q", unreachedReason(err))
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
		cause error
		want  string
	}{
		{nil, "not run: its needs never completed"},
		{context.Canceled, "not run: the run was interrupted"},
		{context.DeadlineExceeded, "not run: the run was interrupted"},
		{stopError("not run: step a failed (onError: fail)"), "not run: step a failed (onError: fail)"},
		{fmt.Errorf("wrapped: %w", stopError("not run: step b failed (onError: fail)")), "not run: step b failed (onError: fail)"},
	}
	for _, tt := range tests {
		if got := unreachedReason(tt.cause); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.cause, got, tt.want)
		}
	}
}

func TestRunStatus(t *testing.T) {
	ok := StepResult{Status: StatusOK}
	failed := StepResult{Status: StatusFailed}
	interrupted := StepResult{Status: StatusInterrupted}
	skipped := StepResult{Status: StatusSkipped, SkipReason: "needs a, which failed"}
	notStarted := StepResult{Status: StatusSkipped, SkipReason: interruptedReason}
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
