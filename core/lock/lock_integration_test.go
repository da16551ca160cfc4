//go:build integration

package lock

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func client(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(testcluster.Get(t).RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func holder(id string) Holder {
	return Holder{ID: id, User: "tester", Host: "host-" + id, PID: 42, Version: "v0.0.0-test", Command: "apply"}
}

// aheadClock is this machine's clock, its wall time d ahead.
type aheadClock struct {
	clock.RealClock
	d time.Duration
}

func (c aheadClock) Now() time.Time                   { return time.Now().Add(c.d) }
func (c aheadClock) Since(ts time.Time) time.Duration { return c.Now().Sub(ts) }

// A second run fails once the holder has shown it is alive (it renewed
// the lock while the second run watched), naming the holder.
func TestHeldLockFailsNamingTheHolder(t *testing.T) {
	c := client(t)
	loc := Location{Namespace: testcluster.Get(t).NewNamespace(t, "lock"), Name: "khook-state-x"}
	ctx := context.Background()
	a, err := Acquire(ctx, c, loc, holder("aaaa"), Options{Labels: map[string]string{"khook.io/spec": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := c.CoordinationV1().Leases(loc.Namespace).Get(ctx, loc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *lease.Spec.HolderIdentity; got != "aaaa" || lease.Labels["khook.io/spec"] != "x" || lease.Labels[ManagedByLabel] != ManagedBy {
		t.Fatalf("lease holder %q, labels %v", got, lease.Labels)
	}
	_, err = Acquire(ctx, c, loc, holder("bbbb"), Options{})
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second acquire: %v, want a HeldError", err)
	}
	for _, want := range []string{loc.String(), "tester@host-aaaa", "pid 42", "khook v0.0.0-test", "apply", "run aaaa", "started", "last renewed", "or set the lock-timeout setting to wait for it", "force-unlock aaaa"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoordinationV1().Leases(loc.Namespace).Get(ctx, loc.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("released lock: the Lease is still there (%v)", err)
	}
	b, err := Acquire(ctx, c, loc, holder("bbbb"), Options{})
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if b.TookOver() != nil {
		t.Errorf("a released lock was taken over from %v", b.TookOver())
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A waiting run takes the lock as soon as its holder releases it.
func TestLockTimeoutWaitsForTheRelease(t *testing.T) {
	c := client(t)
	loc := Location{Namespace: testcluster.Get(t).NewNamespace(t, "lock"), Name: "khook-state-w"}
	ctx := context.Background()
	a, err := Acquire(ctx, c, loc, holder("aaaa"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan Holder, 1)
	type result struct {
		l   *Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := Acquire(ctx, c, loc, holder("bbbb"), Options{Timeout: time.Minute, Waiting: func(h Holder) { waiting <- h }})
		got <- result{l, err}
	}()
	if h := <-waiting; h.ID != "aaaa" {
		t.Fatalf("waits for %q, want aaaa", h.ID)
	}
	select {
	case r := <-got:
		t.Fatalf("acquired while held: %v %v", r.l, r.err)
	default:
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiting acquire: %v", r.err)
	}
	if r.l.TookOver() != nil {
		t.Errorf("took over %v from a released lock", r.l.TookOver())
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A holder that stops renewing (killed) is taken over once the next run
// has watched its Lease stay unchanged for LeaseDuration, however recent
// the holder's renewTime looks (its clock ran an hour ahead); the next run
// knows whom from, and the old holder, were it to live on, finds its lock
// lost at its next renewal.
func TestKilledHoldersLockIsTakenOverAfterTheObservation(t *testing.T) {
	c := client(t)
	loc := Location{Namespace: testcluster.Get(t).NewNamespace(t, "lock"), Name: "khook-state-e"}
	ctx := context.Background()
	a, err := Acquire(ctx, c, loc, holder("aaaa"), Options{Clock: aheadClock{d: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	close(a.stop) // killed: no more renewals, no release
	<-a.done
	began := time.Now()
	b, err := Acquire(ctx, c, loc, holder("bbbb"), Options{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if waited := time.Since(began); waited < LeaseDuration {
		t.Errorf("took over after watching for %s, less than %s", waited, LeaseDuration)
	}
	if took := b.TookOver(); took == nil || took.ID != "aaaa" || took.Host != "host-aaaa" || b.Broken() {
		t.Fatalf("took over %+v, want aaaa's holder", took)
	}
	var lost *LostError
	if err := a.renewOnce(ctx); !errors.As(err, &lost) || !strings.Contains(lost.Error(), "run bbbb") {
		t.Fatalf("a's renewal: %v, want lost to run bbbb", err)
	}
	if h, held, err := Read(ctx, c, loc); err != nil || !held || h.ID != "bbbb" {
		t.Fatalf("the lock is %+v held=%v (%v), want bbbb's", h, held, err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestForceUnlockOnlyTheNamedHolder(t *testing.T) {
	c := client(t)
	loc := Location{Namespace: testcluster.Get(t).NewNamespace(t, "lock"), Name: "khook-state-f"}
	ctx := context.Background()
	if _, err := ForceUnlock(ctx, c, loc, "aaaa"); err == nil || !strings.Contains(err.Error(), "not locked") {
		t.Fatalf("force-unlock of no lock: %v", err)
	}
	// a's clock moves only when the test moves it: past the moment it
	// starts watching its Lease, never to its first renewal
	ac := clocktesting.NewFakeClock(time.Now())
	a, err := Acquire(ctx, c, loc, holder("aaaa"), Options{Clock: ac})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ForceUnlock(ctx, c, loc, "zzzz"); err == nil || !strings.Contains(err.Error(), "run aaaa") {
		t.Fatalf("force-unlock of another id: %v", err)
	}
	if _, held, _ := Read(ctx, c, loc); !held {
		t.Fatal("a force-unlock naming another id broke the lock")
	}
	// the watch starts at the Lease as it is then: before or after the
	// break, it shows the holder its lock broken
	ac.Step(watchAfter)
	h, err := ForceUnlock(ctx, c, loc, "aaaa")
	if err != nil || h.ID != "aaaa" {
		t.Fatalf("force-unlock: %+v %v", h, err)
	}
	// its watch tells the holder at once (its clock is stopped: no
	// renewal falls due), and its writes are refused
	select {
	case <-a.Lost():
	case <-time.After(time.Minute):
		t.Fatalf("the broken holder never noticed")
	}
	if err := a.Fence(ctx); err == nil || !strings.Contains(err.Error(), "force-unlock broke it") {
		t.Fatalf("the unlocked holder's write: %v", err)
	}
	_ = a.Release(ctx)
	b, err := Acquire(ctx, c, loc, holder("bbbb"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if took := b.TookOver(); took == nil || took.ID != "aaaa" || !b.Broken() {
		t.Errorf("the next holder took %+v (broken %v), want aaaa's broken lock", took, b.Broken())
	}
	_ = b.Release(ctx)
}

func TestForbiddenLockIsAClearError(t *testing.T) {
	tc := testcluster.Get(t)
	c, err := kubernetes.NewForConfig(tc.LimitedRESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	loc := Location{Namespace: tc.NewNamespace(t, "lock"), Name: "khook-state-r"}
	_, err = Acquire(context.Background(), c, loc, holder("aaaa"), Options{})
	var forbidden *ForbiddenError
	if !errors.As(err, &forbidden) || !strings.Contains(err.Error(), "leases.coordination.k8s.io") {
		t.Fatalf("acquire without the right: %v, want a ForbiddenError", err)
	}
}
