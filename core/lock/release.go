package lock

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/kube"
)

// Release stops renewing and deletes the Lease, only if it is still this
// run's (a precondition on the version this run last wrote; the delete is
// sent again after a lost answer, whose NotFound is then its own work).
// While the API server does not answer, it tries until ctx ends, for
// ReleaseTimeout at most; the lock is then left to the next run, which
// takes it over once it has seen it unchanged for LeaseDuration. Releasing
// a lost lock only stops renewing. From the call on, Fence refuses the
// run's writes. ctx should outlive the run's cancellation (the engine
// passes one that ends kube.Grace after Ctrl-C).
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	l.released = true
	l.broadcast()
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	if l.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(kube.Unfenced(ctx), ReleaseTimeout)
	defer cancel()
	for try := 0; ; try++ {
		l.mu.Lock()
		uid, rv := l.lease.UID, l.lease.ResourceVersion
		l.mu.Unlock()
		err := l.leases.Delete(ctx, l.loc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && try == 0:
			// a renewal whose answer was lost may have landed: delete the
			// version it wrote if the Lease is still this run's
			cur, gerr := l.leases.Get(ctx, l.loc.Name, metav1.GetOptions{})
			if gerr == nil && holderOf(cur).ID == l.me.ID && cur.UID == uid {
				l.mu.Lock()
				l.lease = cur
				l.mu.Unlock()
				continue
			}
			if apierrors.IsNotFound(gerr) {
				return nil
			}
			return &LostError{Location: l.loc, Reason: "another run took it over before this run released it"}
		case apierrors.IsConflict(err):
			return &LostError{Location: l.loc, Reason: "another run took it over before this run released it"}
		}
		return fmt.Errorf("run lock of state record %s: not released (%v): the next run takes it over once it has seen it unchanged for %s, or break it now with force-unlock %s", l.loc, err, LeaseDuration, l.me.ID)
	}
}
