package cli

import (
	"bytes"
	"context"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/redact"
)

// TestPlanOptions: plan's options built alone plan the golden spec offline
// into a buffer, as the command does: with --offline, and without a
// cluster to reach (which plans offline too).
func TestPlanOptions(t *testing.T) {
	for _, tc := range []struct {
		name, output, golden string
		offline              bool
		clusters             *Clusters
	}{
		{"offline", "text", "plan.txt", true, nil},
		{"no cluster", "json", "plan.json", false, &Clusters{}},
		{"no connection at all", "yaml", "plan.yaml", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			f := NewPlanFlags()
			f.Spec.File, f.Offline = "testdata/golden-spec.yaml", tc.offline
			if err := f.Output.Set(tc.output); err != nil {
				t.Fatal(err)
			}
			red := redact.New()
			o, err := f.ToOptions(genericiooptions.IOStreams{Out: &out}, SpecSource{Loader: builtinLoader(), Redactor: red}, tc.clusters)
			if err != nil {
				t.Fatal(err)
			}
			if !o.Offline {
				t.Errorf("without a connection the plan is offline")
			}
			if err := o.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.golden, out.String())
		})
	}
}
