package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/event"
	"khook.io/core/load"
	"khook.io/core/lock"
	"khook.io/core/objects"
	"khook.io/core/state"
	"khook.io/core/step"
	"khook.io/core/version"
)

// lockLocation is where the run lock of doc's state record lives: a
// Lease of the record's name, next to it.
func lockLocation(doc *load.Document) lock.Location {
	return lock.Location(state.LocationOf(doc.Spec))
}

// noteLock notes, for plan, diff and status (which take no lock), whether
// a run holds the lock of the cluster's state record (LockNote).
func (c *Cluster) noteLock(ctx context.Context) {
	if note := LockNote(ctx, c.clients.Typed, c.doc); note != "" {
		c.note(NoteInfo, "%s", note)
	}
}

// takeLock takes the run lock of the session's state record for command
// (apply or destroy), before the record is read. When the lock's create
// finds no namespace, the record's namespace is created (labelled as
// khook's), or the run is refused with the reason. A held lock fails once
// its holder shows it is alive, or is waited for up to timeout, saying so
// on waiting; a lock this run watched stay unchanged for the lease
// duration is taken over, saying whose. Without a state record there is
// no lock (nil): the run still gets an id of its own. The run's identity
// (what steps write for other runs to recognise) is returned either way.
func (c *Cluster) takeLock(ctx context.Context, command Command, timeout time.Duration) (*lock.Lock, step.RunInfo, error) {
	if !c.doc.Spec.State.IsEnabled() {
		return nil, step.RunInfo{ID: lock.NewID(), Ops: &step.Operations{}}, nil
	}
	loc := lockLocation(c.doc)
	me := lock.NewHolder(string(command), version.Get().Version, c.clients.Identity.Context)
	requestTimeout := CheckTimeout
	if t := c.clients.Config.Timeout; t > 0 {
		requestTimeout = t
	}
	end := c.phase(event.PhaseLock, "run lock of state record "+loc.String())
	lk, err := lock.Acquire(ctx, c.clients.Typed, loc, me, lock.Options{
		Timeout:        timeout,
		RequestTimeout: requestTimeout,
		Waiting: func(h lock.Holder) {
			c.note(NoteLine, "waiting for the run lock of state record %s (%s %s): held by %s, %s", loc, c.opts.Spelling.Of(SettingLockTimeout), timeout, h.Describe(), h.Since(time.Now()))
		},
		Observing: func(h lock.Holder) {
			c.note(NoteLine, "the run lock of state record %s is held by %s, %s by this machine's clock%s: watching it for up to %s; if it does not change, that run is gone and this run takes it over", loc, h.Describe(), h.Since(time.Now()), c.holderEnded(ctx, h), lock.LeaseDuration)
		},
		EnsureNamespace: func(ctx context.Context) error { return c.ensureStateNamespace(ctx, loc.Namespace) },
	})
	end(err)
	var held *lock.HeldError
	if errors.As(err, &held) {
		held.Setting = c.opts.Spelling.Of(SettingLockTimeout)
		if c.opts.Spelling != nil {
			held.Give = "pass " + held.Setting + " DURATION"
		}
	}
	if apierrors.IsNotFound(err) {
		return nil, step.RunInfo{}, fmt.Errorf("state record's namespace %s does not exist, and the credentials may not create it: create it first, or set state.namespace to one that exists (%w)", loc.Namespace, err)
	}
	if err != nil {
		return nil, step.RunInfo{}, err
	}
	if took := lk.TookOver(); took != nil {
		if lk.Broken() {
			c.note(NoteLine, "took the run lock of state record %s, which force-unlock broke from %s: steps it left running run again", loc, took.Describe())
		} else {
			c.note(NoteLine, "took over the run lock of state record %s from %s, which did not renew it for the %s this run watched it (last renewal %s ago by this machine's clock; killed?): steps it left running run again", loc, took.Describe(), lock.LeaseDuration, time.Since(took.Renewed).Round(time.Second))
		}
	}
	id := step.RunInfo{ID: me.ID, Lock: loc.ID(), Ops: &step.Operations{}, Abandoned: func(id string) bool {
		took := lk.TookOver()
		return took != nil && took.ID == id
	}}
	return lk, id, nil
}

