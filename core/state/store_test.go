package state

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The fake clientset stands in for the API server's storage of one Secret:
// these tests check which record versions the store sends and in what
// order, not how a cluster behaves.

var testLoc = Location{Namespace: "ns", Name: "khook-state-t"}

// server is the API server's storage of the one record Secret, with its
// optimistic concurrency (a write or delete of another resourceVersion or
// UID is a 409), and the log of the record versions written.
type server struct {
	t    *testing.T
	mu   sync.Mutex
	sec  *corev1.Secret // nil when there is none
	rv   int
	recs []*Record
	// fail, while positive, refuses that many more writes unanswered
	fail int
	// lose, while positive, carries out that many more writes but loses
	// their answers (a timeout)
	lose int
	// before, when set, runs before each write (another writer's turn)
	before func(*server)
	// changes is closed (and forgotten) at each write recorded in recs:
	// waitFor's signal
	changes chan struct{}
}

// waitFor waits until cond holds, looking again after every write the
// server records (no polling); the bound only turns a hang into a failure.
func (w *server) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		w.mu.Lock()
		if w.changes == nil {
			w.changes = make(chan struct{})
		}
		changed := w.changes
		w.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

func (w *server) last() *Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.recs) == 0 {
		return nil
	}
	return w.recs[len(w.recs)-1]
}

func (w *server) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.recs)
}

// current is a copy of the Secret as stored, nil when there is none.
func (w *server) current() *corev1.Secret {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sec == nil {
		return nil
	}
	return w.sec.DeepCopy()
}

// store puts sec in place as a new version (the caller holds mu).
func (w *server) store(sec *corev1.Secret) *corev1.Secret {
	w.rv++
	sec = sec.DeepCopy()
	sec.ResourceVersion = strconv.Itoa(w.rv)
	w.sec = sec
	return sec.DeepCopy()
}

// otherWriter writes the Secret as another run would: a record of its own.
func (w *server) otherWriter(sec *corev1.Secret) {
	if sec == nil {
		w.sec = nil
		return
	}
	w.store(sec)
}

var secretsGR = schema.GroupResource{Resource: "secrets"}

func (w *server) react(a k8stesting.Action) (bool, runtime.Object, error) {
	w.mu.Lock()
	if w.before != nil && a.GetVerb() != "get" {
		before := w.before
		w.before = nil
		before(w)
	}
	defer w.mu.Unlock()
	switch a.GetVerb() {
	case "get":
		a := a.(k8stesting.GetAction)
		if w.sec == nil {
			return true, nil, apierrors.NewNotFound(secretsGR, a.GetName())
		}
		return true, w.sec.DeepCopy(), nil
	case "delete":
		a := a.(k8stesting.DeleteAction)
		if w.sec == nil {
			return true, nil, apierrors.NewNotFound(secretsGR, a.GetName())
		}
		if p := a.GetDeleteOptions().Preconditions; p != nil {
			if p.ResourceVersion != nil && *p.ResourceVersion != w.sec.ResourceVersion || p.UID != nil && *p.UID != w.sec.UID {
				return true, nil, apierrors.NewConflict(secretsGR, a.GetName(), errors.New("precondition failed"))
			}
		}
		w.sec = nil
		return true, nil, nil
	}
	if w.fail > 0 {
		w.fail--
		return true, nil, errors.New("connection refused")
	}
	var sec *corev1.Secret
	switch a.GetVerb() {
	case "create":
		sec = a.(k8stesting.CreateAction).GetObject().(*corev1.Secret)
		if w.sec != nil {
			return true, nil, apierrors.NewAlreadyExists(secretsGR, sec.Name)
		}
		sec = sec.DeepCopy()
		sec.UID = types.UID("uid-" + strconv.Itoa(w.rv))
	case "update":
		sec = a.(k8stesting.UpdateAction).GetObject().(*corev1.Secret)
		switch {
		case w.sec == nil:
			return true, nil, apierrors.NewNotFound(secretsGR, sec.Name)
		case sec.ResourceVersion != w.sec.ResourceVersion, sec.UID != "" && sec.UID != w.sec.UID:
			return true, nil, apierrors.NewConflict(secretsGR, sec.Name, errors.New("the object has been modified"))
		}
		sec = sec.DeepCopy()
		sec.UID = w.sec.UID
	default:
		w.t.Fatalf("unexpected %s", a.GetVerb())
	}
	r, err := DecodeSecret(sec)
	if err != nil {
		w.t.Errorf("an unreadable record was written: %v", err)
	}
	if _, plain := sec.Data[DataKey]; plain {
		w.t.Errorf("a write kept the plain %s", DataKey)
	}
	w.recs = append(w.recs, r)
	if w.changes != nil {
		close(w.changes)
		w.changes = nil
	}
	out := w.store(sec)
	if w.lose > 0 {
		w.lose--
		return true, nil, context.DeadlineExceeded
	}
	return true, out, nil
}

