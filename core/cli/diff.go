package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/diff"
	"khook.io/core/event"
	"khook.io/core/internal/english"
	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/state"
	"khook.io/core/step"
)

// ExitDiffError is diff's exit code for an error (kubectl diff exits >1);
// 1 means differences were found, so errors cannot use it.
const ExitDiffError = 3

// diffParallelism is diff's default bound on steps diffed at once.
const diffParallelism = 8

// DiffFlags are diff's flags.
type DiffFlags struct {
	Spec        SpecFlags
	Fleet       FleetFlags
	Parallelism int
	Select      SelectFlags
	// FieldManager is --field-manager: the dry runs are apply's requests
	// with apply's field manager.
	FieldManager string
}

// NewDiffFlags returns diff's flags with their defaults.
func NewDiffFlags() *DiffFlags {
	return &DiffFlags{Spec: NewSpecFlags(), Fleet: NewFleetFlags(), Parallelism: diffParallelism}
}

// AddFlags registers the flags; contextFlag is the connection's flag for
// one context.
func (f *DiffFlags) AddFlags(cmd *cobra.Command, contextFlag string) {
	f.Spec.AddFlags(cmd)
	f.Fleet.AddFlags(cmd, contextFlag)
	cmd.Flags().IntVar(&f.Parallelism, "parallelism", diffParallelism, "how many steps may be diffed at once (0: no limit); with --contexts, on each cluster")
	f.Select.AddFlags(cmd, "diff")
	AddFieldManagerFlag(cmd, &f.FieldManager)
}

// DiffOptions is a ready-to-run diff.
type DiffOptions struct {
	Spec        *SpecOptions
	Fleet       FleetFlags
	Parallelism int
	Streams     genericiooptions.IOStreams
	Redactor    *redact.Redactor
	Clusters    *Clusters
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
	Select       SelectFlags
	// FieldManager is --field-manager ("": the defaults).
	FieldManager string
}

