// Package lock is khook's run lock: a coordination.k8s.io/v1 Lease next to
// a spec's state record, held by the one run (apply or destroy) that may
// write the record, renewed while it runs and released when it ends, as
// Terraform locks its state and Kubernetes controllers elect a leader.
//
// A run that finds the lock held by a live holder fails at once with the
// holder's details (HeldError), or waits for it (Options.Timeout). A
// holder that stopped renewing (a killed process) loses the lock once
// LeaseDuration has passed since its last renewal, and the next run takes
// it over; that run then knows the holder is gone (Lock.TookOver). A
// holder that can no longer renew, or finds the Lease taken, has lost the
// lock (Lock.Lost) and must stop.
package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// The lock's timing, as client-go's leader election sets it
// (LeaseDuration 15 s, RenewDeadline 10 s): a holder renews every
// RenewPeriod; one that has not renewed for RenewDeadline stops its run;
// the lock of one that has not renewed for LeaseDuration may be taken.
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RenewPeriod   = 5 * time.Second
)

// requestTimeout bounds one request of the lock (a renewal, the release).
const requestTimeout = 5 * time.Second

// Labels and annotations of the Lease.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "khook"

	annUser    = "khook.io/holder-user"
	annHost    = "khook.io/holder-host"
	annPID     = "khook.io/holder-pid"
	annVersion = "khook.io/holder-version"
	annCommand = "khook.io/holder-command"
	annContext = "khook.io/holder-context"
)

// Location names a lock: the Lease's namespace and name (those of the
// state record it guards).
type Location struct{ Namespace, Name string }

func (l Location) String() string { return l.Namespace + "/" + l.Name }

// Holder is who holds, or asks for, a lock.
type Holder struct {
	// ID is the run's id, the Lease's holderIdentity.
	ID      string
	User    string // the operating-system user, user@host in messages
	Host    string
	PID     int
	Version string // khook's
	Command string // apply, destroy
	// Context is the kubeconfig context the run connected through, if any.
	Context string
	// Acquired and Renewed are the Lease's acquireTime and renewTime
	// (zero for a Holder not read from a Lease).
	Acquired, Renewed time.Time
}

// NewHolder describes this process as a holder of a run of command, with
// a new random run id.
func NewHolder(command, version, kubeContext string) Holder {
	h := Holder{ID: NewID(), PID: os.Getpid(), Version: version, Command: command, Context: kubeContext}
	if u, err := user.Current(); err == nil && u.Username != "" {
		h.User = u.Username
	} else if v := os.Getenv("USER"); v != "" {
		h.User = v
	} else {
		h.User = "uid " + strconv.Itoa(os.Getuid())
	}
	if host, err := os.Hostname(); err == nil {
		h.Host = host
	}
	return h
}

// NewID is a new random run id: 16 hexadecimal digits, fit for a label
// value.
func NewID() string { return fmt.Sprintf("%016x", rand.Uint64()) }

// Describe says who the holder is in one phrase: "alice@ci-7 (pid 42,
// khook v0.1.0, apply, run 3f2a...)".
func (h Holder) Describe() string {
	who := h.User
	if h.Host != "" {
		who += "@" + h.Host
	}
	if who == "" {
		who = "an unknown holder"
	}
	s := fmt.Sprintf("%s (", who)
	if h.PID > 0 {
		s += fmt.Sprintf("pid %d, ", h.PID)
	}
	if h.Version != "" {
		s += "khook " + h.Version + ", "
	}
	if h.Command != "" {
		s += h.Command + ", "
	}
	if h.Context != "" {
		s += "context " + h.Context + ", "
	}
	return s + "run " + h.ID + ")"
}

// Since says when the holder started and last renewed, relative to now:
// "started 40s ago, last renewed 2s ago".
func (h Holder) Since(now time.Time) string {
	return fmt.Sprintf("started %s ago, last renewed %s ago", ago(now, h.Acquired), ago(now, h.Renewed))
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return max(now.Sub(t), 0).Round(time.Second).String()
}

// Expired reports whether a holder that last renewed at h.Renewed has lost
// the lock by now: it has not renewed for LeaseDuration.
func (h Holder) Expired(now time.Time) bool {
	return !h.Renewed.IsZero() && now.Sub(h.Renewed) > LeaseDuration
}

// HeldError is a lock held by a live holder.
type HeldError struct {
	Location Location
	Holder   Holder
	Now      time.Time
	// Waited is how long the run waited for it (--lock-timeout), zero when
	// it did not.
	Waited time.Duration
}

