package lock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"khook.io/core/kube"
)

// The lock's decisions under clocks and outages, on fake clocks
// (k8s.io/utils/clock/testing) and an in-memory Lease API (fakeLeases).
// Each test runs in a synctest bubble: synctest.Wait lets every goroutine
// of the locks settle before the clocks move on, so the steps of time
// below decide, never the machine's speed.

var testLoc = Location{Namespace: "ns", Name: "khook-state-x"}

func testHolder(id string) Holder {
	return Holder{ID: id, User: "tester", Host: "host-" + id, PID: 42, Version: "v0.0.0-test", Command: "apply"}
}

var base = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

type acquired struct {
	lk  *Lock
	err error
}

// startAcquire runs an Acquire in the background.
func startAcquire(f *fakeLeases, id string, opts Options) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		lk, err := acquire(context.Background(), f, testLoc, testHolder(id), opts)
		ch <- acquired{lk, err}
	}()
	return ch
}

// step moves every clock on by d, one second at a time, letting the
// locks act at each.
func step(d time.Duration, clocks ...*clocktesting.FakeClock) {
	for ; d > 0; d -= time.Second {
		synctest.Wait()
		for _, c := range clocks {
			c.Step(time.Second)
		}
	}
	synctest.Wait()
}

func pending(t *testing.T, ch <-chan acquired, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: the acquire ended: lock %v, error %v", what, r.lk != nil, r.err)
	default:
	}
}

func mustHold(t *testing.T, f *fakeLeases, id string) {
	t.Helper()
	l := f.current()
	if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != id {
		t.Fatalf("the Lease is %v, want it held by %s", l, id)
	}
}

// A taker whose wall clock runs an hour ahead sees the holder's renewTime
// an hour old, which by clocks alone would be long expired. It takes
// nothing: it watches the Lease change at each renewal, so the holder is
// alive. Without --lock-timeout it fails once it saw that; with one it
// waits, and gets the lock (not taken over) when the holder releases it.
func TestTakerWithAClockFarAheadDoesNotTakeARenewingHoldersLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeases()
		hc := clocktesting.NewFakeClock(base)
		tc := clocktesting.NewFakeClock(base.Add(time.Hour))
		holder, err := acquire(context.Background(), f, testLoc, testHolder("aaaa"), Options{Clock: hc})
		if err != nil {
			t.Fatal(err)
		}

		var observed []Holder
		fails := startAcquire(f, "bbbb", Options{Clock: tc, Observing: func(h Holder) { observed = append(observed, h) }})
		step(2*time.Second, hc, tc)
		pending(t, fails, "before the holder's next renewal")
		if len(observed) != 1 || observed[0].ID != "aaaa" {
			t.Errorf("the taker did not say it watches the lock whose renewTime looks an hour old: %+v", observed)
		}
		step(RenewPeriod, hc, tc)
		r := <-fails
		var held *HeldError
		if !errors.As(r.err, &held) || held.Holder.ID != "aaaa" {
			t.Fatalf("taker without a timeout: %v, want a HeldError naming aaaa", r.err)
		}
		if !strings.Contains(held.Error(), "last renewed 1h0m") {
			t.Errorf("the message gives the renewal by the taker's clock: %v", held)
		}

		waits := startAcquire(f, "cccc", Options{Clock: tc, Timeout: 10 * time.Minute})
		step(3*time.Minute, hc, tc)
		pending(t, waits, "while the holder renews")
		mustHold(t, f, "aaaa")
		if n := f.updates["aaaa"]; n < 30 {
			t.Errorf("the holder renewed %d times in 3 minutes, want about 36", n)
		}
		if err := holder.Fence(context.Background()); err != nil {
			t.Errorf("the renewing holder may not write: %v", err)
		}

		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r = <-waits
		if r.err != nil {
			t.Fatalf("the waiting taker after the release: %v", r.err)
		}
		if took := r.lk.TookOver(); took != nil {
			t.Errorf("a released lock was taken over from %+v", took)
		}
		mustHold(t, f, "cccc")
		if err := r.lk.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// A killed holder (no renewals, no release) is taken over once the next
