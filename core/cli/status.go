package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/state"
	"khook.io/core/timeline"
)

// StatusFlags are status's flags.
type StatusFlags struct {
	Spec   SpecFlags
	Fleet  FleetFlags
	Output *outputFlag
	Select SelectFlags
	// Timeline is --timeline: the last run drawn into a file.
	Timeline string
}

// NewStatusFlags returns status's flags with their defaults.
func NewStatusFlags() *StatusFlags {
	return &StatusFlags{Spec: NewSpecFlags(), Fleet: NewFleetFlags(), Output: newOutputFlag("text", "text", "json")}
}

// AddFlags registers the flags; contextFlag is the connection's flag for
// one context.
func (f *StatusFlags) AddFlags(cmd *cobra.Command, contextFlag string) {
	f.Spec.AddFlags(cmd)
	f.Fleet.AddFlags(cmd, contextFlag)
	f.Output.add(cmd, "output", "o", "output format")
	f.Select.AddFlags(cmd, "status")
	cmd.Flags().StringVar(&f.Timeline, "timeline", "", "draw the last run the record keeps into FILE as a timeline picture (SVG; HTML when FILE ends in .html): a bar per step and attempt on a time axis, colour by outcome, waits shaded, the critical path marked")
}

// StatusOptions is a ready-to-run status.
type StatusOptions struct {
	Spec     *SpecOptions
	Fleet    FleetFlags
	Output   string
	Streams  genericiooptions.IOStreams
	Redactor *redact.Redactor
	// Clusters reaches the cluster (each of a fleet's).
	Clusters *Clusters
	// Clients are the clients the record is read with; nil: the
	// connection's cluster's, checked first.
	Clients func(context.Context) (*kube.Clients, error)
	Select  SelectFlags
	// Timeline is --timeline ("": none).
	Timeline string
}

// NewCmdStatus is the status command.
func NewCmdStatus(name string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters) *cobra.Command {
	f := NewStatusFlags()
	cmd := &cobra.Command{
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
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.ToOptions(streams, src, clusters)
			if err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f.AddFlags(cmd, clusters.contextFlag())
	return cmd
}

// ToOptions resolves the flags.
func (f *StatusFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters) (*StatusOptions, error) {
	tf := TraceFlags{Timeline: f.Timeline}
	if err := errors.Join(f.Fleet.check(), f.Select.check(), tf.check(f.Fleet.enabled())); err != nil {
		return nil, err
	}
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return nil, err
	}
	return &StatusOptions{Spec: so, Fleet: f.Fleet, Output: f.Output.value, Streams: streams, Redactor: src.Redactor, Clusters: clusters, Select: f.Select, Timeline: f.Timeline}, nil
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
			sp := doc.Spec
			return fmt.Errorf("--timeline: %s is not applied yet: no state record at %s, no run to draw", sp.Metadata.Name, state.Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()})
		}
		if err := writeTimeline(o.Timeline, timeline.FromRecord(st.Record, timelineDefs(doc, st.Record.Command)), o.Redactor); err != nil {
			return err
		}
	}
	return o.print(st, doc, o.Streams.Out)
}

// status reads doc's record on t's cluster and compares it with the spec
// (engine.Cluster.Status), the selection's steps only.
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
	return c.Status(ctx)
}

// print shows a status (nil: no record yet) in the output format.
func (o *StatusOptions) print(st *state.Status, doc *load.Document, w io.Writer) error {
	if o.Output == "json" {
		return render.JSON(w, render.NewStatusReport(st))
	}
	if st == nil {
		sp := doc.Spec
		_, err := fmt.Fprintf(w, "%s is not applied yet: no state record at %s.\n", sp.Metadata.Name, state.Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()})
		return err
	}
	return render.StatusText(w, st)
}
