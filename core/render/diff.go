package render

import (
	"context"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/diff"
	"khook.io/core/engine"
	"khook.io/core/internal/english"
	"khook.io/core/step"
)

// DiffOptions say how diff's result is printed.
type DiffOptions struct {
	// External is KUBECTL_EXTERNAL_DIFF's program; zero for the built-in
	// unified diff.
	External diff.Program
	// Color paints the built-in diff.
	Color bool
	// Environ is the external program's environment.
	Environ []string
}

// DiffOutcome is what a printed diff found.
type DiffOutcome struct {
	// Differences: apply would change something (with an external
	// program, its exit status decides for the objects' content).
	Differences bool
	// Failed names the steps that could not be diffed.
	Failed []string
}

// Diff prints every step's result in steps' order (DAG order; results by
// the same position) and the summary line to out, or with an external
// diff program, writes the objects as two trees, runs it (its output to
// out), and writes the steps' lines and the summary to errOut.
func Diff(ctx context.Context, out, errOut io.Writer, spec string, steps []StepInfo, results []*engine.StepDiff, o DiffOptions) (DiffOutcome, error) {
	external := o.External.Path != ""
	w, color := out, o.Color
	var trees *diff.Trees
	if external {
		w, color = errOut, false
		var err error
		if trees, err = diff.NewTrees(); err != nil {
			return DiffOutcome{}, err
		}
		defer func() { _ = trees.Remove() }()
	}
	counts := map[string]int{}
	var res DiffOutcome
	objectChanges, endsBlank := false, false
	for k, r := range results {
		st := steps[k]
		counts[r.Counted]++
		res.Differences = res.Differences || r.Changes
		objectChanges = objectChanges || r.ObjectChanges
		if r.Err != nil {
			res.Failed = append(res.Failed, st.Name)
		}
		fmt.Fprintln(w, diff.Paint(fmt.Sprintf("=== %s (%s): %s", st.Name, st.Type, r.Headline), color))
		for _, d := range r.Details {
			fmt.Fprintln(w, "    "+d)
		}
		for _, obj := range r.Objects {
			if obj.Object.Note != "" && obj.Pair.Changed() {
				fmt.Fprintln(w, "    "+obj.Object.Name+": "+obj.Object.Note)
			}
			if external {
				if err := trees.Add(diff.FileName(st.Name, fileObject(obj.Object)), obj.Pair); err != nil {
					return res, err
				}
				continue
			}
			if !obj.Pair.Changed() {
				continue
			}
			if err := diff.Unified(w, "live   "+obj.Object.Name, "merged "+obj.Object.Name, obj.Pair.Live, obj.Pair.Merged, color); err != nil {
				return res, err
			}
		}
		// a blank line closes a step's diff
		endsBlank = r.ObjectChanges && !external
		if endsBlank {
			fmt.Fprintln(w)
		}
	}
	if external {
		differences, err := o.External.Run(ctx, trees, out, errOut, o.Environ)
		if err != nil {
			return res, err
		}
		// like kubectl diff, the program decides whether objects differ
		objectChanges = differences
	}
	res.Differences = res.Differences || objectChanges
	if !endsBlank {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, diffSummaryLine(spec, len(steps), counts, res.Differences))
	return res, nil
}

// fileObject is the version of an object that names its files.
func fileObject(od step.ObjectDiff) *unstructured.Unstructured {
	if od.Merged != nil {
		return od.Merged
	}
	return od.Live
}

// diffSummaryLine is diff's closing line: "Differences in x (5 steps): 2
// would change, 3 unchanged." ("No differences in", or "Incomplete diff
// of" when a step failed).
func diffSummaryLine(name string, steps int, counts map[string]int, differences bool) string {
	var parts []string
	for _, c := range engine.Categories {
		if n := counts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c))
		}
	}
	head := "No differences in "
	switch {
	case counts[engine.CatFailed] > 0:
		head = "Incomplete diff of "
	case differences:
		head = "Differences in "
	}
	return fmt.Sprintf("%s%s (%s): %s.", head, name, english.CountNoun(steps, "step"), strings.Join(parts, ", "))
}