// holderEnded says, for the note of a run that watches a lock whose holder
// looks gone, whether the holder's run ended by its own record: a record
// that ended after the holder took the lock (both times the holder's
// clock) means the holder exited without releasing it (killed, or the API
// server did not answer its release). "" when the record does not say so
// or cannot be read.
func (c *Cluster) holderEnded(ctx context.Context, h lock.Holder) string {
	ctx, cancel := c.preflight(ctx)
	defer cancel()
	rec, found, err := state.Read(ctx, c.clients.Typed, state.LocationOf(c.doc.Spec))
	if err != nil || !found || rec.RunStatus == "running" || rec.FinishedAt == nil || h.Acquired.IsZero() || rec.FinishedAt.Before(h.Acquired) {
		return ""
	}
	return fmt.Sprintf(" (its record says its %s ended %s %s after it took the lock: it exited without releasing it)", rec.Command, rec.RunStatus, rec.FinishedAt.Sub(h.Acquired).Round(time.Second))
}

// ensureStateNamespace creates the state record's namespace when the
// lock's create found it missing, before anything runs: a step of the
// spec that would create it comes too late for the lock and the record's
// first write. Credentials that may neither read nor create namespaces (a
// Role in the record's namespace only) cannot tell: the lock's own create
// has answered that it does not exist (see takeLock).
func (c *Cluster) ensureStateNamespace(ctx context.Context, ns string) error {
	ctx, cancel := c.preflight(ctx)
	defer cancel()
	m := objects.New(c.clients, objects.Options{Redactor: c.red})
	_, err := m.EnsureNamespace(ctx, ns)
	var unknown *objects.NamespaceUnknownError
	switch {
	case errors.As(err, &unknown):
		return apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
	case err != nil:
		return fmt.Errorf("state record's namespace %s: it does not exist and cannot be created: %w", ns, err)
	}
	return nil
}

// releaseLock releases lk at the end of a run (also after Ctrl-C or a
// failure) within ctx, then lets the session's writes through unfenced
// again (the run writes nothing more); a release that fails is a warning,
// not the run's error: the next run takes the lock over once it has seen
// it unchanged for the lease duration.
func (c *Cluster) releaseLock(ctx context.Context, lk *lock.Lock) {
	if lk == nil {
		return
	}
	if err := lk.Release(ctx); err != nil {
		c.note(NoteWarning, "%v", err)
	}
	c.clients.Writes.Set(nil)
}

// LockNote says, for plan, diff and status (which take no lock), whether a
// run holds the lock of the session's state record: "" when none does or
// the spec has no record. Reading the Lease is best effort: a user who may
// not read Leases gets no note.
func LockNote(ctx context.Context, c kubernetes.Interface, doc *load.Document) string {
	if !doc.Spec.State.IsEnabled() {
		return ""
	}
	loc := lockLocation(doc)
	h, held, err := lock.Read(ctx, c, loc)
	if err != nil || !held {
		return ""
	}
	return describeLock(loc, h, time.Now())
}

// describeLock is the note about a held lock.
func describeLock(loc lock.Location, h lock.Holder, now time.Time) string {
	if h.Stale(now) {
		return fmt.Sprintf("the run lock of state record %s is held by %s, which stopped renewing it %s ago (killed?): the next apply or destroy takes it over", loc, h.Describe(), now.Sub(h.Renewed).Round(time.Second))
	}
	return fmt.Sprintf("a run by %s holds the lock of state record %s (%s) and is in progress: what this shows may be out of date", h.Describe(), loc, h.Since(now))
}

// watchLost returns ctx cancelled, with the reason as its cause, when the
// run loses its lock or its record finds another writer: the run must
// stop. stop ends the watch.
func watchLost(ctx context.Context, lk *lock.Lock, store *state.Store) (context.Context, func()) {
	if lk == nil && store == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var lockLost, storeLost <-chan struct{}
	if lk != nil {
		lockLost = lk.Lost()
	}
	if store != nil {
		storeLost = store.Lost()
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-lockLost:
			cancel(lk.Err())
		case <-storeLost:
			cancel(store.Err())
		case <-done:
		case <-ctx.Done():
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// lostError is why the run stopped early, if it lost its lock or its
// record: nil otherwise.
func lostError(lk *lock.Lock, store *state.Store) error {
	var errs []error
	if lk != nil {
		errs = append(errs, lk.Err())
	}
	if store != nil {
		errs = append(errs, store.Err())
	}
	return errors.Join(errs...)
}
