package state

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The record Secret's identity.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "khook"
	SpecLabel      = "khook.io/spec"
	DataKey        = "record.json"
)

// writeTimeout bounds one write of the record; writes use a context of
// their own so an interrupted run still records how it ended.
const writeTimeout = 15 * time.Second

// Pauses before the writer tries a failed write again.
const (
	retryMin = 250 * time.Millisecond
	retryMax = 4 * time.Second
)

// Location names a record Secret.
type Location struct{ Namespace, Name string }

func (l Location) String() string { return l.Namespace + "/" + l.Name }

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
	rec, err = decode(sec)
	if err != nil {
		return nil, false, fmt.Errorf("state record %s: %w", loc, err)
	}
	return rec, true, nil
}

func decode(sec *corev1.Secret) (*Record, error) {
	rec := &Record{}
	if err := json.Unmarshal(sec.Data[DataKey], rec); err != nil {
		return nil, fmt.Errorf("unreadable record (delete the Secret to start afresh): %w", err)
	}
	if rec.Steps == nil {
		rec.Steps = map[string]*StepRecord{}
	}
	return rec, nil
}

// Store journals one run. Updates are applied in memory at once and
// written by one writer goroutine (so parallel steps never race on the
// Secret), coalescing updates that arrive while a write is in flight; each
// write uses the Secret's resourceVersion (optimistic concurrency).
//
// The record is crash-consistent: every version of it that reaches the
// API server claims no more than the cluster has. A step is recorded ok
// only after it succeeded, and a step the run may change stops being ok
// in Begin's synchronous write, before the run touches it; the
// asynchronous writes in between can only lag behind (a step done but not
// yet recorded re-runs), never run ahead.
type Store struct {
	secrets corev1client.SecretInterface
	loc     Location
	spec    string

	mu      sync.Mutex
	rec     *Record
	prev    *Record // the record as the run found it
	rv      string  // resourceVersion of the Secret, "" when absent
	version uint64  // bumped on every in-memory change
	written uint64  // the version the Secret holds
	// marked are the steps Begin marked running whose end is not recorded
	// yet
	marked map[string]bool

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// Open loads the record at loc (a new one when there is none), refusing a
// Secret of that name khook does not own. It does not write.
func Open(ctx context.Context, c kubernetes.Interface, loc Location, specName string) (*Store, error) {
	s := &Store{secrets: c.CoreV1().Secrets(loc.Namespace), loc: loc, spec: specName}
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
		s.rv = sec.ResourceVersion
		if s.rec, err = decode(sec); err != nil {
			s.rec = newRecord() // a journal: an unreadable one is started afresh
		}
		if s.rec.Salt == "" {
			s.rec.Salt = newRecord().Salt
		}
	}
	s.prev = s.rec.clone()
	return s, nil
}

// Location is where the record lives.
func (s *Store) Location() Location { return s.loc }

// Previous is the record as the run found it (for resume decisions).
func (s *Store) Previous() *Record { return s.prev }

// Salt is the record's fingerprint salt.
func (s *Store) Salt() []byte { return s.rec.SaltBytes() }

// Run is what Begin records of the run it marks started.
type Run struct {
	Command, SpecHash, KhookVersion string
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
func (s *Store) Begin(ctx context.Context, r Run) error {
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
	s.version++
	s.mu.Unlock()
	if err := s.write(ctx); err != nil {
		return fmt.Errorf("state record %s is not writable: %w", s.loc, err)
	}
	s.kick, s.stop, s.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
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

// Finish records how the run ended and writes it. Its error is the final
// write's: earlier writes that failed only delayed the journal (it claimed
// less than was done), and this write carries everything they would have.
func (s *Store) Finish(ctx context.Context, runStatus string) error {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	now := time.Now().UTC()
	s.rec.RunStatus, s.rec.FinishedAt = runStatus, &now
	s.version++
	s.mu.Unlock()
	if err := s.write(ctx); err != nil {
		return fmt.Errorf("state record %s: final write failed: %w", s.loc, err)
	}
	return nil
}

// Delete removes the record (after a fully successful destroy).
func (s *Store) Delete(ctx context.Context) error {
	if s.stop != nil {
		close(s.stop)
		<-s.done
	}
	err := s.secrets.Delete(ctx, s.loc.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("state record %s: delete: %w", s.loc, err)
	}
	return nil
}

// writer writes the record after steps end, coalescing the updates that
// arrive while a write is in flight. A failed write is tried again after a
// pause (doubling from retryMin to retryMax) without waiting for the next
// update; Finish writes whatever is still unwritten.
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
		if err := s.write(context.Background()); err != nil {
			retry = time.After(pause)
			pause = min(2*pause, retryMax)
			continue
		}
		retry, pause = nil, retryMin
	}
}

// write stores the current record if it changed since the last write.
func (s *Store) write(parent context.Context) error {
	s.mu.Lock()
	if s.version == s.written {
		s.mu.Unlock()
		return nil
	}
	version := s.version
	rec := s.rec.clone()
	rv := s.rv
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), writeTimeout)
	defer cancel()
	rec.UpdatedAt = time.Now().UTC()
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            s.loc.Name,
			Namespace:       s.loc.Namespace,
			ResourceVersion: rv,
			Labels:          map[string]string{ManagedByLabel: ManagedBy, SpecLabel: labelValue(s.spec)},
			Annotations:     map[string]string{"khook.io/description": "khook run-state record: per-step input hashes and outcomes"},
		},
		Type: "khook.io/state",
		Data: map[string][]byte{DataKey: data},
	}
	var out *corev1.Secret
	for try := 0; try < 3; try++ {
		if sec.ResourceVersion == "" {
			out, err = s.secrets.Create(ctx, sec, metav1.CreateOptions{FieldManager: "khook"})
		} else {
			out, err = s.secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: "khook"})
		}
		if err == nil || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) {
			break
		}
		// someone else wrote (or deleted) it: a single runner is assumed,
		// so take the current version and write ours over it
		cur, gerr := s.secrets.Get(ctx, s.loc.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			sec.ResourceVersion = ""
			continue
		case gerr != nil:
			err = gerr
		case cur.Labels[ManagedByLabel] != ManagedBy:
			err = &NotOwnedError{Location: s.loc}
		default:
			sec.ResourceVersion = cur.ResourceVersion
			continue
		}
		break
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = out.ResourceVersion
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
