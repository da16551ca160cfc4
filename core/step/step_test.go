package step

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"khook.io/core/redact"
	"khook.io/core/spec"
)

func TestRedacted(t *testing.T) {
	const secret = "s3cr3t-value"
	r := redact.New()
	r.Add(secret)

	p := Prediction{Action: ActionCreate, Reason: "token " + secret, Details: []string{"a " + secret, "plain"}}
	got := p.Redacted(r)
	if strings.Contains(got.Reason+strings.Join(got.Details, ""), secret) || got.Details[1] != "plain" || got.Action != ActionCreate {
		t.Errorf("Prediction.Redacted: %+v", got)
	}
	if p.Details[0] != "a "+secret {
		t.Errorf("Prediction.Redacted changed its receiver's details: %q", p.Details[0])
	}

	d := Diff{
		Skip:    "skip " + secret,
		Notes:   []string{"note " + secret},
		Changes: true,
		Objects: []ObjectDiff{{Name: "ConfigMap " + secret, Unavailable: "ns " + secret, Note: "n " + secret}},
	}
	gd := d.Redacted(r)
	o := gd.Objects[0]
	for _, s := range []string{gd.Skip, gd.Notes[0], o.Name, o.Unavailable, o.Note} {
		if strings.Contains(s, secret) || !strings.Contains(s, "***") {
			t.Errorf("Diff.Redacted left %q", s)
		}
	}
	if !gd.Changes || d.Objects[0].Name != "ConfigMap "+secret {
		t.Errorf("Diff.Redacted: changes %v, receiver's object %q", gd.Changes, d.Objects[0].Name)
	}
	if (Diff{}).Redacted(r).Objects != nil || (Prediction{}).Redacted(r).Details != nil {
		t.Error("Redacted turned nil slices into empty ones")
	}
}

// An executor's exit masks what it returns: outcome, prediction, diff,
// errors (still unwrappable), an interruption's note and an unavailable
// diff's reason; progress through Logf is masked too.
func TestRequestRedactsAtTheExit(t *testing.T) {
	const secret = "s3cr3t-value"
	r := redact.New()
	r.Add(secret)
	var logged []string
	req := &Request{Redactor: r, Log: func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }}
	leaks := func(what, s string) {
		t.Helper()
		if strings.Contains(s, secret) || !strings.Contains(s, "***") {
			t.Errorf("%s: %q", what, s)
		}
	}

	base := errors.New("refused: " + secret)
	out, err := Outcome{Message: "m " + secret, SkipReason: "s " + secret}, base
	req.redactOutcome(&out, &err)
	leaks("outcome message", out.Message)
	leaks("outcome skip reason", out.SkipReason)
	leaks("outcome error", err.Error())
	if !errors.Is(err, base) {
		t.Error("the redacted error does not unwrap to the cause")
	}

	err = Interrupted("deleted Job "+secret, base)
	req.redactOutcome(&out, &err)
	var note interface{ InterruptNote() string }
	if !errors.As(err, &note) {
		t.Fatalf("the interruption is lost: %v", err)
	}
	leaks("interruption note", note.InterruptNote())
	leaks("interruption error", err.Error())

	p, err := Prediction{Action: ActionCreate, Reason: "r " + secret}, error(nil)
	req.redactPrediction(&p, &err)
	leaks("prediction reason", p.Reason)
	p, err = Prediction{Action: ActionCreate}, base
	req.redactPrediction(&p, &err)
	if p.Action != (Action{}) {
		t.Errorf("a failed plan kept its prediction: %+v", p)
	}
	leaks("plan error", err.Error())

	d, err := Diff{Notes: []string{"n " + secret}}, error(nil)
	req.redactDiff(&d, &err)
	leaks("diff note", d.Notes[0])
	d, err = Diff{Notes: []string{"x"}}, &UnavailableError{Reason: "ns " + secret}
	req.redactDiff(&d, &err)
	var un *UnavailableError
	if !errors.As(err, &un) || d.Notes != nil {
		t.Fatalf("unavailable: %v %+v", err, d)
	}
	leaks("unavailable reason", un.Reason)
	d, err = Diff{}, base
	req.redactDiff(&d, &err)
	leaks("diff error", err.Error())

	req.Logf("applying %s", secret)
	req.Progress("line " + secret)
	if len(logged) != 2 {
		t.Fatalf("logged %q", logged)
	}
	leaks("Logf", logged[0])
	leaks("Progress", logged[1])
	(&Request{}).Logf("dropped without a Log")
}

func TestObjectsManager(t *testing.T) {
	if m := (&Request{}).Objects(); m.FieldManager() != "khook" {
		t.Errorf("default field manager %q", m.FieldManager())
	}
	if m := (&Request{FieldManager: "ops"}).Objects(); m.FieldManager() != "ops" {
		t.Errorf("configured field manager %q", m.FieldManager())
	}
}

type kindBlock struct{}

type kindExec struct{ name string }

func (e kindExec) Kind() spec.StepKind                          { return spec.StepKind{Name: e.name, Block: new(kindBlock)} }
func (kindExec) Run(context.Context, *Request) (Outcome, error) { return Outcome{}, nil }

// TestRegistryKinds: the registry holds each executor by its kind's name
// and the kinds in registration order; two of one kind are refused.
func TestRegistryKinds(t *testing.T) {
	r, err := NewRegistry(kindExec{"b"}, kindExec{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := r.Get("a"); !ok || e.(kindExec).name != "a" {
		t.Errorf("Get(a) = %v, %v", e, ok)
	}
	if got := strings.Join(r.Kinds().Names(), ","); got != "b,a" {
		t.Errorf("kinds %s, want b,a (registration order)", got)
	}
	if got := strings.Join(r.Types(), ","); got != "a,b" {
		t.Errorf("types %s, want a,b (sorted)", got)
	}
	if _, err := NewRegistry(kindExec{"a"}, kindExec{"a"}); err == nil || !strings.Contains(err.Error(), `two step kinds are named "a"`) {
		t.Errorf("two of one kind: %v", err)
	}
}
