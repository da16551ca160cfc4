// Package lock is khook's run lock: a coordination.k8s.io/v1 Lease next to
// a spec's state record, held by the one run (apply or destroy) that may
// write the record, renewed while it runs and released when it ends, as
// Terraform locks its state and Kubernetes controllers elect a leader.
//
// A run that finds the lock held watches it: a holder that renews it is
// alive, and the run fails with the holder's details (HeldError), or waits
// for it (Options.Timeout). A Lease this run has seen unchanged for
// LeaseDuration, on its own clock and without losing sight of it, belongs
// to a holder that is gone (a killed process): the run takes it over and
// knows whom from (Lock.TookOver). Clocks never decide that: the holder's
// renewTime only informs messages, as client-go's leader election judges a
// leader by what it observed.
//
// A holder keeps its lock while the API server cannot be reached (nobody
// can take it through an unreachable server); its writes wait meanwhile
// (Lock.Fence), and the first thing it writes when the server answers
// again is its renewal, on the version it last wrote. A renewal that finds
// the Lease taken over or broken loses the lock (Lock.Lost): the run must
// stop, and Fence refuses its writes from then on.
package lock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"k8s.io/utils/clock"

	"khook.io/core/kube"
)

// The lock's timing, as client-go's leader election sets it.
//
// A holder renews every RenewPeriod. Its writes go on only while its last
// renewal was sent less than RenewDeadline ago; after that they wait for
// the next renewal to confirm the lock (an API-server outage). A taker
// takes a Lease over only once it has watched it stay unchanged for
// LeaseDuration, which begins after the holder's last renewal reached the
// server: so a holder's writes stop at least LeaseDuration-RenewDeadline
// (5 s) before anyone can take its lock.
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RenewPeriod   = 5 * time.Second
)

const (
	// requestTimeout bounds one request of a holder (a renewal, the
	// release) and of a taker's watch of the Lease.
	requestTimeout = 5 * time.Second
	// retryInterval is how soon a failed renewal, or a failed look at a
	// held Lease, is tried again.
	retryInterval = time.Second
	// ReleaseTimeout is how long a run that ends tries to release its
	// lock (deleting the Lease) while the API server does not answer.
	ReleaseTimeout = 5 * time.Second
	// watchAfter is how long a holder holds its lock before it watches
	// its Lease: most no-op runs end first and spend nothing on the watch;
	// until then, its renewals are what would find a broken lock.
	watchAfter = time.Second
)

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
	// annBroken names the run whose lock force-unlock broke.
	annBroken = "khook.io/broken-run"
)

// Location names a lock: the Lease's namespace and name (those of the
// state record it guards).
type Location struct{ Namespace, Name string }

func (l Location) String() string { return l.Namespace + "/" + l.Name }

// ID names the lock in a label value: 16 hexadecimal digits of the
// SHA-256 of its namespace and name (what a helm revision written under
// the lock carries, step.RunLockLabel).
func (l Location) ID() string {
	sum := sha256.Sum256([]byte(l.Namespace + "/" + l.Name))
	return hex.EncodeToString(sum[:8])
}

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
	// (zero for a Holder not read from a Lease): the holder's clock, for
	// messages only.
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
// "started 40s ago, last renewed 2s ago" (the holder's clock against
// now's: a message, never a decision).
func (h Holder) Since(now time.Time) string {
	return fmt.Sprintf("started %s ago, last renewed %s ago", ago(now, h.Acquired), ago(now, h.Renewed))
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return max(now.Sub(t), 0).Round(time.Second).String()
}

// Stale reports whether, by now (this machine's clock), the holder seems
// to have stopped renewing: its renewTime is more than LeaseDuration old.
// Clocks differ between machines: this only chooses words in messages
// (plan's note); whether a lock may be taken over is decided by what a
// taker observed (Acquire).
func (h Holder) Stale(now time.Time) bool {
	return !h.Renewed.IsZero() && now.Sub(h.Renewed) > LeaseDuration
}