// run has watched its Lease unchanged for LeaseDuration on its own clock,
// however recent the holder's renewTime looks (its clock ran ahead).
func TestKilledHolderIsTakenOverAfterTheObservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeases()
		hc := clocktesting.NewFakeClock(base.Add(time.Hour)) // renewTime in the taker's future
		tc := clocktesting.NewFakeClock(base)
		dead, err := acquire(context.Background(), f, testLoc, testHolder("aaaa"), Options{Clock: hc})
		if err != nil {
			t.Fatal(err)
		}
		close(dead.stop) // killed: no more renewals, no release
		synctest.Wait()

		next := startAcquire(f, "bbbb", Options{Clock: tc})
		step(LeaseDuration-2*time.Second, tc)
		pending(t, next, "before the observation period")
		mustHold(t, f, "aaaa")
		step(3*time.Second, tc)
		r := <-next
		if r.err != nil {
			t.Fatalf("acquire after the observation period: %v", r.err)
		}
		if took := r.lk.TookOver(); took == nil || took.ID != "aaaa" || r.lk.Broken() {
			t.Fatalf("took over %+v (broken %v), want aaaa's expired lock", took, r.lk.Broken())
		}
		mustHold(t, f, "bbbb")
		if err := r.lk.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// An outage is not a loss. While the API server is down the holder keeps
// its lock and its writes wait (Fence blocks); a taker that waits through
// the outage starts its observation afresh when the server answers again,
// and the holder's renewal, the first thing it writes, shows it alive:
// nobody takes the lock, and the holder's writes go on.
func TestOutageKeepsTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeases()
		hc := clocktesting.NewFakeClock(base)
		tc := clocktesting.NewFakeClock(base.Add(20 * time.Second))
		holder, err := acquire(context.Background(), f, testLoc, testHolder("aaaa"), Options{Clock: hc})
		if err != nil {
			t.Fatal(err)
		}
		taker := startAcquire(f, "bbbb", Options{Clock: tc, Timeout: 5 * time.Minute})
		step(3*time.Second, hc, tc)

		f.setDown(true)
		step(RenewDeadline, hc, tc)
		wrote := make(chan error, 1)
		go func() { wrote <- holder.Fence(context.Background()) }()
		step(30*time.Second, hc, tc)
		select {
		case err := <-wrote:
			t.Fatalf("a write during the outage was not held: %v", err)
		default:
		}
		select {
		case <-holder.Lost():
			t.Fatalf("the outage lost the lock: %v", holder.Err())
		default:
		}
		pending(t, taker, "during the outage")

		f.setDown(false)
		before := f.updates["aaaa"]
		step(time.Second, hc, tc)
		if err := <-wrote; err != nil {
			t.Fatalf("the held write after the outage: %v", err)
		}
		if f.updates["aaaa"] == before {
			t.Fatal("the write went before the holder's renewal")
		}
		step(LeaseDuration+5*time.Second, hc, tc)
		pending(t, taker, "after the outage")
		mustHold(t, f, "aaaa")
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r := <-taker
		if r.err != nil || r.lk.TookOver() != nil {
			t.Fatalf("the taker after the release: %v (took over %+v)", r.err, r.lk.TookOver())
		}
		_ = r.lk.Release(context.Background())
	})
}

// A renewal that lands but whose answer is lost leaves the holder with an
// older version than the Lease's: the next renewal conflicts, finds the
// Lease still its own, and goes on from it; nothing is lost.
func TestRenewalWhoseAnswerWasLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeases()
		hc := clocktesting.NewFakeClock(base)
		holder, err := acquire(context.Background(), f, testLoc, testHolder("aaaa"), Options{Clock: hc})
		if err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		f.loseAnswer = true
		f.mu.Unlock()
		step(RenewPeriod+RenewPeriod, hc)
		select {
		case <-holder.Lost():
			t.Fatalf("lost: %v", holder.Err())
		default:
		}
		if err := holder.Fence(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if f.current() != nil {
			t.Error("the Lease is still there after the release")
		}
	})
}

