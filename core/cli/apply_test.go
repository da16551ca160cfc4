package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/kube"
	"khook.io/core/redact"
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
