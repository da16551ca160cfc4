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
//
// One file per concern, as client-go's leader election: acquire.go takes
// the lock (Acquire); renew.go keeps it (renewal, and the watch of the
// Lease); gate.go is the write gate (Fence, WriteUntil); release.go gives
// it back; forceunlock.go reads and breaks another run's lock; holder.go
// is who holds it and how the Lease records that; errors.go the errors.
package lock

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/fields"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
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

func (l *Lock) nameSelector() string {
	return fields.OneTermEqualSelector("metadata.name", l.loc.Name).String()
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
