package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/redact"
	"khook.io/core/render"
)

// ---- validate ----

// ValidateFlags are validate's flags.
type ValidateFlags struct {
	Spec   SpecFlags
	Output *outputFlag
}

// NewValidateFlags returns validate's flags with their defaults.
func NewValidateFlags() *ValidateFlags {
	return &ValidateFlags{Spec: NewSpecFlags(), Output: newOutputFlag("text", "text", "json")}
}

// AddFlags registers the flags.
func (f *ValidateFlags) AddFlags(cmd *cobra.Command) {
	f.Spec.AddFlags(cmd)
	f.Output.add(cmd, "output", "o", "output format")
}

// ValidateOptions is a ready-to-run validate.
type ValidateOptions struct {
	Spec   *SpecOptions
	Output string
	Out    io.Writer
}

// NewCmdValidate is the validate command.
func NewCmdValidate(name string, streams genericiooptions.IOStreams, src SpecSource) *cobra.Command {
	f := NewValidateFlags()
	cmd := &cobra.Command{
		Use:   "validate -f SPEC",
		Short: "Check a spec without touching a cluster",
		Long: `Check a spec without touching a cluster: variables, YAML, every rule of the
DSL, when: conditions and the needs graph. Every problem is reported at once,
with file:line:col and field path. Exit code 0 when valid, 2 when not.`,
		Example: examples(name, `validate -f bootstrap.yaml
KHOOK_VAR_ENV=prod %s validate -f bootstrap.yaml --set REGION=eu-west-1`),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.ToOptions(streams, src)
			if err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f.AddFlags(cmd)
	return cmd
}

// ToOptions resolves the flags.
func (f *ValidateFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource) (*ValidateOptions, error) {
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return nil, err
	}
	return &ValidateOptions{Spec: so, Output: f.Output.value, Out: streams.Out}, nil
}

// validateResult is validate -o json.
type validateResult struct {
	Valid    bool           `json:"valid"`
	File     string         `json:"file"`
	Name     string         `json:"name,omitempty"`
	Steps    int            `json:"steps,omitempty"`
	Levels   int            `json:"levels,omitempty"`
	Problems []problemEntry `json:"problems"`
}

type problemEntry struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path,omitempty"`
	Step    string `json:"step,omitempty"` // the name of the step Path is in
	Message string `json:"message"`
}

// Run validates the spec.
func (o *ValidateOptions) Run(_ context.Context) error {
	doc, err := o.Spec.Load()
	if o.Output == "json" {
		res := validateResult{Valid: err == nil, File: o.Spec.Options.File, Problems: []problemEntry{}}
		var inv *load.InvalidError
		switch {
		case err == nil:
			res.Name, res.Steps, res.Levels = doc.Spec.Metadata.Name, len(doc.Spec.Steps), len(doc.Graph.Levels())
		case errors.As(err, &inv):
			for _, p := range inv.Problems {
				res.Problems = append(res.Problems, problemEntry{File: p.Pos.File, Line: p.Pos.Line, Column: p.Pos.Col, Path: p.Path, Step: p.Step, Message: p.Msg})
			}
		default:
			return err
		}
		if jerr := render.JSON(o.Out, res); jerr != nil {
			return jerr
		}
		if err != nil {
			return &ExitError{Code: ExitInvalid, Err: err, Silent: true}
		}
		return nil
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.Out, "%s is valid: %s, %s in %s.\n", displayFile(o.Spec.Options.File), doc.Spec.Metadata.Name,
		countOf(len(doc.Spec.Steps), "step"), countOf(len(doc.Graph.Levels()), "level"))
	return err
}

func displayFile(f string) string {
	if f == "-" {
		return "<stdin>"
	}
	return f
}