// recordSecret is a record Secret holding rec as an earlier khook wrote
// it (plain JSON), or gzipped.
func recordSecret(t *testing.T, rec *Record, gz bool) *corev1.Secret {
	t.Helper()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: testLoc.Name, Namespace: testLoc.Namespace, Labels: map[string]string{ManagedByLabel: ManagedBy}, UID: "uid-first"},
	}
	if gz {
		data, err := compress(rec)
		if err != nil {
			t.Fatal(err)
		}
		sec.Data = map[string][]byte{GzipDataKey: data}
	} else {
		data, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		sec.Data = map[string][]byte{DataKey: data}
	}
	return sec
}

// newFake returns a clientset over a server holding the record rec as an
// earlier khook wrote it (none when nil), and the server.
func newFake(t *testing.T, rec *Record) (*fake.Clientset, *server) {
	t.Helper()
	c := fake.NewClientset()
	w := &server{t: t, rv: 1}
	if rec != nil {
		w.store(recordSecret(t, rec, false))
	}
	c.PrependReactor("*", "secrets", w.react)
	return c, w
}

func okStep(hash string) *StepRecord {
	return &StepRecord{Type: "apply", Hash: hash, Status: StepOK, Attempts: 1, FinishedAt: time.Unix(1, 0).UTC()}
}

func TestBeginMarksChangingStepsInItsOwnWrite(t *testing.T) {
	prev := newRecord()
	prev.Steps = map[string]*StepRecord{
		"a":    okStep("sha256:a"),
		"b":    okStep("sha256:b"),
		"c":    {Type: "apply", Hash: "sha256:c", Status: StepFailed, Error: "boom"},
		"gone": okStep("sha256:gone"),
	}
	c, w := newFake(t, prev)
	ctx := context.Background()
	s, err := Open(ctx, c, testLoc, "t")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Begin(ctx, Run{Command: "destroy", Steps: []string{"a", "b", "c", "d"}, Changing: map[string]string{"a": "destroy began", "c": "destroy began", "d": "destroy began"}})
	if err != nil {
		t.Fatal(err)
	}
	// Begin's own write, done when it returns, no longer claims a
	if w.count() != 1 {
		t.Fatalf("Begin made %d writes, want 1", w.count())
	}
	first := w.last()
	if a := first.Steps["a"]; a.Status != StepRunning || a.Hash != "" || a.Detail != "destroy began" {
		t.Errorf("a after Begin: %+v", a)
	}
	if b := first.Steps["b"]; b.Status != StepOK || b.Hash != "sha256:b" {
		t.Errorf("b is not changing and must keep its entry: %+v", b)
	}
	if c := first.Steps["c"]; c.Status != StepFailed || c.Hash != "sha256:c" {
		t.Errorf("c claimed nothing and must keep its entry: %+v", c)
	}
	if first.Steps["d"] != nil || first.Steps["gone"] != nil {
		t.Errorf("entries for d (never ran) or gone (not in the spec): %+v", first.Steps)
	}
	if first.RunStatus != "running" || first.Command != "destroy" {
		t.Errorf("run %s %s", first.Command, first.RunStatus)
	}

	// a never started: its entry comes back as it was; b, never marked,
	// is not touched by a Restore
	s.Restore("a")
	s.Restore("b")
	s.Step("b", StepRecord{Type: "apply", Status: StepSkipped, Detail: "undone by destroy"})
	s.Restore("b")
	if err := s.Finish(ctx, "failed"); err != nil {
		t.Fatal(err)
	}
	last := w.last()
	if a := last.Steps["a"]; a.Status != StepOK || a.Hash != "sha256:a" || a.Attempts != 1 {
		t.Errorf("a restored: %+v", a)
	}
	if b := last.Steps["b"]; b.Status != StepSkipped {
		t.Errorf("a Restore after the step's end changed it back: %+v", b)
	}
	if last.RunStatus != "failed" || last.FinishedAt == nil {
		t.Errorf("finish: %+v", last)
	}
}