func (e *HeldError) Error() string {
	s := fmt.Sprintf("state record %s is locked by another run: %s, %s", e.Location, e.Holder.Describe(), e.Holder.Since(e.Now))
	if e.Waited > 0 {
		s += fmt.Sprintf("; waited %s for it (--lock-timeout)", e.Waited.Round(time.Second))
	}
	return s + fmt.Sprintf(". Wait for that run to end, or pass --lock-timeout DURATION to wait for it; if it is known to be dead, its lock expires %s after its last renewal, or break it now with force-unlock %s", LeaseDuration, e.Holder.ID)
}

// LostError is a lock its holder lost while running: another run took it
// over, or it could not be renewed in time.
type LostError struct {
	Location Location
	Reason   string
}

func (e *LostError) Error() string {
	return fmt.Sprintf("run lock of state record %s lost: %s", e.Location, e.Reason)
}

// ForbiddenError is a lock the credentials may not take.
type ForbiddenError struct {
	Location Location
	Err      error
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("run lock of state record %s: the credentials may not take it (%v): a run with a state record needs get, create, update and delete on leases.coordination.k8s.io (and watch, to wait with --lock-timeout) in namespace %s (see examples/in-cluster/rbac.yaml); khook does not run unlocked", e.Location, e.Err, e.Location.Namespace)
}

func (e *ForbiddenError) Unwrap() error { return e.Err }

// Options are how Acquire waits.
type Options struct {
	// Timeout is how long to wait for a held lock; zero fails at once.
	Timeout time.Duration
	// Waiting is told, once a wait begins and whenever the holder
	// changes, whom the run waits for.
	Waiting func(h Holder)
	// Labels are added to the Lease (the spec's name).
	Labels map[string]string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Lock is a held run lock. Its holder renews it in the background until
// Release; Lost is closed when it was lost.
type Lock struct {
	leases coordinationclient.LeaseInterface
	loc    Location
	me     Holder
	now    func() time.Time
	labels map[string]string
	took   *Holder

	mu    sync.Mutex
	lease *coordinationv1.Lease // as last written by this run

	lost    chan struct{}
	lostErr error
	stop    chan struct{}
	done    chan struct{}
}

// Acquire takes the lock at loc for me: creates the Lease, or takes over
// one that is free (released) or expired (its holder stopped renewing for
// LeaseDuration, by this machine's clock or, while waiting, by what this
// run observed). A live holder's lock fails with *HeldError at once, or
// after opts.Timeout of waiting for it (watching the Lease).
func Acquire(ctx context.Context, c kubernetes.Interface, loc Location, me Holder, opts Options) (*Lock, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Lock{leases: c.CoordinationV1().Leases(loc.Namespace), loc: loc, me: me, now: opts.Now, labels: opts.Labels}
	start := opts.Now()
	var deadline time.Time
	if opts.Timeout > 0 {
		deadline = start.Add(opts.Timeout)
	}
	// observed: a Lease version this run has seen unchanged since when,
	// so that a holder whose clock runs behind still expires
	var observedRV string
	var observedAt time.Time
	var told string
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("run lock of state record %s: %w", loc, context.Cause(ctx))
		}
		cur, err := l.leases.Get(ctx, loc.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, err := l.leases.Create(ctx, l.fresh(nil), metav1.CreateOptions{FieldManager: ManagedBy})
			switch {
			case apierrors.IsAlreadyExists(err):
				continue // another run created it meanwhile
			case err != nil:
				return nil, l.requestError("create", err)
			}
			l.lease = created
			l.start()
			return l, nil
		case err != nil:
			return nil, l.requestError("read", err)
		}
		holder := holderOf(cur)
		now := opts.Now()
		if cur.ResourceVersion != observedRV {
			observedRV, observedAt = cur.ResourceVersion, now
		}
		free := holder.ID == ""
		expired := holder.Expired(now) || (!free && now.Sub(observedAt) > LeaseDuration)
		if free || expired || holder.ID == me.ID {
			next := l.fresh(cur)
			updated, err := l.leases.Update(ctx, next, metav1.UpdateOptions{FieldManager: ManagedBy})
			switch {
			case apierrors.IsConflict(err):
				continue // renewed or taken meanwhile: look again
			case err != nil:
				return nil, l.requestError("take", err)
			}
			if expired && !free && holder.ID != me.ID {
				h := holder
				l.took = &h
			}
			l.lease = updated
			l.start()
			return l, nil
		}
		if deadline.IsZero() || !now.Before(deadline) {
			held := &HeldError{Location: loc, Holder: holder, Now: now}
			if !deadline.IsZero() {
				held.Waited = now.Sub(start)
			}
			return nil, held
		}
		if opts.Waiting != nil && told != holder.ID {
			told = holder.ID
			opts.Waiting(holder)
		}
		// wait for the Lease to change, or for it to expire, or for the
		// deadline
		wake := deadline
		if exp := holder.Renewed.Add(LeaseDuration + time.Second); exp.After(now) && exp.Before(wake) {
			wake = exp
		}
		if exp := observedAt.Add(LeaseDuration + time.Second); exp.After(now) && exp.Before(wake) {
			wake = exp
		}
		if err := l.waitChange(ctx, cur.ResourceVersion, wake.Sub(now)); err != nil {
			return nil, err
		}
	}
}

