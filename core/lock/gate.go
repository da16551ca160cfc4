package lock

import (
	"context"
	"fmt"
	"time"

	"khook.io/core/kube"
)

// Fence returns nil when the run may write now: the lock is this run's as
// of a renewal sent less than RenewDeadline ago, and its watch has seen no
// other writer since. While that is not so (an API-server outage, a
// change of the Lease under it), it asks for a renewal at once and waits
// for it, or until ctx ends (ctx's error). A lost or released lock is a
// final error: the run writes no more. The run's record writes ask it
// first; all its writes pass WriteUntil through the clients' write gate
// (kube.WriteGate).
func (l *Lock) Fence(ctx context.Context) error {
	_, err := l.WriteUntil(ctx)
	return err
}

// WriteUntil is Fence with the deadline of a write sent now: the lock's
// last confirmation (when the renewal that confirmed it was sent) plus
// RenewDeadline. A write that has not landed by then is abandoned by the
// write gate: a taker's LeaseDuration of observation begins only after
// that renewal reached the server, so a write that lands before the
// deadline lands at least LeaseDuration-RenewDeadline before anyone can
// take the lock over (docs/spec.md decision 203).
func (l *Lock) WriteUntil(ctx context.Context) (time.Time, error) {
	for {
		l.mu.Lock()
		switch since := l.clock.Since(l.confirmed); {
		case l.lostErr != nil:
			err := l.lostErr
			l.mu.Unlock()
			return time.Time{}, err
		case l.released:
			l.mu.Unlock()
			return time.Time{}, &ReleasedError{Location: l.loc}
		case !l.suspect && since < RenewDeadline:
			l.mu.Unlock()
			return time.Now().Add(RenewDeadline - since), nil
		}
		changed := l.changed
		l.mu.Unlock()
		l.renewNow()
		select {
		case <-changed:
		case <-ctx.Done():
			since, why := l.unconfirmed()
			return time.Time{}, fmt.Errorf("run lock of state record %s not confirmed by the API server since %s ago%s: %w", l.loc, since.Round(time.Second), why, context.Cause(ctx))
		}
	}
}

// unconfirmed is how long ago the lock was last confirmed, and why the
// last renewal failed (" (the last renewal: ...)"; empty when it did not).
func (l *Lock) unconfirmed() (time.Duration, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	why := ""
	if l.renewErr != nil {
		why = " (the last renewal: " + kube.Reason(l.renewErr) + ")"
	}
	return l.clock.Since(l.confirmed), why
}

// broadcast wakes the writers waiting in Fence; l.mu is held.
func (l *Lock) broadcast() {
	close(l.changed)
	l.changed = make(chan struct{})
}
