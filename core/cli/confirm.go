package cli

import (
	"bufio"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine/fleet"
	"khook.io/core/render"
)

// DestroyFlags are destroy's own flags.
type DestroyFlags struct {
	// Yes destroys without asking (Terraform's -auto-approve).
	Yes bool
	// DryRun prints the destroy plan and changes nothing.
	DryRun bool
	// ForceCRDs deletes a CRD the spec created even when its kind has
	// custom resources the spec did not create.
	ForceCRDs bool
}

// AddFlags registers the flags.
func (f *DestroyFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.Yes, "yes", false, "destroy without showing the plan and asking (required when standard input is not a terminal)")
	cmd.Flags().BoolVar(&f.DryRun, "dry-run", false, "print the destroy plan (per cluster: what is deleted, reverted or left, and why) and change nothing")
	cmd.Flags().BoolVar(&f.ForceCRDs, "force-crds", false, "delete a CRD the spec created even when its kind has custom resources the spec did not create (they are deleted with it)")
}

// asks reports whether the run is a destroy that shows its plan and asks
// before it changes anything (neither --yes nor --dry-run).
func (o *RunOptions) asks() bool {
	return o.Command == "destroy" && !o.Destroy.Yes && !o.Destroy.DryRun
}

// refuseWithoutTerminal ends a destroy that would ask without a terminal
// to ask on: the spec's own problems first, as any other command reports
// them, then --yes is required (exit 2), before any cluster is contacted.
func (o *RunOptions) refuseWithoutTerminal() error {
	var err error
	if o.Fleet.enabled() {
		_, err = loadFleet(o.Clusters, &o.Fleet, o.Spec)
	} else {
		_, err = o.Spec.Load()
	}
	if err != nil {
		return err
	}
	return invalid(errors.New("destroy shows its plan and asks before it changes anything, and standard input is not a terminal: pass --yes to destroy without asking (--dry-run shows the plan)"))
}

// destroyView is destroy's plan of spec on each cluster, as it is shown.
func (o *RunOptions) destroyView(spec string, plans ...fleet.Plan) render.DestroyPlanView {
	v := render.DestroyPlanView{Spec: spec, Clusters: make([]render.DestroyCluster, len(plans))}
	for i, p := range plans {
		v.Clusters[i] = render.DestroyCluster{Context: p.Context, Server: p.Server, Steps: p.Steps, Err: errorText(o.Redactor, p.Err)}
	}
	return v
}

// confirm shows destroy's plan v and asks before anything is changed,
// the run lock of every cluster held: the answer must be the spec's name
// or "yes". A plan with a refused CRD ends the command before the
// question (exit 1), as does any other answer.
func (o *RunOptions) confirm(v render.DestroyPlanView) error {
	if err := render.DestroyPlan(o.Streams.ErrOut, v); err != nil {
		return err
	}
	if refused := v.Refused(); len(refused) > 0 {
		return &ExitError{Code: ExitFailed, Err: errors.New("destroy refused, nothing was changed: " + strings.Join(refused, "; "))}
	}
	if err := render.DestroyQuestion(o.Streams.ErrOut, v); err != nil {
		return err
	}
	if a := answer(o.Streams); a == "" || (a != "yes" && a != v.Spec) {
		return &ExitError{Code: ExitFailed, Err: errors.New("destroy cancelled: nothing was changed (only the spec's name or 'yes' destroys)")}
	}
	return nil
}

// answer is the answer to the question just written to standard error
// (which ends mid-line, so a redacting writer holds it back until
// flushed): standard input's next line, trimmed.
func answer(streams genericiooptions.IOStreams) string {
	if fl, ok := streams.ErrOut.(interface{ Flush() error }); ok {
		_ = fl.Flush()
	}
	a, _ := bufio.NewReader(streams.In).ReadString('\n')
	return strings.TrimSpace(a)
}
