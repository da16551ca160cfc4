package lock

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"khook.io/core/kube"
)

// Acquire takes the lock at loc for me. It creates the Lease (one request
// when the lock is free), or takes one that is free (released, broken by
// force-unlock) or that this run has watched stay unchanged for
// LeaseDuration (its holder is gone). A live holder's lock fails with
// *HeldError once the holder shows it is alive, or after opts.Timeout of
// waiting for it.
func Acquire(ctx context.Context, c kubernetes.Interface, loc Location, me Holder, opts Options) (*Lock, error) {
	return acquire(ctx, c.CoordinationV1().Leases(loc.Namespace), loc, me, opts)
}

func acquire(ctx context.Context, leases coordinationclient.LeaseInterface, loc Location, me Holder, opts Options) (*Lock, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 15 * time.Second
	}
	l := &Lock{leases: leases, loc: loc, me: me, clock: opts.Clock, labels: opts.Labels, changed: make(chan struct{})}
	a := &acquisition{l: l, opts: opts, start: opts.Clock.Now()}
	if opts.Timeout > 0 {
		a.deadline = a.start.Add(opts.Timeout)
	}
	ctx = kube.Unfenced(ctx)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("run lock of state record %s: %w", loc, context.Cause(ctx))
		}
		sent := l.clock.Now()
		created, err := a.create(ctx)
		switch {
		case err == nil:
			l.held(created, sent)
			return l, nil
		case apierrors.IsAlreadyExists(err):
			// held, or left free: look at it
		case apierrors.IsNotFound(err) && opts.EnsureNamespace != nil && !a.ensured:
			a.ensured = true
			if err := opts.EnsureNamespace(ctx); err != nil {
				return nil, err
			}
			continue
		default:
			return nil, l.requestError("create", err)
		}
		done, err := a.look(ctx)
		if err != nil || done {
			return a.result(err)
		}
	}
}

// acquisition is one Acquire: what it observed of the Lease.
type acquisition struct {
	l        *Lock
	opts     Options
	start    time.Time
	deadline time.Time // zero: no waiting
	ensured  bool
	// the Lease version this run has watched unchanged since since (its
	// clock), "" when there is none: nothing seen yet, or sight of it was
	// lost (a failed request), which starts the observation afresh
	rv    string
	since time.Time
	// alive: the Lease changed under a holder while this run watched
	alive bool
	told  string
	// took is the holder of the last Lease this run tried to take from
	// another run (broken: freed by force-unlock)
	took   *Holder
	broken bool
}

func (a *acquisition) result(err error) (*Lock, error) {
	if err != nil {
		return nil, err
	}
	return a.l, nil
}

func (a *acquisition) create(ctx context.Context) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.RequestTimeout)
	defer cancel()
	return a.l.leases.Create(ctx, a.l.fresh(nil), metav1.CreateOptions{FieldManager: ManagedBy})
}

// look reads the Lease and takes it, or watches it until it is free, has
// stayed unchanged for LeaseDuration, or its holder shows it is alive. It
// returns done once the lock is this run's; false (and no error) when the
// Lease is gone and the run should create it.
func (a *acquisition) look(ctx context.Context) (done bool, err error) {
	l := a.l
	for {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("run lock of state record %s: %w", l.loc, context.Cause(ctx))
		}
		rctx, cancel := context.WithTimeout(ctx, a.opts.RequestTimeout)
		cur, err := l.leases.Get(rctx, l.loc.Name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return false, nil // released meanwhile: create it
		case err != nil:
			if err := a.lostSight(ctx, "read", err); err != nil {
				return false, err
			}
			continue
		}
		h := holderOf(cur)
		now := l.clock.Now()
		if cur.ResourceVersion != a.rv {
			if a.rv != "" && h.ID != "" {
				a.alive = true // renewed, or taken by another live run
			}
			a.rv, a.since = cur.ResourceVersion, now
		}
		switch {
		case h.ID == "" && cur.Annotations[annBroken] != "":
			// freed by force-unlock: the run it was taken from is gone
			b := holderOf(cur)
			b.ID = cur.Annotations[annBroken]
			return a.take(ctx, cur, &b, true)
		case h.ID == "":
			return a.take(ctx, cur, nil, false) // free
		case h.ID == l.me.ID:
			// this run's own: a take whose answer was lost
			return a.take(ctx, cur, a.took, a.broken)
		case l.clock.Since(a.since) >= LeaseDuration:
			// unchanged for LeaseDuration while this run watched: its
			// holder is gone
			return a.take(ctx, cur, &h, false)
		case !a.deadline.IsZero() && !now.Before(a.deadline):
			return false, &HeldError{Location: l.loc, Holder: h, Now: now, Waited: now.Sub(a.start)}
		case a.deadline.IsZero() && a.alive:
			return false, &HeldError{Location: l.loc, Holder: h, Now: now}
		}
		if a.told != h.ID {
			a.told = h.ID
			switch {
			case !a.deadline.IsZero() && a.opts.Waiting != nil:
				a.opts.Waiting(h)
			case a.deadline.IsZero() && a.opts.Observing != nil && h.Stale(now):
				a.opts.Observing(h)
			}
		}
		// watch until the Lease changes, until it would have stayed
		// unchanged for LeaseDuration, or the deadline; never longer than
		// RenewPeriod before reading it again, so that a watch that died
		// silently cannot stand for an observation
		wake := min(LeaseDuration-l.clock.Since(a.since), RenewPeriod)
		if !a.deadline.IsZero() {
			wake = min(wake, a.deadline.Sub(now))
		}
		if err := a.waitChange(ctx, cur.ResourceVersion, max(wake, 0)); err != nil {
			if err := a.lostSight(ctx, "watch", err); err != nil {
				return false, err
			}
		}
	}
}

