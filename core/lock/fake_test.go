package lock

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// fakeLeases is an in-memory Lease API for the lock's pure logic (its
// decisions under clocks and outages): one Lease, with resourceVersions,
// the API server's optimistic concurrency (409 on a stale version),
// preconditions on delete, and watches. The real API server is the
// integration tests'.
type fakeLeases struct {
	coordinationclient.LeaseInterface // not called: panics

	mu       sync.Mutex
	rv       int
	uid      int
	lease    *coordinationv1.Lease // nil: none
	watchers []*watch.RaceFreeFakeWatcher
	// down makes every request fail as an unreachable API server does
	down bool
	// loseAnswer makes the next update land but fail as a broken
	// connection does
	loseAnswer bool
	// forbid makes every update fail with 403 Forbidden
	forbid bool
	// updates counts the updates that landed, by holder
	updates map[string]int
}

func newFakeLeases() *fakeLeases { return &fakeLeases{updates: map[string]int{}} }

var gr = coordinationv1.Resource("leases")

func refusedErr() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

func resetErr() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// setDown makes the API server unreachable (true: its watches end) or
// reachable again.
func (f *fakeLeases) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down {
		for _, w := range f.watchers {
			w.Stop()
		}
		f.watchers = nil
	}
}

func (f *fakeLeases) current() *coordinationv1.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease == nil {
		return nil
	}
	return f.lease.DeepCopy()
}

// store keeps l as the new version and tells the watchers; f.mu is held.
func (f *fakeLeases) store(l *coordinationv1.Lease, ev watch.EventType) *coordinationv1.Lease {
	f.rv++
	l = l.DeepCopy()
	l.ResourceVersion = strconv.Itoa(f.rv)
	f.lease = l
	if l.Spec.HolderIdentity != nil {
		f.updates[*l.Spec.HolderIdentity]++
	}
	f.notify(ev, l)
	return l.DeepCopy()
}

func (f *fakeLeases) notify(ev watch.EventType, l *coordinationv1.Lease) {
	for _, w := range f.watchers {
		if !w.IsStopped() {
			w.Action(ev, l.DeepCopy())
		}
	}
}

func (f *fakeLeases) Create(_ context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.down:
		return nil, refusedErr()
	case f.lease != nil:
		return nil, apierrors.NewAlreadyExists(gr, l.Name)
	}
	f.uid++
	l = l.DeepCopy()
	l.UID = types.UID("uid-" + strconv.Itoa(f.uid))
	return f.store(l, watch.Added), nil
}

func (f *fakeLeases) Get(_ context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.down:
		return nil, refusedErr()
	case f.lease == nil:
		return nil, apierrors.NewNotFound(gr, name)
	}
	return f.lease.DeepCopy(), nil
}

func (f *fakeLeases) List(_ context.Context, _ metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, refusedErr()
	}
	list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(f.rv)}}
	if f.lease != nil {
		list.Items = append(list.Items, *f.lease.DeepCopy())
	}
	return list, nil
}

func (f *fakeLeases) Update(_ context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.down:
		return nil, refusedErr()
	case f.forbid:
		return nil, apierrors.NewForbidden(gr, l.Name, errors.New("the credentials lost the right"))
	case f.lease == nil:
		return nil, apierrors.NewNotFound(gr, l.Name)
	case l.ResourceVersion != f.lease.ResourceVersion || (l.UID != "" && l.UID != f.lease.UID):
		return nil, apierrors.NewConflict(gr, l.Name, nil)
	}
	out := f.store(l, watch.Modified)
	if f.loseAnswer {
		f.loseAnswer = false
		return nil, resetErr()
	}
	return out, nil
}

func (f *fakeLeases) Delete(_ context.Context, name string, opts metav1.DeleteOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.down:
		return refusedErr()
	case f.lease == nil:
		return apierrors.NewNotFound(gr, name)
	}
	if p := opts.Preconditions; p != nil {
		if (p.UID != nil && *p.UID != f.lease.UID) || (p.ResourceVersion != nil && *p.ResourceVersion != f.lease.ResourceVersion) {
			return apierrors.NewConflict(gr, name, nil)
		}
	}
	gone := f.lease
	f.lease = nil
	f.rv++
	f.notify(watch.Deleted, gone)
	return nil
}

// Watch starts where the API server starts a watch without a
// resourceVersion (the lock's): at the Lease as it is now, sent first as
// an Added event, then every change after the call. A watch from a given
// resourceVersion would replay what came after it: the fake keeps no
// history, so it refuses one.
func (f *fakeLeases) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.down:
		return nil, refusedErr()
	case opts.ResourceVersion != "":
		return nil, errors.New("fakeLeases: a watch from a resourceVersion is not modelled")
	}
	w := watch.NewRaceFreeFake()
	if f.lease != nil {
		w.Add(f.lease.DeepCopy())
	}
	f.watchers = append(f.watchers, w)
	return w, nil
}