// HeldError is a lock held by a live holder: one that renewed it while
// this run watched.
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
	return s + fmt.Sprintf(". Wait for that run to end, or pass --lock-timeout DURATION to wait for it; if it is known to be dead, the next run takes its lock over once it has seen it unchanged for %s, or break it now with force-unlock %s", LeaseDuration, e.Holder.ID)
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

// Lock is a held run lock. Its holder renews it in the background until
// Release; Lost is closed when it was lost.
type Lock struct {
	leases coordinationclient.LeaseInterface
	loc    Location
	me     Holder
	clock  clock.Clock
	labels map[string]string
	took   *Holder
	broken bool // took is a run whose lock force-unlock broke

	mu    sync.Mutex
	lease *coordinationv1.Lease // as last written by this run
	// confirmed is when the write that last confirmed the lock (its take,
	// a renewal) was sent, by the lock's clock
	confirmed time.Time
	// suspect: the Lease's watch showed another writer; writes wait for
	// the renewal that says whether the lock is still this run's
	suspect  bool
	lostErr  error
	released bool
	// renewErr is why the last renewal failed (nil: it did not), for
	// the message of a write that waited for one in vain
	renewErr error
	// changed is closed, and replaced, whenever the above change
	changed chan struct{}

	lost chan struct{}
	kick chan struct{} // renew now
	stop chan struct{}
	done chan struct{}
}

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

func (l *Lock) nameSelector() string {
	return fields.OneTermEqualSelector("metadata.name", l.loc.Name).String()
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
	now := metav1.NewMicroTime(l.clock.Now())
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
	delete(lease.Annotations, annBroken)
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

// held makes lease, written by a request sent at sent, this run's and
// begins renewing it.
func (l *Lock) held(lease *coordinationv1.Lease, sent time.Time) {
	l.lease, l.confirmed = lease, sent
	l.lost, l.kick, l.stop, l.done = make(chan struct{}), make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go l.renew()
	go l.watch()
}

// TookOver is the holder whose lock this run took over: one that stopped
// renewing (killed), or, when Broken, one whose lock force-unlock broke.
// Nil when the lock was free. Either way that run is gone.
func (l *Lock) TookOver() *Holder { return l.took }

// Broken reports whether TookOver's lock was broken by force-unlock.
func (l *Lock) Broken() bool { return l.broken }

// Lost is closed when the run lost the lock (Err says why); the run must
// stop.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err is why the lock was lost, nil while it is held.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

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

// Read returns the lock's holder; held is false when there is no Lease or
// it is released.
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

// ForceUnlock breaks the lock at loc, only if id holds it: it frees the
// Lease (no holder; the broken run named in an annotation, so the next run
// knows that run is gone and may recover what it left pending) with a
// precondition on the version read: a holder that renews meanwhile keeps
// it. It returns the holder it removed.
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
	broken := lease.DeepCopy()
	broken.Spec.HolderIdentity = nil
	if broken.Annotations == nil {
		broken.Annotations = map[string]string{}
	}
	broken.Annotations[annBroken] = id
	_, err = leases.Update(ctx, broken, metav1.UpdateOptions{FieldManager: ManagedBy})
	if apierrors.IsConflict(err) && brokenBy(ctx, leases, loc.Name, id) {
		return h, nil // this break landed; its answer was lost, and the resend conflicted
	}
	switch {
	case apierrors.IsConflict(err):
		return h, fmt.Errorf("run lock of state record %s changed while unlocking (its holder renewed it: it is alive); nothing was unlocked", loc)
	case apierrors.IsNotFound(err):
		return h, nil // released meanwhile
	case err != nil:
		return h, fmt.Errorf("run lock of state record %s: break: %w", loc, err)
	}
	return h, nil
}

// brokenBy reports whether the Lease name is free with the mark of a
// break of run id.
func brokenBy(ctx context.Context, leases coordinationclient.LeaseInterface, name, id string) bool {
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	return err == nil && holderOf(lease).ID == "" && lease.Annotations[annBroken] == id
}
