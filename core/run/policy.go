package run

import (
	"errors"
	"fmt"

	"khook.io/core/event"
	"khook.io/core/spec"
)

// The policies of a run, each a function of a step's outcome: whether its
// needers may run, whether the run starts anything more, why a step that
// never ran was skipped, and how the run ended.

// interruptedReason is the skip reason of the steps an interruption kept
// from starting.
const interruptedReason = "not run: the run was interrupted"

// satisfies reports whether a step that ended as res lets the steps that
// need it run: it succeeded, or was skipped (a when: exclusion, a resumed
// step, a skipIf that found it done).
func satisfies(res StepResult) bool {
	return res.Status == StatusOK || res.Status == StatusSkipped
}

// stopError is why a run starts no new step; reason is the skip reason
// of the steps it keeps from starting, interrupted whether an
// interruption stopped it.
type stopError struct {
	reason      string
	interrupted bool
}

func (e stopError) Error() string { return e.reason }

// stopAfter is whether a step that ran and ended as res stops the run: an
// interruption does, and so does a failure under onError: fail. Running
// steps go on either way.
func stopAfter(t *Task, res StepResult) error {
	switch {
	case res.Status == StatusInterrupted:
		return stopError{reason: interruptedReason, interrupted: true}
	case res.Status == StatusFailed && t.OnError != spec.OnErrorContinue:
		return stopError{reason: fmt.Sprintf("not run: step %s failed (onError: fail)", res.Name)}
	}
	return nil
}

// blockedReason is the skip reason of a step whose need ended as need
// without satisfying it.
func blockedReason(need StepResult) string {
	switch need.Status {
	case StatusSkipped:
		return fmt.Sprintf("needs %s, which was skipped", need.Name)
	case StatusInterrupted:
		return fmt.Sprintf("needs %s, which was interrupted", need.Name)
	}
	return fmt.Sprintf("needs %s, which failed", need.Name)
}

// unreached is the skip reason and cause of a step the run never
// reached: cause is what stopped the run (the run's context ended: an
// interruption; or a step's stopAfter), or nil when its needs never
// completed.
func unreached(cause error) (string, event.SkipCause) {
	var stop stopError
	switch {
	case cause == nil:
		return "not run: its needs never completed", event.SkipUnreached
	case errors.As(cause, &stop) && stop.interrupted:
		return stop.reason, event.SkipInterrupted
	case errors.As(cause, &stop):
		return stop.reason, event.SkipUnreached
	}
	return interruptedReason, event.SkipInterrupted
}

// runStatus is how a run whose steps ended as steps ended: interrupted
// when a step was cut short or one never started because of it (a
// cancellation after the last step ended changes nothing), else failed
// when a step failed, else ok.
func runStatus(steps []StepResult) string {
	status := RunOK
	for _, s := range steps {
		switch {
		case s.Status == StatusInterrupted || s.Skip == event.SkipInterrupted:
			return RunInterrupted
		case s.Status == StatusFailed:
			status = RunFailed
		}
	}
	return status
}
