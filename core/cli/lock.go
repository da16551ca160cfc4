package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/load"
	"khook.io/core/lock"
	"khook.io/core/objects"
	"khook.io/core/state"
	"khook.io/core/step"
	"khook.io/core/version"
)

// lockLocation is where the run lock of the session's state record lives:
// a Lease of the record's name, next to it.
func lockLocation(s *session) lock.Location {
	sp := s.doc.Spec
	return lock.Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()}
}

// printLockNote writes lockNote's note, if any, to w (standard error).
func printLockNote(ctx context.Context, w io.Writer, c kubernetes.Interface, doc *load.Document) {
	if note := lockNote(ctx, c, doc); note != "" {
		fmt.Fprintf(w, "note: %s\n", note)
	}
}

// takeLock takes the run lock of the session's state record for command
// (apply or destroy), before the record is read. When the lock's create
// finds no namespace, the record's namespace is created (labelled as
// khook's), or the run is refused with the reason. A held lock fails once
// its holder shows it is alive, or is waited for up to timeout, saying so
// on waiting; a lock this run watched stay unchanged for the lease
// duration is taken over, saying whose. Without a state record there is
// no lock (nil): the run still gets an id of its own. The session's Run
// (what steps write for other runs to recognise) is set either way.
func (s *session) takeLock(ctx context.Context, command string, timeout time.Duration, waiting io.Writer) (*lock.Lock, error) {
	if !s.doc.Spec.State.IsEnabled() {
		s.run = step.Run{ID: lock.NewID()}
		return nil, nil
	}
	loc := lockLocation(s)
	me := lock.NewHolder(command, version.Get().Version, s.clients.Identity.Context)
	requestTimeout := checkTimeout
	if t := s.clients.Config.Timeout; t > 0 {
		requestTimeout = t
	}
	lk, err := lock.Acquire(ctx, s.clients.Typed, loc, me, lock.Options{
		Timeout:        timeout,
		RequestTimeout: requestTimeout,
		Waiting: func(h lock.Holder) {
			fmt.Fprintf(waiting, "waiting for the run lock of state record %s (--lock-timeout %s): held by %s, %s\n", loc, timeout, h.Describe(), h.Since(time.Now()))
		},
		Observing: func(h lock.Holder) {
			fmt.Fprintf(waiting, "the run lock of state record %s is held by %s, %s by this machine's clock%s: watching it for up to %s; if it does not change, that run is gone and this run takes it over\n", loc, h.Describe(), h.Since(time.Now()), s.holderEnded(ctx, h), lock.LeaseDuration)
		},
		EnsureNamespace: func(ctx context.Context) error { return s.ensureStateNamespace(ctx, loc.Namespace) },
	})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("state record's namespace %s does not exist, and the credentials may not create it: create it first, or set state.namespace to one that exists (%w)", loc.Namespace, err)
	}
	if err != nil {
		return nil, err
	}
	if took := lk.TookOver(); took != nil {
		if lk.Broken() {
			fmt.Fprintf(waiting, "took the run lock of state record %s, which force-unlock broke from %s: steps it left running run again\n", loc, took.Describe())
		} else {
			fmt.Fprintf(waiting, "took over the run lock of state record %s from %s, which did not renew it for the %s this run watched it (last renewal %s ago by this machine's clock; killed?): steps it left running run again\n", loc, took.Describe(), lock.LeaseDuration, time.Since(took.Renewed).Round(time.Second))
		}
	}
	s.run = step.Run{ID: me.ID, Abandoned: func(id string) bool {
		took := lk.TookOver()
		return took != nil && took.ID == id
	}}
	return lk, nil
}

// holderEnded says, for the note of a run that watches a lock whose holder
// looks gone, whether the holder's run ended by its own record: a record
// that ended after the holder took the lock (both times the holder's
// clock) means the holder exited without releasing it (killed, or the API
// server did not answer its release). "" when the record does not say so
// or cannot be read.
func (s *session) holderEnded(ctx context.Context, h lock.Holder) string {
	ctx, cancel := s.preflight(ctx)
	defer cancel()
	sp := s.doc.Spec
	rec, found, err := state.Read(ctx, s.clients.Typed, state.Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()})
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
func (s *session) ensureStateNamespace(ctx context.Context, ns string) error {
	ctx, cancel := s.preflight(ctx)
	defer cancel()
	m := objects.New(s.clients, objects.Options{Redactor: s.red})
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
// failure), then lets the session's writes through unfenced again (the
// run writes nothing more); a release that fails is a warning, not the
// run's error: the next run takes the lock over once it has seen it
// unchanged for the lease duration.
func (s *session) releaseLock(lk *lock.Lock, warn io.Writer) {
	if lk == nil {
		return
	}
	if err := lk.Release(context.Background()); err != nil {
		fmt.Fprintf(warn, "warning: %v\n", err)
	}
	s.clients.Writes.Set(nil)
}

// lockNote says, for plan, diff and status (which take no lock), whether a
// run holds the lock of the session's state record: "" when none does or
// the spec has no record. Reading the Lease is best effort: a user who may
// not read Leases gets no note.
func lockNote(ctx context.Context, c kubernetes.Interface, doc *load.Document) string {
	sp := doc.Spec
	if !sp.State.IsEnabled() {
		return ""
	}
	loc := lock.Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()}
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
