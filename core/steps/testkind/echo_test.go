package testkind

import (
	"context"
	"errors"
	"fmt"

	"khook.io/core/event"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/steps/builtin"
)

// echo: is the second kind of the tests: it touches no cluster and says
// its text in everything it returns and reports (its outcome, prediction,
// destroy plan, errors, progress lines, warnings, phases, causes), masking
// nothing itself: the engine's boundary must (docs/spec.md 287). It also
// declares action words no other package knows, echo (a change, and
// drift) and unsay (destroy's, counted as "to unsay"), which the plan
// counts, renders and the Terraform provider plans (docs/spec.md 285,
// 286).

// EchoType is echo:'s action key.
const EchoType = "echo"

// Echo is an echo: step's block.
type Echo struct {
	Text string `yaml:"text" khook:"required" doc:"what the step says, everywhere"`
	Fail bool   `yaml:"fail" doc:"fail, saying the text"`
	// Same: the step changes nothing (a step it triggers is skipped).
	Same bool `yaml:"same" doc:"change nothing"`
}

// Summary says how long the text is, not the text (a summary is the
// spec's, and is shown as it is).
func (e *Echo) Summary(*spec.Step) string { return fmt.Sprintf("echo %d characters", len(e.Text)) }

// The echo kind's own actions.
var (
	ActionEcho   = step.Action{Word: "echo", Changes: true, Drift: true}
	DestroyUnsay = step.DestroyAction{Word: "unsay", Tally: "to unsay", Rank: 15}
)

// EchoExecutor runs echo: steps: step.Executor, step.Planner,
// step.Destroyer and step.DestroyPlanner; it redacts nothing.
type EchoExecutor struct{}

// Kind describes echo: steps.
func (*EchoExecutor) Kind() spec.StepKind {
	return spec.StepKind{Name: EchoType, Doc: "say a text (a kind of the tests)", Block: new(Echo)}
}

// say reports the text on every channel an executor has besides what it
// returns: a raw progress line (Log, not Logf), a warning, a phase with
// its error, a wait's cause.
func say(ctx context.Context, req *step.Request, text string) {
	if req.Log != nil {
		req.Log("progress: %s", text)
	}
	if req.Warn != nil {
		req.Warn("warning: " + text)
	}
	end := event.Phase(ctx, event.PhaseApply, "phase: "+text)
	end(errors.New("phase failed: " + text))
	event.Cause(ctx, "cause: "+text, false)
}

// Run says the text and returns it as its message, drift and kept lines;
// with fail: it fails saying it.
func (*EchoExecutor) Run(ctx context.Context, req *step.Request) (step.Outcome, error) {
	e := spec.BlockOf[Echo](req.Step)
	say(ctx, req, e.Text)
	if e.Fail {
		return step.Outcome{Message: "half said " + e.Text}, fmt.Errorf("echo failed: %s", e.Text)
	}
	return step.Outcome{Message: "said " + e.Text, Changed: !e.Same, Drift: []string{"drift: " + e.Text}, Kept: []string{"kept: " + e.Text}}, nil
}

// Plan predicts echo, the text in its reason, details, kept and drift
// lines; with fail: its plan fails saying it.
func (*EchoExecutor) Plan(ctx context.Context, req *step.Request) (step.Prediction, error) {
	e := spec.BlockOf[Echo](req.Step)
	say(ctx, req, e.Text)
	if e.Fail {
		return step.Prediction{Reason: "half planned " + e.Text}, fmt.Errorf("echo plan failed: %s", e.Text)
	}
	return step.Prediction{Action: ActionEcho, Reason: "would say " + e.Text, Details: []string{"detail: " + e.Text},
		Kept: []string{"kept: " + e.Text}, Drift: []string{"drift: " + e.Text}}, nil
}

// PlanDestroy unsays the text, named in the item's object and reason.
func (*EchoExecutor) PlanDestroy(ctx context.Context, req *step.Request) (step.DestroyPlan, error) {
	e := spec.BlockOf[Echo](req.Step)
	say(ctx, req, e.Text)
	p := step.DestroyPlan{Items: []step.DestroyItem{{Object: "text " + e.Text, Action: DestroyUnsay, Reason: "it said " + e.Text,
		Fields: []step.DestroyField{{Path: ".text", Outcome: "remove", Value: e.Text, Reason: "said " + e.Text}}}}}
	if e.Fail {
		return p, fmt.Errorf("echo destroy plan failed: %s", e.Text)
	}
	return p, nil
}

// Destroy unsays the text.
func (*EchoExecutor) Destroy(ctx context.Context, req *step.Request) (step.Outcome, error) {
	e := spec.BlockOf[Echo](req.Step)
	say(ctx, req, e.Text)
	if e.Fail {
		return step.Outcome{}, fmt.Errorf("echo destroy failed: %s", e.Text)
	}
	return step.Outcome{Message: "unsaid " + e.Text, Changed: true}, nil
}

// echoRegistry is the built-in kinds plus configMap: and echo:.
func echoRegistry() (*step.Registry, error) {
	return step.NewRegistry(append(builtin.Executors(), &Executor{}, &EchoExecutor{})...)
}
