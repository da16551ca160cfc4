package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
)

// TestRunOptions: apply's and destroy's options built alone check their
// flags before anything is read, and without a cluster print nothing.
func TestRunOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*RunFlags)
		err  string // of ToOptions; "" for Run's
	}{
		{"negative parallelism", func(f *RunFlags) { f.Parallelism = -1 }, "--parallelism must not be negative"},
		{"var dir without contexts", func(f *RunFlags) { f.Fleet.VarDir = "vars" }, "--var-dir needs --contexts"},
		{"no spec", func(f *RunFlags) { f.Spec.File = "" }, "no spec given"},
		{"unprintable field manager", func(f *RunFlags) { f.FieldManager = "ops\n" }, "--field-manager \"ops\\n\": only printable characters"},
		{"field manager too long", func(f *RunFlags) { f.FieldManager = strings.Repeat("m", 129) }, "at most 128 characters"},
		{"no cluster", func(*RunFlags) {}, ""},
	} {
		for _, command := range []string{"apply", "destroy"} {
			t.Run(command+" "+tc.name, func(t *testing.T) {
				streams, _, out, errOut := genericiooptions.NewTestIOStreams()
				f := NewRunFlags()
				f.Spec.File = "testdata/golden-spec.yaml"
				f.Destroy.Yes = true
				tc.edit(f)
				o, err := f.ToOptions(command, streams, SpecSource{Loader: builtinLoader(), Redactor: redact.New()}, &Clusters{}, ProgressOutput{ErrOut: errOut})
				if tc.err != "" {
					var exit *ExitError
					if !errors.As(err, &exit) || exit.Code != ExitInvalid || !strings.Contains(err.Error(), tc.err) {
						t.Fatalf("want exit 2 with %q, got %v", tc.err, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if o.Command != command || o.Parallelism != defaultParallelism || o.Output != "text" {
					t.Errorf("options %+v", o)
				}
				if err := o.Run(context.Background()); !errors.Is(err, kube.ErrNoKubeconfig) {
					t.Errorf("without a cluster: %v", err)
				}
				if out.Len()+errOut.Len() > 0 {
					t.Errorf("printed %q %q", out, errOut)
				}
			})
		}
	}
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
	f := NewSpecFlags()
	f.File = "testdata/golden-spec.yaml"
	so, err := f.ToOptions(SpecSource{Loader: builtinLoader(), Redactor: redact.New()})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := so.Load()
	if err != nil {
		t.Fatal(err)
	}
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
			s := &session{red: redact.New(), doc: doc, registry: reg}
			ex, err := s.prepare(context.Background(), command, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.start(context.Background(), ex, event.Discard); err != nil {
				t.Fatal(err)
			}
			res, stateErr := s.runSteps(context.Background(), ex, 1)
			if stateErr != nil {
				t.Fatal(stateErr)
			}
			if got := strings.Join(ran, ", "); got != want {
				t.Errorf("ran %s, want %s", got, want)
			}
			var out bytes.Buffer
			if err := s.finish(&out, command, "text", res, nil); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if command == "destroy" && !strings.Contains(out.String(), "nothing to undo: destroy leaves delete steps alone") {
				t.Errorf("the summary does not say why a delete step is left alone:\n%s", out.String())
			}
		})
	}
}

// TestStepWarnings: a step's warnings go to standard error redacted, as
// kubectl words the API server's ("Warning: ..."), naming the step, each
// once per step; NOTES only with a notes writer (-v 1).
func TestStepWarnings(t *testing.T) {
	red := redact.New()
	red.Add("s3cr3t-value")
	var out bytes.Buffer
	s := &session{red: red, warnings: &out}
	a, b := s.warn("cilium"), s.warn("cert-manager")
	a("this chart is deprecated")
	a("this chart is deprecated")
	b("this chart is deprecated")
	a("unknown field \"dta\" in s3cr3t-value")
	want := "Warning: cilium: this chart is deprecated\nWarning: cert-manager: this chart is deprecated\nWarning: cilium: unknown field \"dta\" in ***\n"
	if out.String() != want {
		t.Errorf("warnings:\n%s\nwant:\n%s", out.String(), want)
	}
	if s.releaseNotes() != nil {
		t.Error("NOTES written without -v")
	}
	out.Reset()
	s.notes = &out
	s.releaseNotes()("release app (ns)", "Visit s3cr3t-value\n")
	if out.String() != "NOTES of release app (ns):\nVisit ***\n" {
		t.Errorf("notes %q", out.String())
	}
}
