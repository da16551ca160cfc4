package engine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/steps/builtin"
)

// askedExec is an executor of one step type whose plan and diff note the
// step they were asked of, and whether its request said --replace.
type askedExec struct {
	typ   string
	mu    *sync.Mutex
	asked *[]string
}

func (e askedExec) Kind() spec.StepKind { return spec.StepKind{Name: e.typ, Block: &struct{}{}} }
func (e askedExec) Run(context.Context, *step.Request) (step.Outcome, error) {
	return step.Outcome{}, nil
}

func (e askedExec) note(verb string, r *step.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := verb + " " + r.Step.Name
	if r.Replace {
		s += " (replace)"
	}
	*e.asked = append(*e.asked, s)
}

func (e askedExec) Plan(_ context.Context, r *step.Request) (step.Prediction, error) {
	e.note("plan", r)
	return step.Prediction{Action: step.ActionConfigure}, nil
}

func (e askedExec) Diff(_ context.Context, r *step.Request) (step.Diff, error) {
	e.note("diff", r)
	return step.Diff{Changes: true}, nil
}

// TestPlanAsksWhatRuns: the live plan asks an executor only about the
// steps the run runs or may run (a step the record resumes, or --steps
// leaves out, is planned from the record: no request), dry-runs the
// triggers the run runs (a trigger --replace forces, which the record
// would resume, among them: the regression of 0f337a2), and only the
// request of a forced step says --replace. The want lists are written by
// hand.
func TestPlanAsksWhatRuns(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sel       SelectOptions
		resumed   []string
		planned   []string
		dryRun    []string
		dryChange map[string]bool
	}{{
		name:    "everything resumed: only the conditional steps are planned",
		resumed: []string{"a", "b", "c", "e", "f"},
		planned: []string{"plan c", "plan f"},
	}, {
		name:      "--replace of a trigger the record resumes: planned and dry-run, with replace",
		sel:       SelectOptions{Replace: []string{"b"}},
		resumed:   []string{"a", "b", "c", "e", "f"},
		planned:   []string{"plan b (replace)", "plan c", "plan f"},
		dryRun:    []string{"diff b (replace)"},
		dryChange: map[string]bool{"b": true},
	}, {
		name:    "nothing resumed: every included step is planned, none is conditional",
		planned: []string{"plan a", "plan b", "plan c", "plan e", "plan f"},
	}, {
		name:    "--steps: only the selected steps are planned",
		sel:     SelectOptions{Steps: []string{"e"}},
		resumed: []string{"a"},
		planned: []string{"plan b", "plan e"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(fateTableSpec, "%STATE%", "state: {}\n", 1)
			doc, err := (&load.Loader{Steps: builtin.Registry}).Load(load.Options{File: "-", Stdin: strings.NewReader(text), Redactor: redact.New()})
			if err != nil {
				t.Fatal(err)
			}
			var asked []string
			var mu sync.Mutex
			reg, err := step.NewRegistry(askedExec{"apply", &mu, &asked}, askedExec{"rollout", &mu, &asked}, askedExec{"job", &mu, &asked})
			if err != nil {
				t.Fatal(err)
			}
			sel, err := Resolve(doc, CommandPlan, tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			resumed := make([]bool, len(doc.Spec.Steps))
			for _, name := range tc.resumed {
				i, _ := doc.Graph.Index(name)
				resumed[i] = true
			}
			disp := Dispose(doc, CommandPlan, sel, Facts{Resumed: resumed})
			c := &Cluster{doc: doc, red: redact.New(), registry: reg}
			c.livePlan(t.Context(), disp)
			slices.Sort(asked)
			if !slices.Equal(asked, tc.planned) {
				t.Errorf("planned %q, want %q", asked, tc.planned)
			}
			asked = nil
			dry := c.dryRunTriggers(t.Context(), disp)
			if !slices.Equal(asked, tc.dryRun) {
				t.Errorf("dry-ran %q, want %q", asked, tc.dryRun)
			}
			got := map[string]bool{}
			for j, ch := range dry {
				got[doc.Spec.Steps[j].Name] = ch
			}
			if !maps.Equal(got, tc.dryChange) {
				t.Errorf("dry runs predict %v, want %v", got, tc.dryChange)
			}
		})
	}
}
