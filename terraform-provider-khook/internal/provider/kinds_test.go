package provider

import (
	"context"
	"slices"
	"strings"
	"testing"

	"khook.io/core/engine"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/vars"
)

// say: is a kind of this test, which the provider does not know: it
// predicts its block's word, an action it declares itself: rotate (a
// change, and drift) or ping (a change a run always makes, like a
// rollout's restart: not drift).
type say struct {
	Word string `yaml:"word" khook:"required"`
}

func (*say) Summary(*spec.Step) string { return "say" }

var sayActions = map[string]step.Action{
	"rotate": {Word: "rotate", Changes: true, Drift: true},
	"ping":   {Word: "ping", Changes: true},
}

type sayExec struct{}

func (sayExec) Kind() spec.StepKind { return spec.StepKind{Name: "say", Block: new(say)} }

func (sayExec) Run(context.Context, *step.Request) (step.Outcome, error) {
	return step.Outcome{}, nil
}

func (sayExec) Plan(_ context.Context, req *step.Request) (step.Prediction, error) {
	return step.Prediction{Action: sayActions[spec.BlockOf[say](req.Step).Word]}, nil
}

// TestTestKindActionPlanned: a kind's new action word reaches the
// provider's steps rows as it is, and the provider plans an update for it
// when, and only when, the kind declares it drift (step.Action.Drift),
// though the provider names no such word. The kind of core's own tests
// (core/steps/testkind, TestTestKindNewAction) proves the plan, diff and
// destroy plan count and render its words.
func TestTestKindActionPlanned(t *testing.T) {
	reg := func() (*step.Registry, error) { return step.NewRegistry(sayExec{}) }
	for _, tc := range []struct {
		words     []string
		want      []string
		wantDrift bool
	}{
		{[]string{"rotate"}, []string{"a rotate"}, true},
		{[]string{"ping"}, []string{"a ping"}, false},
		{[]string{"ping", "rotate"}, []string{"a ping", "b rotate"}, true},
	} {
		t.Run(strings.Join(tc.words, ","), func(t *testing.T) {
			src := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: kinds}\nsteps:\n"
			for i, w := range tc.words {
				src += "  - name: " + string(rune('a'+i)) + "\n    say: {word: " + w + "}\n"
			}
			red := redact.New()
			set, err := vars.Resolve(vars.Options{}, red)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := (&load.Loader{Steps: reg}).Parse([]byte(src), "spec.yaml", t.TempDir(), set, red)
			if err != nil {
				t.Fatal(err)
			}
			e := &engine.Engine{Steps: reg, Redactor: red}
			cl := e.Attach(doc, &kube.Clients{}, engine.Target{}, engine.Options{})
			res, err := engine.NewPlan(cl).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rows, drift := planRows(res.Plan, fatesOf(doc, res), actionsOf(doc, res), nil, false, red)
			var got []string
			for _, r := range rows {
				got = append(got, r.Name+" "+r.Action)
			}
			if !slices.Equal(got, tc.want) || drift != tc.wantDrift {
				t.Errorf("rows %q, drift %v; want %q, drift %v", got, drift, tc.want, tc.wantDrift)
			}
		})
	}
}