// lostSight handles a failed look at the Lease: the observation starts
// afresh (an API server that did not answer this run may not have
// answered the holder either). Without a Timeout the error ends the
// acquisition; with one, the run tries again until the deadline.
func (a *acquisition) lostSight(ctx context.Context, what string, err error) error {
	a.rv, a.alive = "", false
	if ctx.Err() != nil {
		return fmt.Errorf("run lock of state record %s: %w", a.l.loc, context.Cause(ctx))
	}
	if apierrors.IsForbidden(err) || a.deadline.IsZero() || !a.l.clock.Now().Before(a.deadline) {
		return a.l.requestError(what, err)
	}
	t := a.l.clock.NewTimer(retryInterval)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("run lock of state record %s: %w", a.l.loc, context.Cause(ctx))
	}
}

// take writes cur over as this run's, conditioned on its version: two
// takers cannot both win; took is the run it is taken from, if any (broken:
// freed by force-unlock). done is false when the Lease changed or went
// meanwhile (look again).
func (a *acquisition) take(ctx context.Context, cur *coordinationv1.Lease, took *Holder, broken bool) (bool, error) {
	l := a.l
	a.took, a.broken = took, broken
	rctx, cancel := context.WithTimeout(ctx, a.opts.RequestTimeout)
	defer cancel()
	sent := l.clock.Now()
	updated, err := l.leases.Update(rctx, l.fresh(cur), metav1.UpdateOptions{FieldManager: ManagedBy})
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		a.rv = "" // changed or gone: the observation starts again
		return false, nil
	case err != nil:
		return false, l.requestError("take", err)
	}
	l.took, l.broken = took, broken
	l.held(updated, sent)
	return true, nil
}

// waitChange watches the Lease until it is no longer at resourceVersion
// rv (changed or deleted), or for d (the lock's clock). The watch starts
// at the Lease as it is now (never "too old", however long ago the Lease
// last changed); its first event, the Lease as it is, counts only if it
// differs from rv. Credentials that may not watch the Lease look again
// after retryInterval instead.
func (a *acquisition) waitChange(ctx context.Context, rv string, d time.Duration) error {
	l := a.l
	t := l.clock.NewTimer(d)
	defer t.Stop()
	var events <-chan watch.Event
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := l.leases.Watch(wctx, metav1.ListOptions{FieldSelector: l.nameSelector()})
	switch {
	case apierrors.IsForbidden(err):
		resetTimer(t, min(d, retryInterval))
	case err != nil:
		return err
	default:
		defer w.Stop()
		events = w.ResultChan()
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("run lock of state record %s: %w", l.loc, context.Cause(ctx))
		case <-t.C():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil // the watch ended: look again
			}
			switch ev.Type {
			case watch.Bookmark:
			case watch.Added, watch.Modified:
				if lease, ok := ev.Object.(*coordinationv1.Lease); !ok || lease.ResourceVersion != rv {
					return nil // changed: look again
				}
			default:
				return nil // deleted, or an error: look again
			}
		}
	}
}

// Options are how Acquire waits.
type Options struct {
	// Timeout is how long to wait for a lock a live holder holds; zero
	// fails as soon as the holder shows it is alive (it renews the lock
	// while this run watches), which takes at most RenewPeriod.
	Timeout time.Duration
	// Waiting is told, once a wait (Timeout) begins and whenever the
	// holder changes, whom the run waits for.
	Waiting func(h Holder)
	// Observing is told, without a Timeout, when the run watches a lock
	// whose holder looks gone (its renewTime is older than LeaseDuration by
	// this machine's clock) to see whether it still renews it.
	Observing func(h Holder)
	// EnsureNamespace is called once when the Lease cannot be created for
	// want of its namespace; the create is tried again if it returns nil.
	EnsureNamespace func(ctx context.Context) error
	// RequestTimeout bounds each request of Acquire (15 s when zero).
	RequestTimeout time.Duration
	// Labels are added to the Lease (the spec's name).
	Labels map[string]string
	// Clock is the lock's (the real one when nil): renewTime is its wall
	// time; periods and observations are its durations.
	Clock clock.Clock
}
