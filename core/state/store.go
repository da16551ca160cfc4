package state

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"khook.io/core/spec"
)

// The record Secret's identity.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "khook"
	SpecLabel      = "khook.io/spec"
)

// writeTimeout bounds one write of the record. The last write (Finish,
// Delete) is given a context that outlives the run's cancellation, so an
// interrupted run still records how it ended.
const writeTimeout = 15 * time.Second

// Pauses before the writer tries a failed write again.
const (
	retryMin = 250 * time.Millisecond
	retryMax = 4 * time.Second
)

// Location names a record Secret.
type Location struct{ Namespace, Name string }

func (l Location) String() string { return l.Namespace + "/" + l.Name }

// LocationOf is where sp's record lives: state.namespace (default
// "default") and state.name (default khook-state-<metadata.name>). The run
// lock is a Lease of the same namespace and name.
func LocationOf(sp *spec.Spec) Location {
	return Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()}
}

// NotOwnedError: a Secret of the record's name exists without khook's
// label; khook never touches it.
type NotOwnedError struct{ Location Location }

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("state record %s: a Secret of that name exists but is not managed by khook (no %s=%s label); khook will not touch it: remove it or set state.name", e.Location, ManagedByLabel, ManagedBy)
}

// Read returns the record at loc; found is false when there is none.
func Read(ctx context.Context, c kubernetes.Interface, loc Location) (rec *Record, found bool, err error) {
	sec, err := c.CoreV1().Secrets(loc.Namespace).Get(ctx, loc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("state record %s: read: %w", loc, err)
	}
	if sec.Labels[ManagedByLabel] != ManagedBy {
		return nil, false, &NotOwnedError{Location: loc}
	}
	rec, err = DecodeSecret(sec)
	if err != nil {
		return nil, false, fmt.Errorf("state record %s: %w", loc, err)
	}
	return rec, true, nil
}

// ConflictError: the record Secret changed under the run, since the run
// read it or last wrote it: another writer wrote it, deleted it or created
// it. The run lock makes that impossible unless someone broke the lock or
// wrote around it, so it is a fault: the store never writes over the other
// writer's version and stops writing.
type ConflictError struct {
	Location Location
	// What happened: "changed", "deleted" or "created".
	What string
	// Read is the resourceVersion this run last read or wrote ("" when it
	// found no record); Now the Secret's current one, "" when unknown.
	Read, Now string
	// Other is what the other writer's record says of its run, "" when
	// unknown.
	Other string
	// Begin: the run's first write found it, before any step ran.
	Begin bool
	// Delete: the delete after a successful destroy found it.
	Delete bool
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "state record %s ", e.Location)
	switch e.What {
	case "deleted":
		b.WriteString("was deleted by another run since this run read it")
	case "created":
		b.WriteString("was created by another run since this run found none")
	default:
		fmt.Fprintf(&b, "changed since this run read it (resourceVersion %s", e.Read)
		if e.Now != "" {
			fmt.Fprintf(&b, ", now %s", e.Now)
		}
		b.WriteString("): another run wrote it")
	}
	if e.Other != "" {
		fmt.Fprintf(&b, " (its record: %s)", e.Other)
	}
	switch {
	case e.Begin:
		b.WriteString("; nothing ran: run again once the other run has ended")
	case e.Delete:
		b.WriteString("; this run did not delete it: the other run's record stands")
	default:
		b.WriteString("; this run stopped writing it and left the other run's record in place")
	}
	return b.String()
}