// waitChange watches the Lease from resourceVersion rv until it changes or
// is deleted, or for d.
func (l *Lock) waitChange(ctx context.Context, rv string, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	w, err := l.leases.Watch(wctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", l.loc.Name).String(), ResourceVersion: rv})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("run lock of state record %s: %w", l.loc, context.Cause(ctx))
		}
		if wctx.Err() != nil {
			return nil
		}
		return l.requestError("watch", err)
	}
	defer w.Stop()
	for {
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("run lock of state record %s: %w", l.loc, context.Cause(ctx))
			}
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type != watch.Bookmark {
				return nil // changed, deleted, or the watch ended: look again
			}
		}
	}
}

func (l *Lock) requestError(what string, err error) error {
	if apierrors.IsForbidden(err) {
		return &ForbiddenError{Location: l.loc, Err: err}
	}
	return fmt.Errorf("run lock of state record %s: %s: %w", l.loc, what, err)
}

// fresh is the Lease held by this run: cur taken over (its name and
// version kept), or a new one.
func (l *Lock) fresh(cur *coordinationv1.Lease) *coordinationv1.Lease {
	now := metav1.NewMicroTime(l.now())
	secs := int32(LeaseDuration / time.Second)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.loc.Name, Namespace: l.loc.Namespace}}
	if cur != nil {
		lease = cur.DeepCopy()
	}
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	for k, v := range l.labels {
		lease.Labels[k] = v
	}
	lease.Labels[ManagedByLabel] = ManagedBy
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations["khook.io/description"] = "khook run lock of the state record of the same name: held by the run that may write it"
	lease.Annotations[annUser] = l.me.User
	lease.Annotations[annHost] = l.me.Host
	lease.Annotations[annPID] = strconv.Itoa(l.me.PID)
	lease.Annotations[annVersion] = l.me.Version
	lease.Annotations[annCommand] = l.me.Command
	lease.Annotations[annContext] = l.me.Context
	transitions := int32(0)
	if lease.Spec.LeaseTransitions != nil {
		transitions = *lease.Spec.LeaseTransitions
	}
	if cur != nil && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.me.ID) {
		transitions++
	}
	id := l.me.ID
	lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now, LeaseTransitions: &transitions}
	return lease
}

// holderOf reads a Lease's holder; ID is empty for a released Lease.
func holderOf(lease *coordinationv1.Lease) Holder {
	var h Holder
	if lease.Spec.HolderIdentity != nil {
		h.ID = *lease.Spec.HolderIdentity
	}
	a := lease.Annotations
	h.User, h.Host, h.Version, h.Command, h.Context = a[annUser], a[annHost], a[annVersion], a[annCommand], a[annContext]
	h.PID, _ = strconv.Atoi(a[annPID])
	if t := lease.Spec.AcquireTime; t != nil {
		h.Acquired = t.Time
	}
	if t := lease.Spec.RenewTime; t != nil {
		h.Renewed = t.Time
	}
	return h
}

// start begins renewing.
func (l *Lock) start() {
	l.lost, l.stop, l.done = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go l.renew()
}

// Holder is who holds the lock: this run.
func (l *Lock) Holder() Holder { return l.me }

// Location is the Lease's.
func (l *Lock) Location() Location { return l.loc }

// TookOver is the holder whose expired lock this run took over (it
// stopped renewing: killed), nil when the lock was free.
func (l *Lock) TookOver() *Holder { return l.took }

