package engine

import (
	"context"
	"fmt"
	"time"

	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/lock"
)

// LeaseDuration is how long a run lock lasts without renewal: a holder
// that renewed it more recently may still be alive.
const LeaseDuration = lock.LeaseDuration

// HeldLock is the run lock of a spec's state record, held by the run
// force-unlock names (ReadLock): who holds it, and the means to break it.
type HeldLock struct {
	// Record is the state record's location; Holder the run holding its
	// lock, described; Since how long it has held it.
	Record, Holder, Since string
	// Live: the holder renewed the lock within LeaseDuration, by this
	// machine's clock: that run may still be alive.
	Live bool

	clients *kube.Clients
	loc     lock.Location
	id      string
}

// ReadLock reads the run lock of doc's state record on t's cluster, for
// breaking the lock of run id: an error when the lock is not held, or
// held by another run (nothing is then unlocked).
func (e *Engine) ReadLock(ctx context.Context, doc *load.Document, t Target, id string) (*HeldLock, error) {
	clients, err := e.Clients(ctx, t)
	if err != nil {
		return nil, err
	}
	loc := lockLocation(doc)
	h, held, err := lock.Read(ctx, clients.Typed, loc)
	switch {
	case err != nil:
		return nil, err
	case !held:
		return nil, fmt.Errorf("state record %s is not locked: nothing to unlock", loc)
	case h.ID != id:
		return nil, fmt.Errorf("the run lock of state record %s is held by %s, not by run %s: nothing was unlocked", loc, h.Describe(), id)
	}
	now := time.Now()
	return &HeldLock{Record: loc.String(), Holder: h.Describe(), Since: h.Since(now), Live: !h.Stale(now), clients: clients, loc: loc, id: id}, nil
}

// Break breaks the lock (the holder, if alive, stops at its next renewal,
// having lost it).
func (h *HeldLock) Break(ctx context.Context) error {
	_, err := lock.ForceUnlock(ctx, h.clients.Typed, h.loc, h.id)
	return err
}
