package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
)

// ForceUnlockFlags are force-unlock's flags.
type ForceUnlockFlags struct {
	Spec SpecFlags
	Yes  bool
}

// ForceUnlockOptions is a ready-to-run force-unlock.
type ForceUnlockOptions struct {
	Spec *SpecOptions
	// ID is the run id of the holder to unlock (the error of a held lock
	// names it).
	ID       string
	Yes      bool
	Streams  genericiooptions.IOStreams
	Clusters *Clusters
	// Terminal reports whether the question can be asked (standard input
	// is a terminal).
	Terminal bool
}

// NewCmdForceUnlock is the force-unlock command: Terraform's force-unlock
// for khook's run lock.
func NewCmdForceUnlock(name string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters) *cobra.Command {
	f := &ForceUnlockFlags{Spec: NewSpecFlags()}
	cmd := &cobra.Command{
		Use:   "force-unlock -f SPEC RUN_ID",
		Short: "Break the run lock of a spec's state record, held by a run that is gone",
		Long: `Break the run lock of a spec's state record. apply and destroy of a spec with
a state: block hold a lock (a Lease next to the record) while they run; a run
that finds it held fails, naming the holder and its run id. A holder that was
killed stops renewing its lock, which then expires after 15 seconds and is
taken over by the next run on its own: force-unlock is for when that cannot
wait, or the holder's clock is wrong.

RUN_ID must be the holder's run id, as the error named it: a lock held by
another run is left alone. The holder is shown first; on a terminal the
command asks for "yes" (--yes does not ask); without a terminal it needs
--yes. Breaking the lock of a run that is still alive lets two runs write one
record: the live one stops at its next renewal, having lost its lock.`,
		Example: examples(name, `force-unlock -f bootstrap.yaml 3f2a9c0d1e4b5a69`),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			so, err := f.Spec.ToOptions(src)
			if err != nil {
				return err
			}
			o := &ForceUnlockOptions{Spec: so, ID: args[0], Yes: f.Yes, Streams: streams, Clusters: clusters, Terminal: isTerminal(streams.In)}
			return o.Run(cmd.Context())
		},
	}
	f.Spec.AddFlags(cmd)
	cmd.Flags().BoolVar(&f.Yes, "yes", false, "break the lock without asking")
	return cmd
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Run shows the holder, asks, and breaks the lock.
func (o *ForceUnlockOptions) Run(ctx context.Context) error {
	if strings.TrimSpace(o.ID) == "" {
		return invalid(errors.New("force-unlock needs the holder's run id (the error of the held lock names it)"))
	}
	doc, err := o.Spec.Load()
	if err != nil {
		return err
	}
	if !doc.Spec.State.IsEnabled() {
		return invalid(errors.New("force-unlock: this spec has no state: block, so its runs take no lock"))
	}
	h, err := o.Clusters.engine().ReadLock(ctx, doc, target(o.Clusters.getter(), o.Streams.ErrOut, o.Streams.ErrOut), o.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Streams.ErrOut, "The run lock of state record %s is held by %s, %s.\n", h.Record, h.Holder, h.Since)
	if h.Live {
		fmt.Fprintf(o.Streams.ErrOut, "It was renewed within the last %s (by this machine's clock): that run may still be alive. Breaking its lock makes it stop at once, writing nothing more.\n", engine.LeaseDuration)
	}
	if !o.Yes {
		if !o.Terminal {
			return invalid(errors.New("force-unlock asks before breaking a lock, and standard input is not a terminal: pass --yes"))
		}
		fmt.Fprint(o.Streams.ErrOut, "Only 'yes' breaks it: ")
		if answer(o.Streams) != "yes" {
			return &ExitError{Code: ExitFailed, Err: errors.New("force-unlock cancelled: nothing was unlocked")}
		}
	}
	if err := h.Break(ctx); err != nil {
		return err
	}
	fmt.Fprintf(o.Streams.Out, "Unlocked state record %s (the lock of run %s).\n", h.Record, o.ID)
	return nil
}
