package cli

import (
	"bufio"
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"

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

// confirmDestroy shows destroy's plan and asks before anything is
// changed: on a terminal, the answer must be the spec's name or "yes";
// without a terminal, --yes is required (exit 2); --yes skips the plan
// and the question; --dry-run prints the plan to standard output and ends
// the command (done). A plan with a refused CRD ends the command before
// the question (exit 1). Nothing is locked or changed here.
func (o *RunOptions) confirmDestroy(ctx context.Context) (done bool, err error) {
	f := o.Destroy
	if f.Yes && !f.DryRun {
		return false, nil
	}
	if !f.DryRun && !isTerminal(o.Streams.In) {
		// the spec's own problems first, as any other command reports them
		if o.Fleet.enabled() {
			_, err = loadFleet(o.Clusters, &o.Fleet, o.Spec)
		} else {
			_, err = o.Spec.Load()
		}
		if err != nil {
			return true, err
		}
		return true, invalid(errors.New("destroy shows its plan and asks before it changes anything, and standard input is not a terminal: pass --yes to destroy without asking (--dry-run shows the plan)"))
	}
	v, err := o.destroyPlan(ctx)
	if err != nil {
		return true, err
	}
	if f.DryRun {
		return true, render.DestroyPlan(o.Streams.Out, v)
	}
	if err := render.DestroyPlan(o.Streams.ErrOut, v); err != nil {
		return true, err
	}
	if refused := v.Refused(); len(refused) > 0 {
		return true, &ExitError{Code: ExitFailed, Err: errors.New("destroy refused, nothing was changed: " + strings.Join(refused, "; "))}
	}
	if err := render.DestroyQuestion(o.Streams.ErrOut, v); err != nil {
		return true, err
	}
	if fl, ok := o.Streams.ErrOut.(interface{ Flush() error }); ok {
		_ = fl.Flush() // the question ends mid-line: a redacting writer holds it back
	}
	answer, _ := bufio.NewReader(o.Streams.In).ReadString('\n')
	if a := strings.TrimSpace(answer); a == "" || (a != "yes" && a != v.Spec) {
		return true, &ExitError{Code: ExitFailed, Err: errors.New("destroy cancelled: nothing was changed (only the spec's name or 'yes' destroys)")}
	}
	return false, nil
}
