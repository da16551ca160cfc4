package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"khook.io/core/kube"
)

// held makes lease, written by a request sent at sent, this run's and
// begins renewing it.
func (l *Lock) held(lease *coordinationv1.Lease, sent time.Time) {
	l.lease, l.confirmed = lease, sent
	l.lost, l.kick, l.stop, l.done = make(chan struct{}), make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go l.renew()
	go l.watch()
}

func (l *Lock) renewNow() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// renew renews the Lease every RenewPeriod until Release, and at once when
// Fence or the watch asks. A renewal that finds the Lease taken over or
// broken loses the lock. One that fails for want of an answer (an
// API-server outage) is tried again every second for as long as it takes:
// the lock is not lost, but its writes wait (Fence). One the API server
// refuses for another reason (the credentials lost the right) loses the
// lock once the server has refused every renewal for LeaseDuration (a
// server that just restarted may refuse for a moment, before its
// authorizer has caught up): by then another run may have taken it over.
func (l *Lock) renew() {
	defer close(l.done)
	// a renewal in flight ends when the lock is released: Release does not
	// wait for one that gets no answer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.stop
		cancel()
	}()
	t := l.clock.NewTimer(RenewPeriod)
	defer t.Stop()
	var refusedSince time.Time // zero: the last renewal was not refused
	for {
		select {
		case <-l.stop:
			return
		case <-t.C():
		case <-l.kick:
		}
		err := l.renewOnce(ctx)
		if ctx.Err() != nil {
			return // released meanwhile
		}
		l.mu.Lock()
		l.renewErr = err
		l.mu.Unlock()
		switch {
		case err == nil || !refused(err):
			refusedSince = time.Time{}
		case refusedSince.IsZero():
			refusedSince = l.clock.Now()
		}
		var lost *LostError
		switch {
		case errors.As(err, &lost):
			l.lose(lost)
			return
		case !refusedSince.IsZero() && l.clock.Since(refusedSince) >= LeaseDuration:
			l.lose(&LostError{Location: l.loc, Reason: fmt.Sprintf("the API server refused its renewals for %s: %v", LeaseDuration, err)})
			return
		case err != nil:
			resetTimer(t, retryInterval)
		default:
			resetTimer(t, RenewPeriod)
		}
	}
}

// refused reports whether the API server answered a request with a refusal
// (a 4xx other than a timeout or throttling), as opposed to not answering.
func refused(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && code != 408 && code != 429
}

func resetTimer(t clock.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C():
		default:
		}
	}
	t.Reset(d)
}

func (l *Lock) lose(err *LostError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr != nil {
		return
	}
	l.lostErr = err
	close(l.lost)
	l.broadcast()
}

// renewOnce writes a new renewTime over the version this run last wrote.
// A conflict is read: a Lease this run still holds (changed by someone
// else, or by a renewal of its own whose answer was lost) is renewed on
// its new version; one another run holds, or that force-unlock broke or
// deleted, is lost.
func (l *Lock) renewOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(kube.Unfenced(kube.WithoutRetries(ctx)), requestTimeout)
	defer cancel()
	for try := 0; ; try++ {
		l.mu.Lock()
		next := l.lease.DeepCopy()
		l.mu.Unlock()
		sent := l.clock.Now()
		now := metav1.NewMicroTime(sent)
		next.Spec.RenewTime = &now
		updated, err := l.leases.Update(ctx, next, metav1.UpdateOptions{FieldManager: ManagedBy})
		switch {
		case apierrors.IsNotFound(err):
			return &LostError{Location: l.loc, Reason: "its Lease was deleted (force-unlock?)"}
		case apierrors.IsConflict(err):
			cur, gerr := l.leases.Get(ctx, l.loc.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(gerr):
				return &LostError{Location: l.loc, Reason: "its Lease was deleted (force-unlock?)"}
			case gerr != nil:
				return gerr
			}
			h := holderOf(cur)
			switch {
			case h.ID == "" && cur.Annotations[annBroken] == l.me.ID:
				return &LostError{Location: l.loc, Reason: "force-unlock broke it"}
			case h.ID != l.me.ID:
				return &LostError{Location: l.loc, Reason: "taken over by " + h.Describe()}
			case cur.UID != next.UID:
				return &LostError{Location: l.loc, Reason: "its Lease was deleted and made again"}
			case try > 0:
				return errors.New("the Lease keeps changing under this run")
			}
			l.mu.Lock()
			l.lease = cur // still this run's: renew that version
			l.mu.Unlock()
			continue
		case err != nil:
			return err
		}
		l.mu.Lock()
		l.lease, l.confirmed, l.suspect = updated, sent, false
		l.broadcast()
		l.mu.Unlock()
		return nil
	}
}

// watch follows the Lease while the run holds it: an event showing another
// holder, a broken lock or a deleted Lease makes the run's writes wait
// (Fence) and its renewal run at once, which decides. So a lock broken by
// force-unlock stops the run's writes within the moment the event takes,
// not at its next renewal (credentials that may not watch the Lease, and
// the first second of a run, which most no-op runs do not outlive, leave
// that to the renewal).
func (l *Lock) watch() {
	ctx, cancel := context.WithCancel(kube.Unfenced(kube.WithoutRetries(context.Background())))
	defer cancel()
	go func() {
		select {
		case <-l.stop:
		case <-l.lost:
		}
		cancel()
	}()
	first := l.clock.NewTimer(watchAfter)
	select {
	case <-first.C():
	case <-ctx.Done():
	}
	first.Stop()
	for ctx.Err() == nil {
		// from the Lease as it is now: its first event is the Lease itself
		w, err := l.leases.Watch(ctx, metav1.ListOptions{FieldSelector: l.nameSelector()})
		switch {
		case apierrors.IsForbidden(err):
			return // credentials that may not watch: renewals alone tell
		case err == nil:
			l.follow(ctx, w)
			w.Stop()
		}
		t := l.clock.NewTimer(retryInterval)
		select {
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// follow reads w's events until it ends.
func (l *Lock) follow(ctx context.Context, w watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			switch ev.Type {
			case watch.Deleted:
				l.suspectNow()
			case watch.Added, watch.Modified:
				if lease, ok := ev.Object.(*coordinationv1.Lease); ok && holderOf(lease).ID != l.me.ID {
					l.suspectNow()
				}
			case watch.Error:
				return // too old a version, or the server's error: watch again
			}
		}
	}
}

func (l *Lock) suspectNow() {
	l.mu.Lock()
	l.suspect = true
	l.broadcast()
	l.mu.Unlock()
	l.renewNow()
}
