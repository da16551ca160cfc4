package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
	"khook.io/core/render"
)

// GraphFlags are graph's flags.
type GraphFlags struct {
	Spec   SpecFlags
	Format *outputFlag
	Select SelectFlags
}

// NewGraphFlags returns graph's flags with their defaults.
func NewGraphFlags() *GraphFlags {
	return &GraphFlags{Spec: NewSpecFlags(), Format: newOutputFlag("mermaid", "mermaid", "dot")}
}

// AddFlags registers the flags.
func (f *GraphFlags) AddFlags(cmd *cobra.Command) {
	f.Spec.AddFlags(cmd)
	f.Format.add(cmd, "format", "", "graph format")
	f.Select.AddFlags(cmd, "graph")
}

// GraphOptions is a ready-to-run graph.
type GraphOptions struct {
	Spec   *SpecOptions
	Format string
	Out    io.Writer
	Select SelectFlags
}

// ToOptions resolves the flags.
func (f *GraphFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource) (*GraphOptions, error) {
	if err := f.Select.check(); err != nil {
		return nil, err
	}
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return nil, err
	}
	return &GraphOptions{Spec: so, Format: f.Format.value, Out: streams.Out, Select: f.Select}, nil
}

// NewCmdGraph is the graph command.
func NewCmdGraph(name string, streams genericiooptions.IOStreams, src SpecSource) *cobra.Command {
	f := NewGraphFlags()
	cmd := runs(&cobra.Command{
		Use:   "graph -f SPEC",
		Short: "Print the step DAG as Mermaid or Graphviz DOT",
		Example: examples(name, `graph -f bootstrap.yaml > dag.mmd
graph -f bootstrap.yaml --format dot | dot -Tsvg > dag.svg`),
	}, func() (*GraphOptions, error) { return f.ToOptions(streams, src) })
	f.AddFlags(cmd)
	return cmd
}

// Run prints the spec's DAG.
func (o *GraphOptions) Run(context.Context) error {
	doc, err := o.Spec.Load()
	if err != nil {
		return err
	}
	sel, err := o.Select.resolve(doc, engine.CommandGraph, nil)
	if err != nil {
		return err
	}
	res, err := engine.OfflinePlan(doc, sel, nil)
	if err != nil {
		return err
	}
	if o.Format == "dot" {
		return render.DOT(o.Out, res)
	}
	return render.Mermaid(o.Out, res)
}
