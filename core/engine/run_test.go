package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/run"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/steps/builtin"
)

// loadDoc loads a spec file of the tests.
func loadDoc(t *testing.T, file string) *load.Document {
	t.Helper()
	doc, err := (&load.Loader{Steps: builtin.Registry}).Load(load.Options{File: file, Redactor: redact.New()})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// fakeExec is an executor of one step type that succeeds; with undo, it
// has a Destroy too.
type fakeExec struct {
	typ string
	ran *[]string
}

func (e fakeExec) Kind() spec.StepKind { return spec.StepKind{Name: e.typ, Block: &struct{}{}} }
func (e fakeExec) Run(_ context.Context, r *step.Request) (step.Outcome, error) {
	*e.ran = append(*e.ran, "run "+r.Step.Name)
	return step.Outcome{Message: "done"}, nil
}

type fakeDestroyer struct{ fakeExec }

func (e fakeDestroyer) Destroy(_ context.Context, r *step.Request) (step.Outcome, error) {
	*e.ran = append(*e.ran, "destroy "+r.Step.Name)
	return step.Outcome{Message: "undone"}, nil
}

// TestRunTasks: what apply and destroy run of the golden spec, with fake
// executors: apply runs every included step in DAG order; destroy undoes
// only what a Destroyer undoes, in reverse order, and says why it leaves
// the others alone.
func TestRunTasks(t *testing.T) {
	doc := loadDoc(t, "../cli/testdata/golden-spec.yaml")
	for command, want := range map[string]string{
		"apply":   "run remove-aws-node, run cilium, run coredns-ready, run restart-agent",
		"destroy": "destroy cilium",
	} {
		t.Run(command, func(t *testing.T) {
			var ran []string
			reg, err := step.NewRegistry(fakeDestroyer{fakeExec{"helm", &ran}}, fakeExec{"delete", &ran}, fakeExec{"wait", &ran}, fakeExec{"rollout", &ran})
			if err != nil {
				t.Fatal(err)
			}
			e := &Engine{Steps: func() (*step.Registry, error) { return reg, nil }, Redactor: redact.New()}
			c := e.Attach(doc, nil, Target{}, Options{})
			res, err := c.Execute(context.Background(), Command(command), RunOptions{Parallelism: 1})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(ran, ", "); got != want {
				t.Errorf("ran %s, want %s", got, want)
			}
			if res.Status != run.RunOK {
				t.Errorf("run %s", res.Status)
			}
			if command == "destroy" {
				var reason string
				for _, s := range res.Steps {
					if s.Type == "delete" {
						reason = s.SkipReason
					}
				}
				if reason != "nothing to undo: destroy leaves delete steps alone" {
					t.Errorf("the result does not say why a delete step is left alone: %q", reason)
				}
			}
		})
	}
}

// TestStepWarnings: a step's warnings are notes, redacted, as
// kubectl words the API server's ("Warning: ..."), naming the step, each
// once per step; NOTES only when the engine reports them (-v 1).
func TestStepWarnings(t *testing.T) {
	red := redact.New()
	red.Add("s3cr3t-value")
	var out bytes.Buffer
	notes := func(n Note) {
		switch n.Kind {
		case NoteStepWarning:
			fmt.Fprintf(&out, "Warning: %s: %s\n", n.Subject, n.Text)
		case NoteRelease:
			fmt.Fprintf(&out, "NOTES of %s:\n%s\n", n.Subject, n.Text)
		}
	}
	s := &Cluster{red: red, notes: notes}
	a, b := s.warn("cilium"), s.warn("cert-manager")
	a("this chart is deprecated")
	a("this chart is deprecated")
	b("this chart is deprecated")
	a("unknown field \"dta\" in s3cr3t-value")
	want := "Warning: cilium: this chart is deprecated\nWarning: cert-manager: this chart is deprecated\nWarning: cilium: unknown field \"dta\" in ***\n"
	if out.String() != want {
		t.Errorf("warnings:\n%s\nwant:\n%s", out.String(), want)
	}
	if s.releaseNotesFunc() != nil {
		t.Error("NOTES written without -v")
	}
	out.Reset()
	s.releaseNotes = true
	s.releaseNotesFunc()("release app (ns)", "Visit s3cr3t-value\n")
	if out.String() != "NOTES of release app (ns):\nVisit ***\n" {
		t.Errorf("notes %q", out.String())
	}
}

// Begin begins only the commands that are runs: plan, diff, status and
// graph are refused before the lock or the record is touched (the
// cluster here has no clients: reaching either would panic).
func TestBeginTakesOnlyRuns(t *testing.T) {
	for _, command := range []Command{CommandPlan, CommandDiff, CommandStatus, CommandGraph, "bogus"} {
		c := &Cluster{red: redact.New()}
		r, err := c.Begin(context.Background(), command, 0)
		if r != nil || err == nil || err.Error() != fmt.Sprintf("%s is not a run: only apply and destroy begin one", command) {
			t.Errorf("Begin(%s): %v, %v; want it refused", command, r, err)
		}
	}
}
