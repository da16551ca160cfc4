package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/render"
	"khook.io/core/state"
	"khook.io/core/timeline"
)

// StatusFlags are status's flags.
type StatusFlags struct {
	ClusterFlags
	Output *outputFlag
	// Timeline is --timeline: the last run drawn into a file.
	Timeline string
}

// NewStatusFlags returns status's flags with their defaults.
func NewStatusFlags() *StatusFlags {
	return &StatusFlags{ClusterFlags: newClusterFlags(), Output: newOutputFlag("text", "text", "json")}
}

// AddFlags registers the flags; contextFlag is the connection's flag for
// one context.
func (f *StatusFlags) AddFlags(cmd *cobra.Command, contextFlag string) {
	f.ClusterFlags.AddFlags(cmd, contextFlag, "status")
	f.Output.add(cmd, "output", "o", "output format")
	cmd.Flags().StringVar(&f.Timeline, "timeline", "", "draw the last run the record keeps into FILE as a timeline picture (SVG; HTML when FILE ends in .html): a bar per step and attempt on a time axis, colour by outcome, waits shaded, the critical path marked")
}

// StatusOptions is a ready-to-run status.
type StatusOptions struct {
	ClusterOptions
	Output string
	// Clients are the clients the record is read with; nil: the
	// connection's cluster's, checked first.
	Clients func(context.Context) (*kube.Clients, error)
	// Timeline is --timeline ("": none).
	Timeline string
}

// NewCmdStatus is the status command.
func NewCmdStatus(name string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters) *cobra.Command {
	f := NewStatusFlags()
	cmd := runs(&cobra.Command{
		Use:   "status -f SPEC",
		Short: "Show the last run recorded in the spec's state record",
		Long: `Show the last run recorded in the spec's state record: when it ran, each
step's outcome, and what the next apply will do with each step (resume it,
re-run it because it failed or its inputs changed, run it for the first
time). The spec must have a state: block. Without a record yet: "not applied
yet", exit 0. With --contexts, the record of each cluster of a fleet.`,
		Example: examples(name, `status -f bootstrap.yaml
status -f bootstrap.yaml -o json
status -f bootstrap.yaml --contexts 'prod-*'`),
	}, func() (*StatusOptions, error) { return f.ToOptions(streams, src, clusters) })
	f.AddFlags(cmd, clusters.contextFlag())
	return cmd
}

// ToOptions resolves the flags.
func (f *StatusFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters) (*StatusOptions, error) {
	tf := TraceFlags{Timeline: f.Timeline}
	co, err := f.toOptions(streams, src, clusters, tf.check(f.Fleet.enabled()))
	if err != nil {
		return nil, err
	}
	return &StatusOptions{ClusterOptions: co, Output: f.Output.value, Timeline: f.Timeline}, nil
}

// Run reads the record and shows it; with --contexts, every cluster's.
func (o *StatusOptions) Run(ctx context.Context) error {
	if o.Fleet.enabled() {
		return o.runFleet(ctx)
	}
	doc, err := o.Spec.Load()
	if err != nil {
		return err
	}
	if err := engine.NeedsState(doc); err != nil {
		return err
	}
	st, err := o.status(ctx, doc, target(o.Clusters.getter(), o.Streams.ErrOut, o.Streams.ErrOut))
	if err != nil {
		return err
	}
	if o.Timeline != "" {
		if st == nil {
			return fmt.Errorf("--timeline: %s, no run to draw", notApplied(doc))
		}
		if err := writeTimeline(o.Timeline, timeline.FromRecord(st.Record, engine.TimelineDefs(doc, engine.Command(st.Record.Command))), o.Redactor); err != nil {
			return err
		}
	}
	return o.print(st, doc, o.Streams.Out)
}

// status reads doc's record on t's cluster and compares it with the spec
// (engine.NewStatus), the selection's steps only.
func (o *StatusOptions) status(ctx context.Context, doc *load.Document, t engine.Target) (*state.Status, error) {
	sel, err := o.Select.resolve(doc, engine.CommandStatus, nil)
	if err != nil {
		return nil, err
	}
	e, opts := o.Clusters.engine(), engine.Options{Selection: sel, Spelling: flagOf}
	var c *engine.Cluster
	if o.Clients != nil {
		clients, err := o.Clients(ctx)
		if err != nil {
			return nil, err
		}
		c = e.Attach(doc, clients, t, opts)
	} else if c, err = e.Connect(ctx, doc, t, opts); err != nil {
		return nil, err
	}
	return engine.NewStatus(c).Run(ctx)
}

// print shows a status (nil: no record yet) in the output format.
func (o *StatusOptions) print(st *state.Status, doc *load.Document, w io.Writer) error {
	if o.Output == "json" {
		return render.JSON(w, render.NewStatusReport(st))
	}
	if st == nil {
		_, err := fmt.Fprintf(w, "%s.\n", notApplied(doc))
		return err
	}
	return render.StatusText(w, st)
}

// notApplied says doc has no state record yet, naming where it would be.
func notApplied(doc *load.Document) string {
	sp := doc.Spec
	return fmt.Sprintf("%s is not applied yet: no state record at %s", sp.Metadata.Name, state.LocationOf(sp))
}
