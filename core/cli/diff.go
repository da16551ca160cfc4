package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/diff"
	"khook.io/core/engine"
	"khook.io/core/internal/english"
	"khook.io/core/load"
	"khook.io/core/render"
)

// ExitDiffError is diff's exit code for an error (kubectl diff exits >1);
// 1 means differences were found, so errors cannot use it.
const ExitDiffError = 3

// diffParallelism is diff's default bound on steps diffed at once.
const diffParallelism = 8

// DiffFlags are diff's flags.
type DiffFlags struct {
	ClusterFlags
	Parallelism int
	// FieldManager is --field-manager: the dry runs are apply's requests
	// with apply's field manager.
	FieldManager string
	// DetailedExitCode is --detailed-exitcode: exit 4 on drift left.
	DetailedExitCode bool
}

// NewDiffFlags returns diff's flags with their defaults.
func NewDiffFlags() *DiffFlags {
	return &DiffFlags{ClusterFlags: newClusterFlags(), Parallelism: diffParallelism}
}

// AddFlags registers the flags; contextFlag is the connection's flag for
// one context.
func (f *DiffFlags) AddFlags(cmd *cobra.Command, contextFlag string) {
	f.ClusterFlags.AddFlags(cmd, contextFlag, "diff")
	cmd.Flags().IntVar(&f.Parallelism, "parallelism", diffParallelism, "how many steps may be diffed at once (0: no limit); with --contexts, on each cluster")
	AddFieldManagerFlag(cmd, &f.FieldManager)
	DetailedExitCodeFlag(cmd, &f.DetailedExitCode)
}

// DiffOptions is a ready-to-run diff.
type DiffOptions struct {
	ClusterOptions
	Parallelism int
	// External is KUBECTL_EXTERNAL_DIFF's program; zero for the built-in
	// unified diff.
	External diff.Program
	// Color paints the built-in diff (standard output is a terminal and
	// NO_COLOR is unset).
	Color bool
	// Environ is khook's environment, which the external program gets
	// without the secret variables (those of SecretPrefix).
	Environ      []string
	SecretPrefix string
	// FieldManager is --field-manager ("": the defaults).
	FieldManager string
	// DetailedExitCode: a diff without differences that finds drift left
	// as it is (drift mode warn) exits ExitDrift.
	DetailedExitCode bool
}

// NewCmdDiff is the diff command; stdout is standard output as the
// process has it (a terminal gets colors).
func NewCmdDiff(name string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, stdout io.Writer) *cobra.Command {
	f := NewDiffFlags()
	cmd := runs(&cobra.Command{
		Use:   "diff -f SPEC",
		Short: "Show what apply would change, changing nothing",
		Long: `Show what apply would change, step by step in DAG order, changing nothing.
apply: objects are sent exactly as apply sends them, as server-side dry runs,
and compared with the live objects; helm: releases are rendered with a
server-side dry-run upgrade (or install) and compared object by object with
the release's current manifest; patch: is a server-side dry run of the patch
against its target. Other steps say in one line what they would do; a step
the state record would resume is not diffed (apply skips it). Managed fields
are hidden, Secret values and every secret variable masked.

KUBECTL_EXTERNAL_DIFF names another diff program, as for kubectl diff: it is
run on two folders (LIVE, MERGED) of YAML files.

Exit code 0: no differences; 1: differences; 2: invalid spec or flags;
3: an error (a step that could not be diffed, an unreachable cluster, a diff
program that failed, an interruption by Ctrl-C); with --detailed-exitcode,
4: no differences, but drift that a step's drift policy leaves as it is
(drift: {mode: warn}).

With --contexts, each cluster of a fleet is diffed (several at once), its
output under a "==> context NAME <==" line, in the order of the contexts;
the exit code is the worst of theirs.`,
		Example: examples(name, `diff -f bootstrap.yaml
KUBECTL_EXTERNAL_DIFF="meld" %s diff -f bootstrap.yaml`),
	}, func() (*DiffOptions, error) { return f.ToOptions(streams, src, clusters, stdout) })
	f.AddFlags(cmd, clusters.contextFlag())
	return cmd
}