// Store journals one run. Updates are applied in memory at once and
// written by one writer goroutine (so parallel steps never race on the
// Secret), coalescing updates that arrive while a write is in flight; each
// write carries the resourceVersion and UID of the Secret as this run last
// read or wrote it (optimistic concurrency).
//
// The record is crash-consistent: every version of it that reaches the
// API server claims no more than the cluster has. A step is recorded ok
// only after it succeeded, and a step the run may change stops being ok
// in Begin's synchronous write, before the run touches it; the
// asynchronous writes in between can only lag behind (a step done but not
// yet recorded re-runs), never run ahead.
//
// It never loses a write to another writer, nor writes over one: a write
// the API server refuses because the Secret changed (409), was deleted or
// was created meanwhile ends the store's writing with a *ConflictError
// (Lost is closed, Err and every later write return it).
type Store struct {
	secrets corev1client.SecretInterface
	loc     Location
	spec    string
	// budget is what the compressed record may take (recordBudget)
	budget int

	mu      sync.Mutex
	rec     *Record
	prev    *Record   // the record as the run found it
	rv      string    // resourceVersion of the Secret, "" when absent
	uid     types.UID // its UID, "" when absent
	version uint64    // bumped on every in-memory change
	written uint64    // the version the Secret holds
	// marked are the steps Begin marked running whose end is not recorded
	// yet
	marked map[string]bool
	// unsure are the digests of the data of writes whose outcome is not
	// known (a timeout, a lost connection) since the last acknowledged
	// one: the Secret holding one of them is this run's own write, not
	// another writer's
	unsure map[[sha256.Size]byte]bool
	// lost is the conflict that ended the writing; lostCh is closed then
	lost   *ConflictError
	lostCh chan struct{}
	// fence is asked before every write whether the run may still write
	// the record (the run lock: Fence); fenced is its final refusal, after
	// which the store writes nothing
	fence  func(context.Context) error
	fenced error

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	// abort ends the writer's write in flight (stopWriter's context ended)
	writes context.Context
	abort  context.CancelFunc
}

// Open loads the record at loc (a new one when there is none), refusing a
// Secret of that name khook does not own. It does not write.
func Open(ctx context.Context, c kubernetes.Interface, loc Location, specName string) (*Store, error) {
	s := &Store{secrets: c.CoreV1().Secrets(loc.Namespace), loc: loc, spec: specName, budget: recordBudget,
		unsure: map[[sha256.Size]byte]bool{}, lostCh: make(chan struct{})}
	sec, err := s.secrets.Get(ctx, loc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s.rec = newRecord()
	case err != nil:
		return nil, fmt.Errorf("state record %s: read: %w", loc, err)
	default:
		if sec.Labels[ManagedByLabel] != ManagedBy {
			return nil, &NotOwnedError{Location: loc}
		}
		s.rv, s.uid = sec.ResourceVersion, sec.UID
		if s.rec, err = DecodeSecret(sec); err != nil {
			s.rec = newRecord() // a journal: an unreadable one is started afresh
		}
		if s.rec.Salt == "" {
			s.rec.Salt = newRecord().Salt
		}
	}
	s.prev = s.rec.clone()
	return s, nil
}

// Fence makes every write of the record (Begin's, the steps', Finish's,
// Delete's) ask f first whether the run may still write it: the run lock,
// which says so only while the API server has lately confirmed that the
// run holds it (the Lease version it last wrote), waits while that is
// unknown, and refuses for good once the lock is lost. A write f refuses
// for good is never sent, nor is any after it: the record is the lock's
// new holder's. f returns its context's error when it only could not tell
// in time; the write is then tried again later, as a failed one.
func (s *Store) Fence(f func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fence = f
}

// checkFence asks the fence, if any, before a write with ctx.
func (s *Store) checkFence(ctx context.Context) error {
	s.mu.Lock()
	f, fenced := s.fence, s.fenced
	s.mu.Unlock()
	if fenced != nil {
		return fenced
	}
	if f == nil {
		return nil
	}
	err := f(ctx)
	if err != nil && ctx.Err() == nil {
		s.mu.Lock()
		if s.fenced == nil {
			s.fenced = err
		}
		s.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("state record %s not written: %w", s.loc, err)
	}
	return nil
}

// Fenced reports the fence's final refusal, nil while there is none.
func (s *Store) Fenced() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenced
}

// Location is where the record lives.
func (s *Store) Location() Location { return s.loc }

// Previous is the record as the run found it (for resume decisions).
func (s *Store) Previous() *Record { return s.prev }

