package engine

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"khook.io/core/load"
	"khook.io/core/spec"
)

// Day-2 control: which steps a run touches (--steps, --no-needs), which
// it re-runs whatever the record says (--replace), and which run only
// when a need changed something (triggeredBy). One resolution serves
// apply, destroy, plan, diff, status and graph, and Dispose reads it.

// Command is what a run, plan or read does: the selection follows needs
// forward for every command but destroy, which follows the steps that
// need the selected ones.
type Command string

// The commands.
const (
	CommandApply   Command = "apply"
	CommandDestroy Command = "destroy"
	CommandPlan    Command = "plan"
	CommandDiff    Command = "diff"
	CommandStatus  Command = "status"
	CommandGraph   Command = "graph"
)

// SelectOptions are the selection settings as given: the steps
// (SettingSteps), without their needs (SettingNoNeeds), and the steps
// re-run whatever the record says (SettingReplace).
type SelectOptions struct {
	Steps   []string
	NoNeeds bool
	Replace []string
	// Spelling is how the caller spells the settings the selection's
	// messages name (nil: neutrally).
	Spelling Spelling
}

// Selection is SelectOptions resolved against one spec. A nil *Selection
// selects every step and forces none.
type Selection struct {
	// in: step i takes part in the run (by index); all true when --steps
	// is absent.
	in []bool
	// picked: step i was named by --steps (nil without it).
	picked []bool
	// forced: step i is re-run whatever the record says (--replace).
	forced  []bool
	partial bool
	noNeeds bool
	spell   Spelling
	// Warnings say what the flags name that the run will not do: a step
	// --steps or --replace names that when: excludes (decision 192).
	Warnings []string
}

// Resolve matches o against doc's steps for command: apply, plan, diff,
// status and graph take the steps named and what they need (--no-needs:
// the steps named only); destroy the steps named and what needs them.
// Every entry that matches no step is reported at once, listing the steps
// (a *UsageError).
func Resolve(doc *load.Document, command Command, o SelectOptions) (*Selection, error) {
	steps := doc.Spec.Steps
	n := len(steps)
	sel := &Selection{in: make([]bool, n), forced: make([]bool, n), noNeeds: o.NoNeeds, spell: o.Spelling}
	var errs []error
	if len(o.Replace) > 0 {
		m, err := matchSteps(steps, o.Replace, o.Spelling.Of(SettingReplace))
		errs = append(errs, err)
		sel.forced = m
	}
	if len(o.Steps) == 0 {
		for i := range sel.in {
			sel.in[i] = true
		}
		if err := errors.Join(errs...); err != nil {
			return nil, usage(err)
		}
		sel.Warnings = excludedWarnings(doc, nil, sel.forced, o.Spelling)
		return sel, nil
	}
	picked, err := matchSteps(steps, o.Steps, o.Spelling.Of(SettingSteps))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, usage(err)
	}
	sel.picked = picked
	copy(sel.in, picked)
	if !o.NoNeeds {
		next := doc.Graph.Needs
		if command == CommandDestroy {
			next = doc.Graph.Needers
		}
		var stack []int
		for i, p := range picked {
			if p {
				stack = append(stack, i)
			}
		}
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, j := range next(i) {
				if !sel.in[j] {
					sel.in[j] = true
					stack = append(stack, j)
				}
			}
		}
	}
	sel.partial = slices.Contains(sel.in, false)
	if err := unselectedReplace(doc, sel, o.Steps); err != nil {
		return nil, usage(err)
	}
	sel.Warnings = excludedWarnings(doc, sel.picked, sel.forced, o.Spelling)
	return sel, nil
}

// Selected reports whether step i takes part in the run.
func (sel *Selection) Selected(i int) bool { return sel == nil || sel.in[i] }

// replaces reports whether --replace names step i: Dispose alone reads it
// (FateForced), and every other place reads the step's fate.
func (sel *Selection) replaces(i int) bool { return sel != nil && sel.forced[i] }

// Partial reports whether --steps left steps out: the run never claims
// the whole spec (its hash), and a destroy keeps the record.
func (sel *Selection) Partial() bool { return sel != nil && sel.partial }

// spelling is how the selection's caller spells its settings.
func (sel *Selection) spelling() Spelling {
	if sel == nil {
		return nil
	}
	return sel.spell
}

// unselectedReplace refuses --replace naming a step --steps leaves out:
// it would not run, so it could not be re-run (decision 192). Every such
// step is named at once.
func unselectedReplace(doc *load.Document, sel *Selection, steps []string) error {
	var out []string
	for i, forced := range sel.forced {
		if forced && !sel.in[i] {
			out = append(out, doc.Spec.Steps[i].Name)
		}
	}
	if len(out) == 0 {
		return nil
	}
	what := "the steps it names and the steps they need"
	if sel.noNeeds {
		what = "with " + sel.spell.Of(SettingNoNeeds) + ", the steps it names only"
	}
	replace, stepsSetting := sel.spell.Of(SettingReplace), sel.spell.Of(SettingSteps)
	return fmt.Errorf("%s %s: not selected by %s %s (%s), so it would not run: name it in %s too, or leave it out of %s; nothing was run",
		replace, strings.Join(out, ", "), stepsSetting, strings.Join(steps, ","), what, stepsSetting, replace)
}

// excludedWarnings are the warnings of steps --steps picks or --replace
// forces (nil: none) that when: excludes: they are skipped all the same,
// as the spec's when: decides (decision 160), and the warning says so.
func excludedWarnings(doc *load.Document, picked, forced []bool, spell Spelling) []string {
	var out []string
	for i := range doc.Spec.Steps {
		if doc.Included(i) {
			continue
		}
		st := &doc.Spec.Steps[i]
		if picked != nil && picked[i] {
			out = append(out, fmt.Sprintf("%s names %s, which when: (%s) excludes: it is skipped", spell.Of(SettingSteps), st.Name, st.When))
		}
		if forced != nil && forced[i] {
			out = append(out, fmt.Sprintf("%s names %s, which when: (%s) excludes: it is not re-run", spell.Of(SettingReplace), st.Name, st.When))
		}
	}
	return out
}

// matchSteps marks the steps list names: names and path.Match patterns
// (an entry holding *, ?, [ or \ is a pattern), as --contexts matches
// contexts. An entry that matches nothing, or a malformed pattern, is an
// error listing the step names.
func matchSteps(steps []spec.Step, list []string, flag string) ([]bool, error) {
	out := make([]bool, len(steps))
	var bad []string
	for _, e := range list {
		e = strings.TrimSpace(e)
		if e == "" {
			bad = append(bad, "an empty entry")
			continue
		}
		found := false
		for i := range steps {
			ok := steps[i].Name == e
			if strings.ContainsAny(e, `*?[\`) {
				m, err := path.Match(e, steps[i].Name)
				if err != nil {
					bad = append(bad, fmt.Sprintf("%q (malformed pattern: %v)", e, err))
					found = true
					break
				}
				ok = m
			}
			if ok {
				out[i], found = true, true
			}
		}
		if !found {
			bad = append(bad, fmt.Sprintf("%q", e))
		}
	}
	if len(bad) == 0 {
		return out, nil
	}
	names := make([]string, len(steps))
	for i := range steps {
		names[i] = steps[i].Name
	}
	return nil, fmt.Errorf("%s: %s matches no step; the spec's steps are: %s", flag, strings.Join(bad, ", "), strings.Join(names, ", "))
}