func countOf(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// ---- plan ----

// PlanFlags are plan's flags.
type PlanFlags struct {
	Spec    SpecFlags
	Fleet   FleetFlags
	Output  *outputFlag
	Offline bool
}

// NewPlanFlags returns plan's flags with their defaults.
func NewPlanFlags() *PlanFlags {
	return &PlanFlags{Spec: NewSpecFlags(), Fleet: NewFleetFlags(), Output: newOutputFlag("text", "text", "json", "yaml")}
}

// AddFlags registers the flags; contextFlag is the connection's flag for
// one context.
func (f *PlanFlags) AddFlags(cmd *cobra.Command, contextFlag string) {
	f.Spec.AddFlags(cmd)
	f.Fleet.AddFlags(cmd, contextFlag)
	f.Output.add(cmd, "output", "o", "output format")
	cmd.Flags().BoolVar(&f.Offline, "offline", false, "plan from the spec alone, without contacting a cluster")
}

// PlanOptions is a ready-to-run plan.
type PlanOptions struct {
	Spec   *SpecOptions
	Fleet  FleetFlags
	Output string
	// Offline plans from the spec alone (--offline, or no cluster
	// configured).
	Offline bool
	// Streams: the plan goes to Out; a fleet's API warnings to ErrOut.
	Streams  genericiooptions.IOStreams
	Redactor *redact.Redactor
	// Clusters reaches the cluster of a live plan.
	Clusters *Clusters
}

// NewCmdPlan is the plan command.
func NewCmdPlan(name string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters) *cobra.Command {
	f := NewPlanFlags()
	cmd := &cobra.Command{
		Use:   "plan -f SPEC",
		Short: "Show what apply would do, step by step",
		Long: `Show what apply would do: the steps in DAG order with their level, type,
needs, when: outcome and a one-line summary with variables resolved (secrets
masked).`,
		Example: examples(name, `plan -f bootstrap.yaml --offline
plan -f bootstrap.yaml -o json`),
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
func (f *PlanFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters) (*PlanOptions, error) {
	if err := f.Fleet.check(); err != nil {
		return nil, err
	}
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return nil, err
	}
	offline := f.Offline || clusters == nil || clusters.Connection == nil
	return &PlanOptions{Spec: so, Fleet: f.Fleet, Output: f.Output.value, Offline: offline, Streams: streams, Redactor: src.Redactor, Clusters: clusters}, nil
}

// Run plans the spec: offline from the spec alone (--offline, or no
// cluster configured at all), else live against the cluster. A cluster
// that is configured but cannot be used (a kubeconfig file that does not
// exist, an unknown context, rejected credentials, an unreachable server)
// is an error: a live plan was asked for, and an offline one in its place
// would pass a CI check it should fail.
func (o *PlanOptions) Run(ctx context.Context) error {
	if o.Fleet.enabled() {
		return o.runFleet(ctx)
	}
	doc, err := o.Spec.Load()
	if err != nil {
		return err
	}
	p, err := o.plan(ctx, doc)
	if err != nil {
		return err
	}
	markHashCannotSee(p, doc)
	switch o.Output {
	case "json":
		return render.JSON(o.Streams.Out, p)
	case "yaml":
		return render.YAML(o.Streams.Out, p)
	}
	return render.PlanText(o.Streams.Out, p)
}

// plan is doc's plan: live unless offline, or no kubeconfig is found.
func (o *PlanOptions) plan(ctx context.Context, doc *load.Document) (*plan.Plan, error) {
	if o.Offline {
		return doc.OfflinePlan(), nil
	}
	s, err := o.Clusters.connect(ctx, doc)
	switch {
	case errors.Is(err, kube.ErrNoKubeconfig):
		return doc.OfflinePlan(), nil
	case err != nil:
		return nil, err
	}
	p := s.livePlan(ctx)
	if ctx.Err() != nil {
		// predictions cut short are no plan to pass a check with
		return nil, fmt.Errorf("plan stopped (%v) before every step was assessed", context.Cause(ctx))
	}
	return p, nil
}

// ---- graph ----

// GraphFlags are graph's flags.
type GraphFlags struct {
	Spec   SpecFlags
	Format *outputFlag
}

// NewGraphFlags returns graph's flags with their defaults.
func NewGraphFlags() *GraphFlags {
	return &GraphFlags{Spec: NewSpecFlags(), Format: newOutputFlag("mermaid", "mermaid", "dot")}
}

// AddFlags registers the flags.
func (f *GraphFlags) AddFlags(cmd *cobra.Command) {
	f.Spec.AddFlags(cmd)
	f.Format.add(cmd, "format", "", "graph format")
}

// GraphOptions is a ready-to-run graph.
type GraphOptions struct {
	Spec   *SpecOptions
	Format string
	Out    io.Writer
}

// ToOptions resolves the flags.
func (f *GraphFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource) (*GraphOptions, error) {
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return nil, err
	}
	return &GraphOptions{Spec: so, Format: f.Format.value, Out: streams.Out}, nil
}

// NewCmdGraph is the graph command.
func NewCmdGraph(name string, streams genericiooptions.IOStreams, src SpecSource) *cobra.Command {
	f := NewGraphFlags()
	cmd := &cobra.Command{
		Use:   "graph -f SPEC",
		Short: "Print the step DAG as Mermaid or Graphviz DOT",
		Example: examples(name, `graph -f bootstrap.yaml > dag.mmd
graph -f bootstrap.yaml --format dot | dot -Tsvg > dag.svg`),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.ToOptions(streams, src)
			if err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f.AddFlags(cmd)
	return cmd
}

// Run prints the spec's DAG.
func (o *GraphOptions) Run(context.Context) error {
	doc, err := o.Spec.Load()
	if err != nil {
		return err
	}
	if o.Format == "dot" {
		return render.DOT(o.Out, doc.OfflinePlan())
	}
	return render.Mermaid(o.Out, doc.OfflinePlan())
}

// examples indents each example line and prefixes it with the plugin's
// name; a line holding %s gets the name there instead.
func examples(name, lines string) string {
	out := strings.Split(lines, "\n")
	for i, l := range out {
		if strings.Contains(l, "%s") {
			out[i] = "  " + fmt.Sprintf(l, name)
		} else {
			out[i] = "  " + name + " " + l
		}
	}
	return strings.Join(out, "\n")
}