// Lost is closed when the run lost the lock (Err says why); the run must
// stop.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err is why the lock was lost, nil while it is held.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// renew renews the Lease every RenewPeriod until Release. A renewal that
// finds the Lease taken, deleted, or that has not succeeded for
// RenewDeadline loses the lock.
func (l *Lock) renew() {
	defer close(l.done)
	last := l.now()
	t := time.NewTimer(RenewPeriod)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		err := l.renewOnce()
		var lost *LostError
		switch {
		case errors.As(err, &lost):
			l.lose(lost)
			return
		case err != nil && l.now().Sub(last) > RenewDeadline:
			l.lose(&LostError{Location: l.loc, Reason: fmt.Sprintf("not renewed for %s: %v", RenewDeadline, err)})
			return
		case err != nil:
			t.Reset(RenewPeriod / 5) // try again soon
		default:
			last = l.now()
			t.Reset(RenewPeriod)
		}
	}
}

func (l *Lock) lose(err *LostError) {
	l.mu.Lock()
	l.lostErr = err
	l.mu.Unlock()
	close(l.lost)
}

// renewOnce writes a new renewTime over the version this run last wrote.
func (l *Lock) renewOnce() error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	l.mu.Lock()
	next := l.lease.DeepCopy()
	l.mu.Unlock()
	now := metav1.NewMicroTime(l.now())
	next.Spec.RenewTime = &now
	updated, err := l.leases.Update(ctx, next, metav1.UpdateOptions{FieldManager: ManagedBy})
	switch {
	case apierrors.IsConflict(err):
		cur, gerr := l.leases.Get(ctx, l.loc.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			return &LostError{Location: l.loc, Reason: "its Lease was deleted (force-unlock?)"}
		case gerr != nil:
			return gerr
		}
		if h := holderOf(cur); h.ID != l.me.ID {
			return &LostError{Location: l.loc, Reason: "taken over by " + h.Describe()}
		}
		l.mu.Lock()
		l.lease = cur // ours, changed by someone else (a label): renew that
		l.mu.Unlock()
		return errors.New("the Lease changed under this run")
	case apierrors.IsNotFound(err):
		return &LostError{Location: l.loc, Reason: "its Lease was deleted (force-unlock?)"}
	case err != nil:
		return err
	}
	l.mu.Lock()
	l.lease = updated
	l.mu.Unlock()
	return nil
}

// Release stops renewing and deletes the Lease, only if it is still this
// run's (a precondition on the version this run last wrote). Releasing a
// lost lock only stops renewing.
func (l *Lock) Release(ctx context.Context) error {
	close(l.stop)
	<-l.done
	if l.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	l.mu.Lock()
	uid, rv := l.lease.UID, l.lease.ResourceVersion
	l.mu.Unlock()
	err := l.leases.Delete(ctx, l.loc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return &LostError{Location: l.loc, Reason: "another run took it over before this run released it"}
	}
	return fmt.Errorf("run lock of state record %s: release: %w (it expires %s after its last renewal)", l.loc, err, LeaseDuration)
}

// Read returns the lock's holder; held is false when there is no Lease or
// it is released. An expired holder is returned (held) with Expired true
// by now.
func Read(ctx context.Context, c kubernetes.Interface, loc Location) (h Holder, held bool, err error) {
	lease, err := c.CoordinationV1().Leases(loc.Namespace).Get(ctx, loc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Holder{}, false, nil
	case err != nil:
		return Holder{}, false, fmt.Errorf("run lock of state record %s: read: %w", loc, err)
	}
	h = holderOf(lease)
	return h, h.ID != "", nil
}

// ForceUnlock breaks the lock at loc, only if id holds it: it deletes the
// Lease with a precondition on the version read. It returns the holder it
// removed.
func ForceUnlock(ctx context.Context, c kubernetes.Interface, loc Location, id string) (Holder, error) {
	leases := c.CoordinationV1().Leases(loc.Namespace)
	lease, err := leases.Get(ctx, loc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Holder{}, fmt.Errorf("run lock of state record %s: not locked (no Lease %s)", loc, loc)
	case err != nil:
		return Holder{}, fmt.Errorf("run lock of state record %s: read: %w", loc, err)
	}
	h := holderOf(lease)
	switch {
	case h.ID == "":
		return h, fmt.Errorf("run lock of state record %s: not locked (released)", loc)
	case h.ID != id:
		return h, fmt.Errorf("run lock of state record %s is held by %s, not by run %s: nothing was unlocked", loc, h.Describe(), id)
	}
	uid, rv := lease.UID, lease.ResourceVersion
	err = leases.Delete(ctx, loc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case apierrors.IsConflict(err):
		return h, fmt.Errorf("run lock of state record %s changed while unlocking (its holder renewed it: it is alive); nothing was unlocked", loc)
	case err != nil && !apierrors.IsNotFound(err):
		return h, fmt.Errorf("run lock of state record %s: delete: %w", loc, err)
	}
	return h, nil
}