// Salt is the record's fingerprint salt.
func (s *Store) Salt() []byte { return s.rec.SaltBytes() }

// Lost is closed when a write finds that another writer changed, deleted
// or created the record: the store writes no more, and the run should stop.
func (s *Store) Lost() <-chan struct{} { return s.lostCh }

// Err is the *ConflictError that ended the writing, nil while there is
// none.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		return nil
	}
	return s.lost
}

// Run is what Begin records of the run it marks started.
type Run struct {
	Command, SpecHash, KhookVersion string
	// TraceID is the run's trace (OpenTelemetry), "" when none.
	TraceID string
	// Steps are the spec's steps; records of other steps are dropped.
	Steps []string
	// Changing maps each step the run may change (undo, replace, re-run
	// with other inputs) to the reason. Such a step recorded ok stops being
	// ok in Begin's write, before the run touches anything of it.
	Changing map[string]string
}

// Begin marks the run started and writes the record at once, proving it
// writable before the first step. In the same write, which the API server
// has acknowledged when Begin returns, every step of r.Changing recorded
// ok is marked running: from then on the record never claims a step the
// run may be changing, whenever the process dies.
//
// Before writing, it refuses (a *SizeError) a spec whose record could not
// fit in its Secret even with only the names, types, hashes and statuses
// of its steps: so no later write fails for want of space.
func (s *Store) Begin(ctx context.Context, r Run) error {
	need, err := EssentialSize(r.Steps, r.KhookVersion)
	if err != nil {
		return fmt.Errorf("state record %s: %w", s.loc, err)
	}
	if need > s.budget {
		return &SizeError{Location: s.loc, Steps: len(r.Steps), Need: need, Limit: s.budget, Before: true}
	}
	s.mu.Lock()
	now := time.Now().UTC()
	keep := make(map[string]bool, len(r.Steps))
	for _, n := range r.Steps {
		keep[n] = true
	}
	for n := range s.rec.Steps {
		if !keep[n] {
			delete(s.rec.Steps, n)
		}
	}
	s.marked = map[string]bool{}
	for n, why := range r.Changing {
		if e := s.rec.Steps[n]; e != nil && e.Status == StepOK {
			s.rec.Steps[n] = &StepRecord{Type: e.Type, Status: StepRunning, FinishedAt: now, Detail: Truncate(why)}
			s.marked[n] = true
		}
	}
	s.rec.Version, s.rec.Spec, s.rec.SpecHash, s.rec.KhookVersion = RecordVersion, s.spec, r.SpecHash, r.KhookVersion
	s.rec.Command, s.rec.RunStatus, s.rec.StartedAt, s.rec.FinishedAt = r.Command, "running", now, nil
	s.rec.TraceID = r.TraceID
	s.version++
	s.mu.Unlock()
	if err := s.write(ctx); err != nil {
		var ce *ConflictError
		if errors.As(err, &ce) {
			ce.Begin = true
			return ce
		}
		if ctx.Err() != nil {
			return fmt.Errorf("state record %s: the run was not marked begun, nothing ran: %w", s.loc, context.Cause(ctx))
		}
		return fmt.Errorf("state record %s is not writable: %w", s.loc, err)
	}
	s.kick, s.stop, s.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	s.writes, s.abort = context.WithCancel(context.Background())
	go s.writer()
	return nil
}

// Restore puts back the entry, as the run found it, of a step Begin marked
// running and the run then never started (it stopped first): nothing of
// the step was touched. The write follows asynchronously.
func (s *Store) Restore(name string) {
	s.mu.Lock()
	if !s.marked[name] {
		s.mu.Unlock()
		return
	}
	delete(s.marked, name)
	e := *s.prev.Steps[name]
	s.rec.Steps[name] = &e
	s.version++
	s.mu.Unlock()
	s.kickWriter()
}

// Step records a step's outcome; the write follows asynchronously.
func (s *Store) Step(name string, r StepRecord) {
	r.Error, r.Detail = Truncate(r.Error), Truncate(r.Detail)
	s.mu.Lock()
	s.rec.Steps[name] = &r
	delete(s.marked, name)
	s.version++
	s.mu.Unlock()
	s.kickWriter()
}

