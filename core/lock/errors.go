package lock

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// HeldError is a lock held by a live holder: one that renewed it while
// this run watched.
type HeldError struct {
	Location Location
	Holder   Holder
	Now      time.Time
	// Waited is how long the run waited for it (Options.Timeout), zero
	// when it did not.
	Waited time.Duration
	// Setting is how the caller's user names the wait for a held lock
	// (Options.Timeout), and Give how they give it a duration (the CLI:
	// "--lock-timeout", "pass --lock-timeout DURATION"); empty: "the
	// lock-timeout setting", "set it". The lock names no caller's flag.
	Setting, Give string
}

func (e *HeldError) Error() string {
	setting, give := e.Setting, e.Give
	if setting == "" {
		setting = "the lock-timeout setting"
	}
	if give == "" {
		give = "set " + setting
	}
	s := fmt.Sprintf("state record %s is locked by another run: %s, %s", e.Location, e.Holder.Describe(), e.Holder.Since(e.Now))
	if e.Waited > 0 {
		s += fmt.Sprintf("; waited %s for it (%s)", e.Waited.Round(time.Second), setting)
	}
	return s + fmt.Sprintf(". Wait for that run to end, or %s to wait for it; if it is known to be dead, the next run takes its lock over once it has seen it unchanged for %s, or break it now with force-unlock %s", give, LeaseDuration, e.Holder.ID)
}

// LostError is a lock its holder lost while running: another run took it
// over, force-unlock broke it, or the API server refused its renewals.
type LostError struct {
	Location Location
	Reason   string
}

func (e *LostError) Error() string {
	return fmt.Sprintf("run lock of state record %s lost: %s", e.Location, e.Reason)
}

// ReleasedError is a write asked of a lock its run has released.
type ReleasedError struct{ Location Location }

func (e *ReleasedError) Error() string {
	return fmt.Sprintf("run lock of state record %s: released; the run writes no more", e.Location)
}

// ForbiddenError is a lock the credentials may not take.
type ForbiddenError struct {
	Location Location
	Err      error
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("run lock of state record %s: the credentials may not take it (%v): a run with a state record needs get, create, update and delete on leases.coordination.k8s.io (and watch, to see at once when the lock is broken or freed) in namespace %s (see examples/in-cluster/rbac.yaml); khook does not run unlocked", e.Location, e.Err, e.Location.Namespace)
}

func (e *ForbiddenError) Unwrap() error { return e.Err }

func (l *Lock) requestError(what string, err error) error {
	if apierrors.IsForbidden(err) {
		return &ForbiddenError{Location: l.loc, Err: err}
	}
	return fmt.Errorf("run lock of state record %s: %s: %w", l.loc, what, err)
}
