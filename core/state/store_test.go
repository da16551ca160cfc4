package state

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The fake clientset stands in for the API server's storage of one Secret:
// these tests check which record versions the store sends and in what
// order, not how a cluster behaves.

var testLoc = Location{Namespace: "ns", Name: "khook-state-t"}

// writes records every record version written to the Secret.
type writes struct {
	mu   sync.Mutex
	recs []*Record
	// fail, while positive, fails that many more writes
	fail int
}

func (w *writes) last() *Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.recs) == 0 {
		return nil
	}
	return w.recs[len(w.recs)-1]
}

func (w *writes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.recs)
}

// newFake returns a clientset holding the record rec (none when nil) and
// the log of the writes made through it.
func newFake(t *testing.T, rec *Record) (*fake.Clientset, *writes) {
	t.Helper()
	var objs []runtime.Object
	if rec != nil {
		data, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: testLoc.Name, Namespace: testLoc.Namespace, Labels: map[string]string{ManagedByLabel: ManagedBy}, ResourceVersion: "1"},
			Data:       map[string][]byte{DataKey: data},
		})
	}
	c := fake.NewClientset(objs...)
	w := &writes{}
	rv := 1
	record := func(a k8stesting.Action) (bool, runtime.Object, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.fail > 0 {
			w.fail--
			return true, nil, errors.New("connection refused")
		}
		var sec *corev1.Secret
		switch a := a.(type) {
		case k8stesting.CreateAction:
			sec = a.GetObject().(*corev1.Secret)
		case k8stesting.UpdateAction:
			sec = a.GetObject().(*corev1.Secret)
		}
		// the tracker keeps no resourceVersion: give each write one, as
		// the API server does
		rv++
		sec.ResourceVersion = strconv.Itoa(rv)
		r := &Record{}
		if err := json.Unmarshal(sec.Data[DataKey], r); err != nil {
			t.Errorf("an unreadable record was written: %v", err)
		}
		w.recs = append(w.recs, r)
		return false, nil, nil // the tracker stores it
	}
	c.PrependReactor("create", "secrets", record)
	c.PrependReactor("update", "secrets", record)
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := w.last(); r != nil && r.Steps["a"] != nil && r.Steps["a"].Status == StepOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never wrote a's success after two failed writes")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