// ToOptions resolves the flags and the environment (src.Environ);
// stdout is standard output as the process has it.
func (f *DiffFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, stdout io.Writer) (*DiffOptions, error) {
	if f.Parallelism < 0 {
		return nil, invalid(fmt.Errorf("--parallelism must not be negative"))
	}
	co, err := f.toOptions(streams, src, clusters, checkFieldManager(f.FieldManager))
	if err != nil {
		return nil, err
	}
	o := &DiffOptions{ClusterOptions: co, Parallelism: f.Parallelism, FieldManager: f.FieldManager, DetailedExitCode: f.DetailedExitCode,
		External: diff.ParseProgram(envLookup(src.Environ, diff.ExternalEnv)), Environ: src.Environ, SecretPrefix: f.Spec.SecretPrefix}
	if out, ok := stdout.(*os.File); ok && term.IsTerminal(int(out.Fd())) {
		o.Color = envLookup(src.Environ, "NO_COLOR") == ""
	}
	return o, nil
}

// Run diffs every step and prints the result. Every error but an invalid
// spec or flags exits ExitDiffError.
func (o *DiffOptions) Run(ctx context.Context) error {
	err := o.run(ctx)
	switch {
	case err == nil:
		return nil
	case exitCode(err, ExitDiffError) == ExitInvalid:
		return err
	case ctx.Err() != nil:
		return &ExitError{Code: ExitDiffError, Err: errors.New("interrupted")}
	}
	var exitErr *ExitError
	if errors.As(err, &exitErr) {
		return err
	}
	return &ExitError{Code: ExitDiffError, Err: err}
}

func (o *DiffOptions) run(ctx context.Context) error {
	if o.Fleet.enabled() {
		return o.runFleet(ctx)
	}
	doc, err := o.Spec.Load()
	if err != nil {
		return err
	}
	_, err = o.diff(ctx, doc, target(o.Clusters.getter(), o.Streams.ErrOut, o.Streams.ErrOut), o.Streams.Out, o.Streams.ErrOut)
	return err
}

// diff diffs every step of doc on t's cluster and prints the result to
// out (the diffs) and errOut (selection warnings, notes, and the step
// lines with an external program); it reports whether anything differs.
// The error of steps that could not be diffed, or of differences, is an
// *ExitError.
func (o *DiffOptions) diff(ctx context.Context, doc *load.Document, t engine.Target, out, errOut io.Writer) (bool, error) {
	sel, err := o.Select.resolve(doc, engine.CommandDiff, errOut)
	if err != nil {
		return false, err
	}
	c, err := o.Clusters.engine().Connect(ctx, doc, t, engine.Options{Selection: sel, FieldManager: o.FieldManager, Spelling: flagOf})
	if err != nil {
		return false, err
	}
	d := engine.NewDiff(c)
	d.Parallelism = o.Parallelism
	results, err := d.Run(ctx)
	if err != nil {
		return false, err
	}
	return o.print(ctx, doc, results, out, errOut)
}

// print writes the results of doc's steps (by step index) in DAG order.
func (o *DiffOptions) print(ctx context.Context, doc *load.Document, results []*engine.StepDiff, out, errOut io.Writer) (bool, error) {
	order := doc.Graph.Order()
	inOrder := make([]*engine.StepDiff, len(order))
	for k, i := range order {
		inOrder[k] = results[i]
	}
	res, err := render.Diff(ctx, out, errOut, doc.Spec.Metadata.Name, render.StepInfos(doc, order), inOrder, render.DiffOptions{External: o.External, Color: o.Color, Environ: o.programEnv()})
	if err != nil {
		return false, err
	}
	if len(res.Failed) > 0 {
		return res.Differences, &ExitError{Code: ExitDiffError, Err: fmt.Errorf("%s could not be diffed: %s", english.CountNoun(len(res.Failed), "step"), strings.Join(res.Failed, ", "))}
	}
	if res.Differences {
		return true, &ExitError{Code: ExitFailed, Silent: true}
	}
	return false, driftExit(o.DetailedExitCode, slices.ContainsFunc(inOrder, func(d *engine.StepDiff) bool { return len(d.Drift) > 0 }))
}

// programEnv is the external program's environment: khook's, without the
// secret variables (a diff program has no use for them).
func (o *DiffOptions) programEnv() []string {
	env := make([]string, 0, len(o.Environ))
	for _, kv := range o.Environ {
		if !strings.HasPrefix(kv, o.SecretPrefix) {
			env = append(env, kv)
		}
	}
	return env
}
