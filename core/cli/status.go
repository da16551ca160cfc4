package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/spec"
	"khook.io/core/state"
)

// StatusFlags are status's flags.
type StatusFlags struct {
	Spec   SpecFlags
	Fleet  FleetFlags
	Output *outputFlag
	Select SelectFlags
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
	// Client is the client the record is read with; nil: the
	// connection's cluster, checked first.
	Client func(context.Context) (kubernetes.Interface, error)
	Select SelectFlags
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
	if err := errors.Join(f.Fleet.check(), f.Select.check()); err != nil {
		return nil, err
	}
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return nil, err
	}
	return &StatusOptions{Spec: so, Fleet: f.Fleet, Output: f.Output.value, Streams: streams, Redactor: src.Redactor, Clusters: clusters, Select: f.Select}, nil
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
	if err := needsState(doc); err != nil {
		return err
	}
	client, err := o.client(ctx)
	if err != nil {
		return err
	}
	printLockNote(ctx, o.Streams.ErrOut, client, doc)
	st, err := readStatus(ctx, o.Redactor, doc, client, o.Clusters)
	if err != nil {
		return err
	}
	if err := o.Select.filterStatus(st, doc); err != nil {
		return err
	}
	return o.print(st, doc, o.Streams.Out)
}

// client is the client of the cluster the record is in.
func (o *StatusOptions) client(ctx context.Context) (kubernetes.Interface, error) {
	if o.Client != nil {
		return o.Client(ctx)
	}
	clients, err := o.Clusters.clients(ctx)
	if err != nil {
		return nil, err
	}
	return clients.Typed, nil
}

// needsState refuses a spec without a state: block: status has nothing to
// read.
func needsState(doc *load.Document) error {
	if doc.Spec.State.IsEnabled() {
		return nil
	}
	pos := doc.Positions.At("state")
	return &load.InvalidError{Problems: spec.ErrorList{{Pos: pos, Path: "state", Msg: "status reads the run-state record, which this spec does not enable: add state: {} (or state.enabled: true)"}}}
}

// readStatus reads doc's record in the cluster and compares it with the
// spec, hashing each step's inputs as apply does (the executors of
// clusters declare them); nil when there is no record yet.
func readStatus(ctx context.Context, red *redact.Redactor, doc *load.Document, client kubernetes.Interface, clusters *Clusters) (*state.Status, error) {
	sp := doc.Spec
	loc := state.Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()}
	rec, found, err := state.Read(ctx, client, loc)
	if err != nil || !found {
		return nil, err
	}
	s := &session{red: red, doc: doc}
	if clusters != nil && clusters.Steps != nil {
		reg, err := clusters.Steps()
		if err != nil {
			return nil, err
		}
		s.registry = reg
	}
	ins, err := s.stepInputs(ctx, rec.SaltBytes(), rec)
	if err != nil {
		return nil, err
	}
	steps := make([]state.SpecStep, len(sp.Steps))
	for i, st := range sp.Steps {
		steps[i] = state.SpecStep{Name: st.Name, Type: st.Type(), Hash: ins[i].Hash, Excluded: !doc.Included(i), When: st.When, HashCannotSee: ins[i].HashCannotSee}
	}
	return state.Compare(loc, rec, steps), nil
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
