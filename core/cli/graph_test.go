package cli

import (
	"bytes"
	"context"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/redact"
)

// TestGraphOptions: graph's options built alone print the golden DAG in
// both formats.
func TestGraphOptions(t *testing.T) {
	for format, file := range map[string]string{"mermaid": "graph.mmd", "dot": "graph.dot"} {
		t.Run(format, func(t *testing.T) {
			var out bytes.Buffer
			f := NewGraphFlags()
			f.Spec.File = "testdata/golden-spec.yaml"
			if err := f.Format.Set(format); err != nil {
				t.Fatal(err)
			}
			o, err := f.ToOptions(genericiooptions.IOStreams{Out: &out}, SpecSource{Loader: builtinLoader(), Redactor: redact.New()})
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			golden(t, file, out.String())
		})
	}
}