func (s *Store) kickWriter() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// stopWriter ends the writer goroutine, if Begin started it, waiting for
// its write in flight until ctx ends: then that write is abandoned (its
// outcome unknown, as after a lost answer: the next write recognises it).
func (s *Store) stopWriter(ctx context.Context) {
	if s.stop == nil {
		return
	}
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		s.abort()
		<-s.done
	}
	s.abort()
}

// Abandon stops writing the record, without a last write: the run lost
// its lock, so the record is another run's now (a write of this run
// already in flight may still land, and the other run's next write then
// finds it: decision 136).
func (s *Store) Abandon() { s.stopWriter(context.Background()) }

// Finish records how the run ended and writes it. Its error is the final
// write's: earlier writes that failed only delayed the journal (it claimed
// less than was done), and this write carries everything they would have.
// The exception is a conflict: after it nothing is written, and Finish
// returns it. ctx bounds the write and the wait for one in flight (both
// within writeTimeout); it should outlive the run's cancellation, so that an interrupted run still
// records how it ended (the engine passes one that ends kube.Grace after
// Ctrl-C).
func (s *Store) Finish(ctx context.Context, runStatus string) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout) // the wait for a write in flight included
	defer cancel()
	s.stopWriter(ctx)
	s.mu.Lock()
	now := time.Now().UTC()
	s.rec.RunStatus, s.rec.FinishedAt = runStatus, &now
	s.version++
	s.mu.Unlock()
	if err := s.write(ctx); err != nil {
		var ce *ConflictError
		if errors.As(err, &ce) {
			return ce
		}
		return fmt.Errorf("state record %s: final write failed: %w", s.loc, err)
	}
	return nil
}

// Delete removes the record (after a fully successful destroy): the
// version this run wrote, and only that one. A record another writer
// changed since is left alone and reported (a *ConflictError); one that is
// gone already is fine.
func (s *Store) Delete(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout) // the wait for a write in flight included
	defer cancel()
	s.stopWriter(ctx)
	s.mu.Lock()
	lost, rv, uid := s.lost, s.rv, s.uid
	s.mu.Unlock()
	if lost != nil {
		return lost
	}
	if rv == "" {
		return nil // this run found no record and wrote none
	}
	for try := 0; ; try++ {
		if err := s.checkFence(ctx); err != nil {
			return err
		}
		err := s.secrets.Delete(ctx, s.loc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv, UID: &uid}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return fmt.Errorf("state record %s: delete: %w", s.loc, err)
		}
		cur, ce := s.conflict(ctx, "changed", rv)
		if cur == nil || try > 0 {
			ce.Delete = true
			s.lose(ce)
			return ce
		}
		rv, uid = cur.ResourceVersion, cur.UID // this run's own write landed
	}
}

// writer writes the record after steps end, coalescing the updates that
// arrive while a write is in flight. A failed write is tried again after a
// pause (doubling from retryMin to retryMax) without waiting for the next
// update; Finish writes whatever is still unwritten. A conflict ends it:
// nothing more is written.
func (s *Store) writer() {
	defer close(s.done)
	var retry <-chan time.Time
	pause := retryMin
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-retry:
		}
		if err := s.write(s.writes); err != nil {
			var ce *ConflictError
			if errors.As(err, &ce) || s.Fenced() != nil {
				return
			}
			retry = time.After(pause)
			pause = min(2*pause, retryMax)
			continue
		}
		retry, pause = nil, retryMin
	}
}

// lose ends the writing with ce (the first conflict stands).
func (s *Store) lose(ce *ConflictError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = ce
		close(s.lostCh)
	}
}