// TestEveryWriteClaimsNoMoreThanDone: a step becomes ok in the record only
// after Step says so; until then every version written says running.
func TestEveryWriteClaimsNoMoreThanDone(t *testing.T) {
	prev := newRecord()
	prev.Steps = map[string]*StepRecord{"x": okStep("sha256:old")}
	c, w := newFake(t, prev)
	ctx := context.Background()
	s, err := Open(ctx, c, testLoc, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(ctx, Run{Command: "apply", Steps: []string{"x", "y"}, Changing: map[string]string{"x": "apply began running it again (its inputs changed)", "y": "apply began"}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		s.Step("y", StepRecord{Type: "apply", Hash: "sha256:y", Status: StepOK, Attempts: i})
	}
	s.Step("x", StepRecord{Type: "apply", Hash: "sha256:new", Status: StepOK, Attempts: 1})
	if err := s.Finish(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	sawNew := false
	for k, r := range w.recs {
		x := r.Steps["x"]
		switch {
		case x.Status == StepOK && x.Hash == "sha256:new":
			sawNew = true
		case sawNew:
			t.Errorf("write %d went back on x: %+v", k, x)
		case x.Status != StepRunning:
			t.Errorf("write %d claims x before it ended: %+v", k, x)
		}
	}
	if !sawNew {
		t.Error("x's success was never written")
	}
	// 22 updates coalesce into far fewer writes
	if len(w.recs) > 12 {
		t.Errorf("%d writes for 22 updates: the writer does not coalesce", len(w.recs))
	}
}

// TestWriterRetriesAFailedWrite: a write that fails is tried again without
// waiting for the next step to end.
func TestWriterRetriesAFailedWrite(t *testing.T) {
	c, w := newFake(t, nil)
	ctx := context.Background()
	s, err := Open(ctx, c, testLoc, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(ctx, Run{Command: "apply", Steps: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.fail = 2
	w.mu.Unlock()
	s.Step("a", StepRecord{Type: "apply", Hash: "sha256:a", Status: StepOK, Attempts: 1})
	w.waitFor(t, "the writer writes a's success after two failed writes", func() bool {
		r := w.last()
		return r != nil && r.Steps["a"] != nil && r.Steps["a"].Status == StepOK
	})
	if err := s.Finish(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
}

// TestBeginFailsWhenTheRecordCannotBeWritten: nothing may run when the
// marking write fails.
func TestBeginFailsWhenTheRecordCannotBeWritten(t *testing.T) {
	prev := newRecord()
	prev.Steps = map[string]*StepRecord{"a": okStep("sha256:a")}
	c, w := newFake(t, prev)
	w.fail = 100
	s, err := Open(context.Background(), c, testLoc, "t")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Begin(context.Background(), Run{Command: "destroy", Steps: []string{"a"}, Changing: map[string]string{"a": "destroy began"}})
	if err == nil {
		t.Fatal("Begin succeeded although its write failed")
	}
}

// other is a record Secret another run wrote.
func other(t *testing.T) *corev1.Secret {
	rec := newRecord()
	rec.Command, rec.RunStatus = "apply", "running"
	rec.Steps["theirs"] = okStep("sha256:theirs")
	sec := recordSecret(t, rec, true)
	sec.UID = "uid-other"
	return sec
}

// lost waits until s reports a lost record.
func lost(t *testing.T, s *Store) {
	t.Helper()
	select {
	case <-s.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("the store never reported the conflict")
	}
}

// TestAConflictStopsTheWriting: another writer changing, deleting or
// creating the record ends the store's writing with a conflict; the other
// writer's version stands.
func TestAConflictStopsTheWriting(t *testing.T) {
	prev := newRecord()
	prev.Steps = map[string]*StepRecord{"a": okStep("sha256:a")}
	for _, tc := range []struct {
		name string
		// found: a record exists when the run opens it
		found bool
		// at: the other writer acts before Begin's write ("begin") or
		// before the next ("step")
		at    string
		sec   func(*testing.T) *corev1.Secret // what it leaves; nil: deletes
		what  string
		words string
	}{
		{"changed before Begin", true, "begin", other, "changed", "changed since this run read it (resourceVersion 2, now 3): another run wrote it (its record: apply running"},
		{"created before Begin", false, "begin", other, "created", "was created by another run"},
		{"deleted before Begin", true, "begin", nil, "deleted", "was deleted by another run"},
		{"changed mid-run", true, "step", other, "changed", "changed since this run read it (resourceVersion 3, now 4): another run wrote it"},
		{"deleted mid-run", true, "step", nil, "deleted", "was deleted by another run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *fake.Clientset
			var w *server
			if tc.found {
				c, w = newFake(t, prev)
			} else {
				c, w = newFake(t, nil)
			}
			ctx := context.Background()
			s, err := Open(ctx, c, testLoc, "t")
			if err != nil {
				t.Fatal(err)
			}
			var want *corev1.Secret
			if tc.sec != nil {
				want = tc.sec(t)
			}
			act := func(w *server) { w.otherWriter(want) }
			if tc.at == "begin" {
				w.before = act
				err := s.Begin(ctx, Run{Command: "apply", Steps: []string{"a"}})
				var ce *ConflictError
				if !errors.As(err, &ce) || !ce.Begin || ce.What != tc.what {
					t.Fatalf("Begin: %v, want a conflict (%s)", err, tc.what)
				}
				if !strings.Contains(err.Error(), tc.words) || !strings.Contains(err.Error(), "nothing ran") {
					t.Errorf("Begin: %v", err)
				}
			} else {
				if err := s.Begin(ctx, Run{Command: "apply", Steps: []string{"a"}}); err != nil {
					t.Fatal(err)
				}
				w.mu.Lock()
				w.before = act
				w.mu.Unlock()
				s.Step("a", StepRecord{Type: "apply", Hash: "sha256:a2", Status: StepOK})
				lost(t, s)
				var ce *ConflictError
				if err := s.Err(); !errors.As(err, &ce) || ce.What != tc.what || !strings.Contains(err.Error(), tc.words) {
					t.Fatalf("Err: %v, want a conflict (%s: %s)", err, tc.what, tc.words)
				}
				// later updates are not written; Finish reports the conflict
				s.Step("a", StepRecord{Type: "apply", Hash: "sha256:a3", Status: StepOK})
				if err := s.Finish(ctx, "ok"); !errors.As(err, &ce) || !strings.Contains(err.Error(), "left the other run's record in place") {
					t.Fatalf("Finish: %v", err)
				}
				if err := s.Delete(ctx); !errors.As(err, &ce) {
					t.Fatalf("Delete after a conflict: %v", err)
				}
			}
			if s.Err() == nil {
				t.Error("Err is nil after a conflict")
			}
			got := w.current()
			switch {
			case want == nil && got != nil:
				t.Fatalf("the record another run deleted was written again: %v", got.Data)
			case want != nil && (got == nil || got.UID != want.UID || string(got.Data[GzipDataKey]) != string(want.Data[GzipDataKey])):
				t.Fatalf("the other run's record was overwritten")
			}
		})
	}
}

// TestDeleteOnlyWhatThisRunWrote: after a successful destroy the record is
// deleted only as this run last wrote it.
func TestDeleteOnlyWhatThisRunWrote(t *testing.T) {
	prev := newRecord()
	prev.Steps = map[string]*StepRecord{"a": okStep("sha256:a")}
	for _, tc := range []struct {
		name     string
		meddle   func(*testing.T, *server)
		conflict bool
		left     bool // the Secret is still there
	}{
		{"untouched", func(*testing.T, *server) {}, false, false},
		{"changed by another run", func(t *testing.T, w *server) { w.otherWriter(other(t)) }, true, true},
		{"recreated by another run", func(t *testing.T, w *server) { w.sec = nil; w.otherWriter(other(t)) }, true, true},
		{"deleted by another run", func(t *testing.T, w *server) { w.sec = nil }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w := newFake(t, prev)
			ctx := context.Background()
			s, err := Open(ctx, c, testLoc, "t")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Begin(ctx, Run{Command: "destroy", Steps: []string{"a"}, Changing: map[string]string{"a": "destroy began"}}); err != nil {
				t.Fatal(err)
			}
			w.mu.Lock()
			tc.meddle(t, w)
			w.mu.Unlock()
			err = s.Delete(ctx)
			var ce *ConflictError
			if tc.conflict != errors.As(err, &ce) || !tc.conflict && err != nil {
				t.Fatalf("Delete: %v, want a conflict: %v", err, tc.conflict)
			}
			if tc.conflict && (!ce.Delete || !strings.Contains(err.Error(), "did not delete it")) {
				t.Errorf("Delete: %v", err)
			}
			if left := w.current() != nil; left != tc.left {
				t.Fatalf("the Secret is there after Delete: %v, want %v", left, tc.left)
			}
		})
	}
}

// TestAWriteWhoseAnswerWasLost: a write that landed although its answer was
// lost (a timeout) is the run's own: the next write goes on from it
// instead of reporting a conflict, and so does the delete.
func TestAWriteWhoseAnswerWasLost(t *testing.T) {
	c, w := newFake(t, nil)
	ctx := context.Background()
	s, err := Open(ctx, c, testLoc, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(ctx, Run{Command: "apply", Steps: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.lose = 1
	w.mu.Unlock()
	s.Step("a", StepRecord{Type: "apply", Hash: "sha256:a", Status: StepOK})
	// the lost answer made the writer retry; wait for the write after it
	w.waitFor(t, "the writer writes again after the lost answer", func() bool { return w.count() >= 3 })
	s.Step("b", StepRecord{Type: "apply", Hash: "sha256:b", Status: StepOK})
	if err := s.Finish(ctx, "ok"); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if r := w.last(); r.Steps["a"].Status != StepOK || r.Steps["b"].Status != StepOK || r.RunStatus != "ok" {
		t.Fatalf("last record %+v", r)
	}
	// the final write's answer is lost too: the delete still finds it
	// its own
	s2, err := Open(ctx, c, testLoc, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Begin(ctx, Run{Command: "destroy", Steps: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.lose = 1
	w.mu.Unlock()
	if err := s2.Finish(ctx, "failed"); err == nil {
		t.Fatal("the write whose answer was lost succeeded")
	}
	if err := s2.Delete(ctx); err != nil || w.current() != nil {
		t.Fatalf("Delete: %v; Secret left: %v", err, w.current() != nil)
	}
}

// TestAPlainRecordIsReadAndMigrated: a record an earlier khook wrote as
// plain JSON resumes, and the next write stores it gzipped alone.
func TestAPlainRecordIsReadAndMigrated(t *testing.T) {
	prev := newRecord()
	prev.Steps = map[string]*StepRecord{"a": okStep("sha256:a")}
	c, w := newFake(t, prev)
	if _, plain := w.current().Data[DataKey]; !plain {
		t.Fatal("the fixture is not a plain record")
	}
	ctx := context.Background()
	rec, found, err := Read(ctx, c, testLoc)
	if err != nil || !found || !rec.Resumes("a", "sha256:a") {
		t.Fatalf("Read: %v %v %+v", err, found, rec)
	}
	s, err := Open(ctx, c, testLoc, "t")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Previous().Resumes("a", "sha256:a") || s.Previous().Salt != prev.Salt {
		t.Fatalf("Open lost the plain record: %+v", s.Previous())
	}
	if err := s.Begin(ctx, Run{Command: "apply", Steps: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	sec := w.current()
	if _, plain := sec.Data[DataKey]; plain || len(sec.Data) != 1 {
		t.Fatalf("after a write the Secret holds %d keys, plain: %v", len(sec.Data), plain)
	}
	got, err := DecodeSecret(sec)
	if err != nil || !got.Resumes("a", "sha256:a") || got.Salt != prev.Salt {
		t.Fatalf("migrated record: %v %+v", err, got)
	}
}

// TestBeginRefusesARecordThatCannotFit: a spec whose essential record is
// over the budget stops at Begin, before anything is written.
func TestBeginRefusesARecordThatCannotFit(t *testing.T) {
	steps := make([]string, 200)
	for i := range steps {
		steps[i] = "step-" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		budget int
		refuse bool
	}{{4 << 10, true}, {64 << 10, false}} {
		t.Run(strconv.Itoa(tc.budget), func(t *testing.T) {
			c, w := newFake(t, nil)
			ctx := context.Background()
			s, err := Open(ctx, c, testLoc, "t")
			if err != nil {
				t.Fatal(err)
			}
			s.budget = tc.budget
			err = s.Begin(ctx, Run{Command: "apply", KhookVersion: "v1.2.3", Steps: steps})
			var se *SizeError
			if errors.As(err, &se) != tc.refuse {
				t.Fatalf("Begin: %v, want a refusal: %v", err, tc.refuse)
			}
			if !tc.refuse {
				if err := s.Finish(ctx, "ok"); err != nil {
					t.Fatal(err)
				}
				return
			}
			if w.count() != 0 {
				t.Error("Begin wrote a record it refused")
			}
			for _, s := range []string{"of 200 steps needs at least", "over the 4096 bytes", "split the spec", "nothing ran"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q does not say %q", err, s)
				}
			}
		})
	}
}

// TestFencedWrites: every write asks the fence (the run lock) first. While
// it cannot tell (an outage), the write waits and is tried again; once it
// refuses for good (the lock was lost), nothing more is written: no step's
// outcome, no final write, no delete.
func TestFencedWrites(t *testing.T) {
	c, w := newFake(t, nil)
	ctx := context.Background()
	s, err := Open(ctx, c, testLoc, "t")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked int
	unknown := make(chan struct{}) // open: the fence answers at once
	close(unknown)
	var final error
	askedCh := make(chan struct{}, 100)
	s.Fence(func(ctx context.Context) error {
		mu.Lock()
		asked++
		wait, err := unknown, final
		mu.Unlock()
		askedCh <- struct{}{}
		select {
		case <-wait:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err := s.Begin(ctx, Run{Command: "apply", Steps: []string{"a", "b", "c"}}); err != nil {
		t.Fatal(err)
	}
	if asked != 1 || w.count() != 1 {
		t.Fatalf("Begin asked the fence %d times and wrote %d times, want 1 and 1", asked, w.count())
	}

	// the lock is unconfirmed: the outcome waits, then goes
	mu.Lock()
	unknown = make(chan struct{})
	held := unknown
	mu.Unlock()
	s.Step("a", StepRecord{Type: "apply", Hash: "sha256:a", Status: StepOK})
	<-askedCh // Begin's
	<-askedCh // a's write
	if w.count() != 1 {
		t.Fatalf("a write went while the fence could not tell: %d writes", w.count())
	}
	mu.Lock()
	close(held)
	mu.Unlock()
	w.waitFor(t, "a's success is written once the fence opens", func() bool {
		r := w.last()
		return r.Steps["a"] != nil && r.Steps["a"].Status == StepOK
	})

	// the lock is lost: nothing more is written
	mu.Lock()
	final = errors.New("run lock of state record ns/khook-state-t lost: taken over by run bbbb")
	mu.Unlock()
	writes := w.count()
	s.Step("b", StepRecord{Type: "apply", Hash: "sha256:b", Status: StepOK})
	<-askedCh // b's write, refused
	if err := s.Finish(ctx, "ok"); err == nil || !strings.Contains(err.Error(), "taken over by run bbbb") {
		t.Errorf("Finish after the lock was lost: %v, want it refused", err)
	}
	if s.Fenced() == nil {
		t.Error("the store does not say the fence refused")
	}
	if err := s.Delete(ctx); err == nil {
		t.Error("Delete after the lock was lost succeeded")
	}
	if w.count() != writes {
		t.Errorf("%d writes after the lock was lost", w.count()-writes)
	}
}
