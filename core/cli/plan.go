package cli

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/render"
)

// PlanFlags are plan's flags.
type PlanFlags struct {
	ClusterFlags
	Output  *outputFlag
	Offline bool
	// DetailedExitCode is --detailed-exitcode: exit 4 on drift left.
	DetailedExitCode bool
}

// NewPlanFlags returns plan's flags with their defaults.
func NewPlanFlags() *PlanFlags {
	return &PlanFlags{ClusterFlags: newClusterFlags(), Output: newOutputFlag("text", "text", "json", "yaml")}
}

// AddFlags registers the flags; contextFlag is the connection's flag for
// one context.
func (f *PlanFlags) AddFlags(cmd *cobra.Command, contextFlag string) {
	f.ClusterFlags.AddFlags(cmd, contextFlag, "plan")
	f.Output.add(cmd, "output", "o", "output format")
	cmd.Flags().BoolVar(&f.Offline, "offline", false, "plan from the spec alone, without contacting a cluster")
	DetailedExitCodeFlag(cmd, &f.DetailedExitCode)
}

// PlanOptions is a ready-to-run plan.
type PlanOptions struct {
	ClusterOptions
	Output string
	// Offline plans from the spec alone (--offline, or no cluster
	// configured).
	Offline bool
	// DetailedExitCode: a plan that finds drift left as it is (drift mode
	// warn) exits ExitDrift.
	DetailedExitCode bool
}

// NewCmdPlan is the plan command.
func NewCmdPlan(name string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters) *cobra.Command {
	f := NewPlanFlags()
	cmd := runs(&cobra.Command{
		Use:   "plan -f SPEC",
		Short: "Show what apply would do, step by step",
		Long: `Show what apply would do: the steps in DAG order with their level, type,
needs, when: outcome and a one-line summary with variables resolved (secrets
masked).`,
		Example: examples(name, `plan -f bootstrap.yaml --offline
plan -f bootstrap.yaml -o json`),
	}, func() (*PlanOptions, error) { return f.ToOptions(streams, src, clusters) })
	f.AddFlags(cmd, clusters.contextFlag())
	return cmd
}

// ToOptions resolves the flags.
func (f *PlanFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters) (*PlanOptions, error) {
	co, err := f.toOptions(streams, src, clusters)
	if err != nil {
		return nil, err
	}
	offline := f.Offline || clusters == nil || clusters.Connection == nil
	return &PlanOptions{ClusterOptions: co, Output: f.Output.value, Offline: offline, DetailedExitCode: f.DetailedExitCode}, nil
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
	p, err := o.plan(ctx, doc, target(o.Clusters.getter(), o.Streams.ErrOut, o.Streams.ErrOut), o.Streams.ErrOut)
	if err != nil {
		return err
	}
	if err := o.print(o.Streams.Out, p); err != nil {
		return err
	}
	return driftExit(o.DetailedExitCode, p.Drifted())
}

// print writes v, a plan (or a fleet's, structured), in the output
// format.
func (o *PlanOptions) print(w io.Writer, v any) error {
	switch o.Output {
	case "json":
		return render.JSON(w, v)
	case "yaml":
		return render.YAML(w, v)
	}
	return render.PlanText(w, v.(*plan.Plan))
}

// plan is doc's plan on t's cluster: live unless offline, or no
// kubeconfig is found; selection warnings go to errOut.
func (o *PlanOptions) plan(ctx context.Context, doc *load.Document, t engine.Target, errOut io.Writer) (*plan.Plan, error) {
	sel, err := o.Select.resolve(doc, engine.CommandPlan, errOut)
	if err != nil {
		return nil, err
	}
	if !o.Offline {
		c, err := o.Clusters.engine().Connect(ctx, doc, t, engine.Options{Selection: sel, Spelling: flagOf})
		switch {
		case err == nil:
			res, err := engine.NewPlan(c).Run(ctx)
			if err != nil {
				return nil, err
			}
			return res.Plan, nil
		case !errors.Is(err, kube.ErrNoKubeconfig):
			return nil, err
		}
	}
	res, err := engine.OfflinePlan(doc, sel, o.Clusters.engine().Registry())
	if err != nil {
		return nil, err
	}
	return res.Plan, nil
}