// conflict reads the Secret after the API server refused a write or a
// delete of the version rv as changed, deleted or created (what). When the
// Secret holds a write of this run whose outcome was not known, it returns
// the Secret (the caller goes on from it); otherwise it returns the
// conflict, saying what it can of the other writer.
func (s *Store) conflict(ctx context.Context, what, rv string) (*corev1.Secret, *ConflictError) {
	ce := &ConflictError{Location: s.loc, What: what, Read: rv}
	cur, err := s.secrets.Get(ctx, s.loc.Name, metav1.GetOptions{})
	if err != nil {
		return nil, ce
	}
	ce.Now = cur.ResourceVersion
	if z, ok := cur.Data[GzipDataKey]; ok && cur.Labels[ManagedByLabel] == ManagedBy {
		s.mu.Lock()
		mine := s.unsure[sha256.Sum256(z)]
		s.mu.Unlock()
		if mine {
			return cur, nil
		}
	}
	if rec, err := DecodeSecret(cur); err == nil && rec.Command != "" {
		ce.Other = fmt.Sprintf("%s %s, begun %s", rec.Command, rec.RunStatus, rec.StartedAt.Format(time.RFC3339))
		if rec.KhookVersion != "" {
			ce.Other += " by khook " + rec.KhookVersion
		}
	}
	return nil, ce
}

// outcomeUnknown reports whether a failed request may have been carried
// out all the same: it timed out, or never got an answer.
func outcomeUnknown(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true
	}
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
}

// write stores the current record if it changed since the last write.
func (s *Store) write(parent context.Context) error {
	s.mu.Lock()
	if s.lost != nil {
		defer s.mu.Unlock()
		return s.lost
	}
	if s.version == s.written {
		s.mu.Unlock()
		return nil
	}
	version := s.version
	rec := s.rec.clone()
	rv, uid := s.rv, s.uid
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(parent, writeTimeout)
	defer cancel()
	rec.UpdatedAt = time.Now().UTC()
	data, err := encode(rec, s.budget, s.loc)
	if err != nil {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.loc.Name,
			Namespace:   s.loc.Namespace,
			Labels:      map[string]string{ManagedByLabel: ManagedBy, SpecLabel: labelValue(s.spec)},
			Annotations: map[string]string{"khook.io/description": "khook run-state record: per-step input hashes and outcomes (record.json.gz: gzipped JSON)"},
		},
		Type: "khook.io/state",
		// the record alone: a plain record.json an earlier khook wrote is
		// dropped, migrated
		Data: map[string][]byte{GzipDataKey: data},
	}
	var out *corev1.Secret
	for try := 0; ; try++ {
		if err := s.checkFence(ctx); err != nil {
			return err
		}
		sec.ResourceVersion, sec.UID = rv, uid
		if rv == "" {
			out, err = s.secrets.Create(ctx, sec, metav1.CreateOptions{FieldManager: "khook"})
		} else {
			out, err = s.secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: "khook"})
		}
		var what string
		switch {
		case err == nil:
		case outcomeUnknown(err):
			s.mu.Lock()
			s.unsure[sha256.Sum256(data)] = true
			s.mu.Unlock()
		case rv == "" && apierrors.IsAlreadyExists(err):
			what = "created"
		case rv != "" && apierrors.IsNotFound(err):
			what = "deleted"
		case rv != "" && apierrors.IsConflict(err):
			what = "changed"
		}
		if what == "" {
			break
		}
		cur, ce := s.conflict(ctx, what, rv)
		if cur == nil || try > 0 {
			s.lose(ce)
			return ce
		}
		// the Secret holds this run's own earlier write, whose answer was
		// lost: go on from it
		rv, uid = cur.ResourceVersion, cur.UID
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv, s.uid = out.ResourceVersion, out.UID
	clear(s.unsure)
	if version > s.written {
		s.written = version
	}
	return nil
}

// labelValue fits a spec name into a label value.
func labelValue(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(out) < 63; i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			out = append(out, c)
		}
	}
	for len(out) > 0 && !isAlnum(out[0]) {
		out = out[1:]
	}
	for len(out) > 0 && !isAlnum(out[len(out)-1]) {
		out = out[:len(out)-1]
	}
	return string(out)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