// NewCmdDiff is the diff command; stdout is standard output as the
// process has it (a terminal gets colors).
func NewCmdDiff(name string, streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, stdout io.Writer) *cobra.Command {
	f := NewDiffFlags()
	cmd := &cobra.Command{
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
program that failed, an interruption by Ctrl-C).

With --contexts, each cluster of a fleet is diffed (several at once), its
output under a "==> context NAME <==" line, in the order of the contexts;
the exit code is the worst of theirs.`,
		Example: examples(name, `diff -f bootstrap.yaml
KUBECTL_EXTERNAL_DIFF="meld" %s diff -f bootstrap.yaml`),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.ToOptions(streams, src, clusters, stdout)
			if err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f.AddFlags(cmd, clusters.contextFlag())
	return cmd
}

// ToOptions resolves the flags and the environment (src.Environ);
// stdout is standard output as the process has it.
func (f *DiffFlags) ToOptions(streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, stdout io.Writer) (*DiffOptions, error) {
	if f.Parallelism < 0 {
		return nil, invalid(fmt.Errorf("--parallelism must not be negative"))
	}
	if err := errors.Join(f.Fleet.check(), f.Select.check(), checkFieldManager(f.FieldManager)); err != nil {
		return nil, err
	}
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return nil, err
	}
	o := &DiffOptions{Spec: so, Fleet: f.Fleet, Parallelism: f.Parallelism, Select: f.Select, FieldManager: f.FieldManager, Streams: streams, Redactor: src.Redactor, Clusters: clusters,
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
	var exitErr *ExitError
	var inv *load.InvalidError
	switch {
	case err == nil, errors.As(err, &inv):
		return err
	case ctx.Err() != nil:
		return &ExitError{Code: ExitDiffError, Err: errors.New("interrupted")}
	case errors.As(err, &exitErr):
		return err
	}
	return &ExitError{Code: ExitDiffError, Err: err}
}

// stepDiff is what diff found for one step.
type stepDiff struct {
	// headline follows "=== name (type): ".
	headline string
	// details are lines under the headline (notes, planner details,
	// objects that cannot be diffed).
	details []string
	objects []objectDiff
	// changes: apply would change something in this step besides the
	// content of its objects; objectChanges: an object's content would
	// change (with an external diff program, its exit status decides).
	changes, objectChanges bool
	// counted is the summary's category.
	counted string
	err     error
	// raw is a Differ's result, before diffResult prepares it
	raw *step.Diff
}

type objectDiff struct {
	od   step.ObjectDiff
	pair diff.Pair
}

// The summary's categories of steps.
const (
	catChange      = "would change"
	catUnchanged   = "unchanged"
	catUnavailable = "diff unavailable"
	catResumed     = "resumed from the state record"
	catExcluded    = "excluded by when:"
	catFailed      = "failed"
)

// actionChanges are the live-plan actions that change the cluster.
var actionChanges = map[string]bool{
	"create": true, "configure": true, "delete": true, "restart": true, "run": true,
	"install": true, "upgrade": true, "patch": true, "repair": true,
}

func (o *DiffOptions) run(ctx context.Context) error {
	if o.Fleet.enabled() {
		return o.runFleet(ctx)
	}
	doc, err := o.Spec.Load()
	if err != nil {
		return err
	}
	sel, err := o.Select.resolve(doc, "diff")
	if err != nil {
		return err
	}
	sel.warn(o.Streams.ErrOut)
	s, err := o.Clusters.connect(ctx, doc)
	if err != nil {
		return err
	}
	s.sel = sel
	s.fieldManager = o.FieldManager
	_, err = o.diff(ctx, s, o.Streams.Out, o.Streams.ErrOut)
	return err
}

// diff diffs every step of s's cluster and prints the result to out (the
// diffs) and errOut (the step lines, with an external program); it
// reports whether anything differs.
func (o *DiffOptions) diff(ctx context.Context, s *session, out, errOut io.Writer) (bool, error) {
	s.sink = event.Discard
	printLockNote(ctx, errOut, s.clients.Typed, s.doc)
	resumed, err := s.resumedSteps(ctx)
	if err != nil {
		return false, err
	}
	if err := s.checkNeeds(func(i int) bool { return resumed[i] }); err != nil {
		return false, err
	}
	steps := s.doc.Spec.Steps
	results := make([]*stepDiff, len(steps))
	g, gctx := errgroup.WithContext(ctx)
	if o.Parallelism > 0 {
		g.SetLimit(o.Parallelism)
	}
	for _, i := range s.doc.Graph.Order() {
		st := &steps[i]
		switch {
		case !s.doc.Included(i):
			results[i] = &stepDiff{headline: "skipped: when: " + st.When + " is false", counted: catExcluded}
			continue
		case !s.sel.selected(i):
			results[i] = &stepDiff{headline: "skipped: " + NotSelected, counted: catNotSelected}
			continue
		case resumed[i] && !s.forcedStep(i) && !s.conditional(i, true):
			results[i] = &stepDiff{headline: "resumed from the state record (it succeeded before with these inputs), not diffed: apply skips it", counted: catResumed}
			continue
		}
		exec, err := s.executor(i)
		if err != nil {
			return false, err
		}
		g.Go(func() error {
			results[i] = s.diffStep(gctx, i, exec)
			return nil // a step's error is its result
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// what every step showed of the cluster is learned before any step's
	// objects are masked: a value khook wrote from a secret before it was
	// rotated shows in other steps too (a patch's object, a wait's value)
	for _, r := range results {
		if r.raw == nil {
			continue
		}
		for _, od := range r.raw.Objects {
			if od.Live != nil && od.Merged != nil {
				diff.Learn(s.red, od.Merged.Object, od.Live.Object)
			}
		}
	}
	for i, r := range results {
		if r.raw != nil {
			results[i] = diffResult(*r.raw, s.red)
		}
	}
	s.diffFates(results, resumed)
	return o.print(ctx, s, results, out, errOut)
}

// resumedSteps reads the state record, without writing it, and reports
// the steps apply would resume: those the record shows succeeded with the
// same inputs (and that no when: excludes).
func (s *session) resumedSteps(ctx context.Context) ([]bool, error) {
	sp := s.doc.Spec
	out := make([]bool, len(sp.Steps))
	if !sp.State.IsEnabled() {
		return out, nil
	}
	loc := state.Location{Namespace: sp.StateNamespace(), Name: sp.StateSecretName()}
	rec, found, err := state.Read(ctx, s.clients.Typed, loc)
	if err != nil || !found {
		return out, err
	}
	hashes, err := s.hashSteps(ctx, rec)
	if err != nil {
		return nil, err
	}
	for i, st := range sp.Steps {
		out[i] = s.doc.Included(i) && rec.Resumes(st.Name, hashes[i])
	}
	return out, nil
}

// diffStep diffs step i with its executor's Differ, or says what its
// Planner predicts; bounded by the step's timeout.
func (s *session) diffStep(ctx context.Context, i int, exec step.Executor) *stepDiff {
	timeout := s.settings(i).Timeout.Duration()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := s.request(i, 1, timeout, s.sink)
	red := s.red
	if d, ok := exec.(step.Differ); ok {
		res, err := d.Diff(ctx, req)
		var un *step.UnavailableError
		switch {
		case errors.As(err, &un):
			return &stepDiff{headline: red.String(un.Error()), changes: true, counted: catUnavailable}
		case err != nil:
			return &stepDiff{headline: "diff failed: " + red.String(err.Error()), counted: catFailed, err: err}
		}
		return &stepDiff{raw: &res}
	}
	if p, ok := exec.(step.Planner); ok {
		pred, err := p.Plan(ctx, req)
		if err != nil {
			return &stepDiff{headline: "diff failed: " + red.String(err.Error()), counted: catFailed, err: err}
		}
		return predictionResult(pred, &s.doc.Spec.Steps[i])
	}
	return &stepDiff{headline: "run (this step type cannot be diffed)", changes: true, counted: catChange}
}

// diffResult prepares a Differ's objects for display.
func diffResult(res step.Diff, red *redact.Redactor) *stepDiff {
	sd := &stepDiff{changes: res.Changes, details: res.Notes}
	if res.Skip != "" {
		sd.headline, sd.counted = "skipped: "+res.Skip, catUnchanged
		return sd
	}
	changed, unavailable := 0, 0
	for _, od := range res.Objects {
		if od.Unavailable != "" {
			unavailable++
			sd.details = append(sd.details, od.Name+": diff unavailable: "+od.Unavailable)
			continue
		}
		pair, err := diff.Prepare(od.Live, od.Merged, red)
		if err != nil {
			return &stepDiff{headline: "diff failed: " + od.Name + ": " + err.Error(), counted: catFailed, err: err}
		}
		sd.objects = append(sd.objects, objectDiff{od: od, pair: pair})
		if pair.Changed() {
			changed++
		}
	}
	n := len(res.Objects)
	switch {
	case changed > 0 && changed == n:
		sd.headline = english.CountNoun(n, "object") + " would change"
	case changed > 0:
		sd.headline = fmt.Sprintf("%d of %s would change", changed, english.CountNoun(n, "object"))
	case unavailable == 0 && res.Changes:
		sd.headline = fmt.Sprintf("no object changes (%s), still a change", english.CountNoun(n, "object"))
	case unavailable == 0:
		sd.headline = fmt.Sprintf("no changes (%s)", english.CountNoun(n, "object"))
	}
	if unavailable > 0 {
		if sd.headline != "" {
			sd.headline += ", "
		}
		sd.headline += fmt.Sprintf("%d diff unavailable", unavailable)
	}
	sd.objectChanges = changed > 0
	sd.changes = sd.changes || unavailable > 0
	switch {
	case changed > 0 || res.Changes:
		sd.counted = catChange
	case unavailable > 0:
		sd.counted = catUnavailable
	default:
		sd.counted = catUnchanged
	}
	return sd
}

// predictionResult is the one line of a step without a Differ.
func predictionResult(p step.Prediction, st *spec.Step) *stepDiff {
	sd := &stepDiff{headline: p.Action, details: p.Details}
	if p.Reason != "" {
		sd.headline += ": " + p.Reason
	}
	switch {
	case p.Action == plan.ActionUnknown:
		sd.headline = "diff unavailable: " + p.Reason
		// waiting changes nothing, whatever it waits for
		sd.changes = !st.OnlyWaits()
		sd.counted = catUnavailable
	case actionChanges[p.Action]:
		sd.changes, sd.counted = true, catChange
	default: // no-op, skip, wait
		sd.counted = catUnchanged
	}
	return sd
}

// print writes every step's result in DAG order and the summary to out,
// or with an external diff program, writes the trees, runs it (its output
// to out), and writes the steps' lines and the summary to errOut. It
// reports whether anything differs; the error of steps that could not be
// diffed is an *ExitError.
func (o *DiffOptions) print(ctx context.Context, s *session, results []*stepDiff, out, errOut io.Writer) (bool, error) {
	external := o.External.Path != ""
	w, color := out, o.Color
	var trees *diff.Trees
	if external {
		w, color = errOut, false
		var err error
		if trees, err = diff.NewTrees(); err != nil {
			return false, err
		}
		defer func() { _ = trees.Remove() }()
	}
	steps := s.doc.Spec.Steps
	counts := map[string]int{}
	changes, objectChanges, endsBlank := false, false, false
	var failed []string
	for _, i := range s.doc.Graph.Order() {
		r, st := results[i], &steps[i]
		counts[r.counted]++
		changes = changes || r.changes
		objectChanges = objectChanges || r.objectChanges
		if r.err != nil {
			failed = append(failed, st.Name)
		}
		fmt.Fprintln(w, diff.Paint(fmt.Sprintf("=== %s (%s): %s", st.Name, st.Type(), r.headline), color))
		for _, d := range r.details {
			fmt.Fprintln(w, "    "+d)
		}
		for _, obj := range r.objects {
			if obj.od.Note != "" && obj.pair.Changed() {
				fmt.Fprintln(w, "    "+obj.od.Name+": "+obj.od.Note)
			}
			if external {
				if err := trees.Add(diff.FileName(st.Name, fileObject(obj.od)), obj.pair); err != nil {
					return false, err
				}
				continue
			}
			if !obj.pair.Changed() {
				continue
			}
			if err := diff.Unified(w, "live   "+obj.od.Name, "merged "+obj.od.Name, obj.pair.Live, obj.pair.Merged, color); err != nil {
				return false, err
			}
		}
		// a blank line closes a step's diff
		endsBlank = r.objectChanges && !external
		if endsBlank {
			fmt.Fprintln(w)
		}
	}
	if external {
		differences, err := o.External.Run(ctx, trees, out, errOut, o.programEnv())
		if err != nil {
			return false, err
		}
		// like kubectl diff, the program decides whether objects differ
		objectChanges = differences
	}
	changes = changes || objectChanges
	if !endsBlank {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, summaryLine(s.doc.Spec.Metadata.Name, len(steps), counts, changes))
	if len(failed) > 0 {
		return changes, &ExitError{Code: ExitDiffError, Err: fmt.Errorf("%s could not be diffed: %s", english.CountNoun(len(failed), "step"), strings.Join(failed, ", "))}
	}
	if changes {
		return true, &ExitError{Code: ExitFailed, Silent: true}
	}
	return false, nil
}

// fileObject is the version of an object that names its files.
func fileObject(od step.ObjectDiff) *unstructured.Unstructured {
	if od.Merged != nil {
		return od.Merged
	}
	return od.Live
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

// summaryLine is diff's closing line: "Differences in x (5 steps): 2
// would change, 3 unchanged." ("No differences in", or "Incomplete diff
// of" when a step failed).
func summaryLine(name string, steps int, counts map[string]int, differences bool) string {
	var parts []string
	for _, c := range []string{catChange, catUnchanged, catUnavailable, catResumed, catExcluded, catNotSelected, catNotTriggered, catFailed} {
		if n := counts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c))
		}
	}
	head := "No differences in "
	switch {
	case counts[catFailed] > 0:
		head = "Incomplete diff of "
	case differences:
		head = "Differences in "
	}
	return fmt.Sprintf("%s%s (%s): %s.", head, name, english.CountNoun(steps, "step"), strings.Join(parts, ", "))
}