// force-unlock breaks a live holder's lock: its watch sees the Lease
// freed at once, and its writes are refused from then on, before its next
// renewal would have found out. The next run takes the freed lock and
// knows whose it was.
func TestBrokenLockStopsTheWritesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeases()
		hc := clocktesting.NewFakeClock(base)
		holder, err := acquire(context.Background(), f, testLoc, testHolder("aaaa"), Options{Clock: hc})
		if err != nil {
			t.Fatal(err)
		}
		step(time.Second, hc)
		cur := f.current()
		cur.Spec.HolderIdentity = nil
		cur.Annotations[annBroken] = "aaaa"
		if _, err := f.Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // no clock moved: no renewal was due
		var lost *LostError
		if err := holder.Fence(context.Background()); !errors.As(err, &lost) || !strings.Contains(err.Error(), "force-unlock broke it") {
			t.Fatalf("a write after the break: %v, want refused as lost", err)
		}
		select {
		case <-holder.Lost():
		default:
			t.Fatal("Lost is not closed")
		}
		next := startAcquire(f, "bbbb", Options{Clock: hc})
		synctest.Wait()
		r := <-next
		if r.err != nil {
			t.Fatal(r.err)
		}
		if took := r.lk.TookOver(); took == nil || took.ID != "aaaa" || !r.lk.Broken() {
			t.Fatalf("took %+v (broken %v), want aaaa's broken lock", took, r.lk.Broken())
		}
		if err := holder.Release(context.Background()); err != nil {
			t.Errorf("release of a lost lock: %v", err)
		}
		mustHold(t, f, "bbbb")
		_ = r.lk.Release(context.Background())
	})
}

// Renewals the API server refuses (403: the credentials lost the right)
// hold the run's writes once the renew deadline passed; a refusal that
// stops within the lease duration (a restarted server whose authorizer
// caught up) loses nothing, one that lasts the lease duration in a row
// loses the lock.
func TestRefusedRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeases()
		hc := clocktesting.NewFakeClock(base)
		holder, err := acquire(context.Background(), f, testLoc, testHolder("aaaa"), Options{Clock: hc})
		if err != nil {
			t.Fatal(err)
		}
		forbid := func(v bool) {
			f.mu.Lock()
			f.forbid = v
			f.mu.Unlock()
		}
		forbid(true)
		step(RenewPeriod+LeaseDuration-2*time.Second, hc)
		select {
		case <-holder.Lost():
			t.Fatalf("lost after refusals shorter than %s: %v", LeaseDuration, holder.Err())
		default:
		}
		forbid(false)
		step(2*time.Second, hc)
		if err := holder.Fence(context.Background()); err != nil {
			t.Fatalf("a write once the renewals are accepted again: %v", err)
		}

		forbid(true)
		step(RenewPeriod+LeaseDuration+time.Second, hc)
		select {
		case <-holder.Lost():
		default:
			t.Fatalf("not lost after %s of refused renewals", LeaseDuration)
		}
		if err := holder.Fence(context.Background()); err == nil || !strings.Contains(err.Error(), "refused its renewals") {
			t.Errorf("a write after the refusals: %v", err)
		}
		_ = holder.Release(context.Background())
	})
}

// A write that waits in vain for the lock's confirmation says why the
// renewals fail, in the words of the error they got.
func TestFenceSaysWhyRenewalsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeases()
		hc := clocktesting.NewFakeClock(base)
		holder, err := acquire(context.Background(), f, testLoc, testHolder("aaaa"), Options{Clock: hc})
		if err != nil {
			t.Fatal(err)
		}
		f.setDown(true)
		step(RenewDeadline+2*time.Second, hc)
		ctx, cancel := context.WithCancel(context.Background())
		wrote := make(chan error, 1)
		go func() { wrote <- holder.Fence(ctx) }()
		step(2*time.Second, hc)
		cancel()
		err = <-wrote
		want := "(the last renewal: " + kube.Reason(refusedErr()) + ")"
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, context.Canceled) {
			t.Fatalf("the held write: %v\nwant it to say %q and wrap the cancellation", err, want)
		}
		f.setDown(false)
		step(2*time.Second, hc)
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
