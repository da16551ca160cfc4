package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/redact"
)

// TestDiffExitCodesOffline: diff's exit codes without a cluster follow
// kubectl diff's convention: 2 for an invalid spec or flags, 3 (never 1,
// which means differences) for every other error.
func TestDiffExitCodesOffline(t *testing.T) {
	bad := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps: [{name: a}]\n"
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		inErr string
	}{
		{"no file flag", "", []string{"diff"}, 2, "no spec given"},
		{"invalid spec", bad, []string{"diff", "-f", "-"}, 2, "a step needs exactly one action key"},
		{"unknown flag", "", []string{"diff", "--nope"}, 2, "unknown flag: --nope"},
		{"negative parallelism", "", []string{"diff", "-f", "testdata/golden-spec.yaml", "--parallelism", "-1"}, 2, "--parallelism"},
		{"missing file", "", []string{"diff", "-f", "testdata/nope.yaml"}, ExitDiffError, "read spec"},
		{"no cluster", "", []string{"diff", "-f", "testdata/golden-spec.yaml"}, ExitDiffError, "kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			if !strings.Contains(errOut, tt.inErr) {
				t.Fatalf("stderr lacks %q:\n%s", tt.inErr, errOut)
			}
		})
	}
}

func TestDiffHelpStatesExitCodes(t *testing.T) {
	out, _, code := runCLI(t, nil, "", "diff", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Exit code 0: no differences; 1: differences; 2: invalid spec", "3:", "KUBECTL_EXTERNAL_DIFF"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff --help lacks %q:\n%s", want, out)
		}
	}
}

// diffOptions builds diff's options alone, without a cluster.
func diffOptions(t *testing.T, environ []string, stdin string) (*DiffOptions, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	f := NewDiffFlags()
	f.Spec.File = "testdata/golden-spec.yaml"
	if stdin != "" {
		f.Spec.File = "-"
	}
	o, err := f.ToOptions(streams, SpecSource{Loader: builtinLoader(), Stdin: strings.NewReader(stdin), Environ: environ, Redactor: redact.New()}, nil, out)
	if err != nil {
		t.Fatal(err)
	}
	return o, out, errOut
}

// TestDiffOptions: diff's options built alone: without a cluster it
// exits 3 (never 1, which means differences), an invalid spec 2; the
// external program is KUBECTL_EXTERNAL_DIFF's and gets the environment
// without the secret variables; a buffer is never painted.
func TestDiffOptions(t *testing.T) {
	env := []string{"PATH=/usr/bin", "KHOOK_SECRET_TOKEN=s3cret", "KUBECTL_EXTERNAL_DIFF=meld --newtab", "KHOOK_VAR_X=1"}
	o, _, _ := diffOptions(t, env, "")
	if o.Color {
		t.Error("a buffer is painted")
	}
	if o.External.Path != "meld" || len(o.External.Args) != 1 {
		t.Errorf("external program %+v", o.External)
	}
	if got := strings.Join(o.programEnv(), " "); strings.Contains(got, "s3cret") || !strings.Contains(got, "KHOOK_VAR_X=1") {
		t.Errorf("the program's environment: %s", got)
	}
	var exit *ExitError
	if err := o.Run(context.Background()); !errors.As(err, &exit) || exit.Code != ExitDiffError || !errors.Is(err, kube.ErrNoKubeconfig) {
		t.Errorf("without a cluster: want exit %d, got %v", ExitDiffError, err)
	}
	o, _, _ = diffOptions(t, nil, "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps: [{name: a}]\n")
	var inv *load.InvalidError
	if err := o.Run(context.Background()); !errors.As(err, &inv) {
		t.Errorf("an invalid spec: %v", err)
	}
}

// TestDiffPrint: what diff prints of its steps' results, in DAG order,
// and its closing line and exit code.
func TestDiffPrint(t *testing.T) {
	o, out, errOut := diffOptions(t, nil, "")
	doc, err := o.Spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	results := make([]*engine.StepDiff, len(doc.Spec.Steps))
	for i := range results {
		results[i] = &engine.StepDiff{Headline: "no changes (1 object)", Counted: engine.CatUnchanged}
	}
	results[0] = &engine.StepDiff{Headline: "run (this step type cannot be diffed)", Changes: true, Counted: engine.CatChange}
	differs, err := o.print(context.Background(), doc, results, out, errOut)
	var exit *ExitError
	if !differs || !errors.As(err, &exit) || exit.Code != ExitFailed || !exit.Silent {
		t.Errorf("differences: %v, %v", differs, err)
	}
	first := doc.Spec.Steps[0]
	for _, want := range []string{
		"=== " + first.Name + " (" + first.Type() + "): run (this step type cannot be diffed)\n",
		"\nDifferences in golden (5 steps): 1 would change, 4 unchanged.\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
