package engine

import (
	"errors"
	"fmt"
	"strings"

	"khook.io/core/load"
	"khook.io/core/state"
)

// Fate is what a command does with one step. Dispose decides it; apply,
// destroy, plan, diff, status and the Terraform provider all read it.
type Fate int

// The fates.
const (
	// FateRun: it runs (never succeeded, its inputs changed, or there is
	// no record).
	FateRun Fate = iota
	// FateResume: skipped, the state record has it done with these
	// inputs.
	FateResume
	// FateNotSelected: skipped, --steps leaves it out.
	FateNotSelected
	// FateExcluded: skipped, its when: is false.
	FateExcluded
	// FateForced: it runs, --replace re-runs it whatever the record says.
	FateForced
	// FateConditional: it runs only if one of its triggers (triggeredBy)
	// changes something in the run; a run decides as its triggers end, a
	// plan or diff from their predictions (ResolveTriggers).
	FateConditional
	// FateTriggered: a trigger is predicted to change something: it runs.
	FateTriggered
	// FateNotTriggered: no trigger is predicted to change anything:
	// skipped.
	FateNotTriggered
	// FateBlocked: --no-needs runs it, and a step it needs is neither
	// selected nor done: the command is refused (CheckBlocked).
	FateBlocked
	// FateUndo: destroy undoes it.
	FateUndo
	// FateLeftAlone: destroy leaves it alone (its kind has nothing to
	// undo: delete, patch, wait, rollout).
	FateLeftAlone
)

var fateNames = [...]string{"run", "resume", "not selected", "excluded", "forced", "conditional", "triggered", "not triggered", "blocked", "undo", "left alone"}

func (f Fate) String() string {
	if int(f) < len(fateNames) {
		return fateNames[f]
	}
	return fmt.Sprintf("Fate(%d)", int(f))
}

// Skipped reports whether the fate skips the step (it satisfies its
// needers without running).
func (f Fate) Skipped() bool {
	switch f {
	case FateResume, FateNotSelected, FateExcluded, FateNotTriggered, FateLeftAlone:
		return true
	}
	return false
}

// Predicted reports whether a live plan or diff asks the cluster what a
// step of this fate would do: a step the command runs, or may run (a
// conditional one, decided from its triggers). A step it skips whatever
// the cluster holds (resumed from the record, not selected, excluded) is
// shown from the spec and the record alone, as the run skips it: no
// request is sent for it.
func (f Fate) Predicted() bool {
	switch f {
	case FateRun, FateForced, FateConditional, FateTriggered:
		return true
	}
	return false
}

// Disposition is one step's fate and what it was decided from.
type Disposition struct {
	Fate Fate
	// Resumed: the record has the step done with its current inputs (a
	// forced or conditional step says so).
	Resumed bool
	// Triggers are the steps (by index) whose change runs a conditional
	// step.
	Triggers []int
	// Changed and Unknown are the triggers predicted to change something,
	// and those whose prediction cannot tell (ResolveTriggers).
	Changed, Unknown []string
	// Missing are the needs (by index) of a blocked step that are neither
	// selected nor done.
	Missing []int
	// spell is how the caller spells the settings its reasons name (the
	// selection's).
	spell Spelling
}

// Texts of the fates.
const (
	// NotSelected is the skip reason of a step --steps leaves out.
	NotSelected = "not selected"
	// resumedNote is added where a forced step's record had it done.
	resumedNote = " (the state record had it unchanged)"
)

// Reason is the skip reason of a step whose fate skips it, or the note of
// one that runs for a reason of the command's ("" for FateRun and
// FateUndo): the words apply's summary, plan and diff use.
func (d Disposition) Reason(doc *load.Document, i int) string {
	st := &doc.Spec.Steps[i]
	switch d.Fate {
	case FateResume:
		return state.ResumeReason
	case FateNotSelected:
		return NotSelected
	case FateExcluded:
		return "when: " + st.When + " is false"
	case FateForced:
		if d.Resumed {
			return d.spell.forcedNote() + resumedNote
		}
		return d.spell.forcedNote()
	case FateConditional:
		r := "runs if " + strings.Join(st.TriggeredBy, ", ") + " changes"
		if len(d.Unknown) > 0 {
			r += " (" + strings.Join(d.Unknown, ", ") + ": unknown)"
		}
		return r
	case FateTriggered:
		return "triggered: " + strings.Join(d.Changed, ", ") + " changes"
	case FateNotTriggered:
		return notTriggered(doc, i, d.Resumed)
	case FateLeftAlone:
		return fmt.Sprintf("nothing to undo: destroy leaves %s steps alone", st.Type())
	case FateBlocked:
		var needs []string
		for _, j := range d.Missing {
			needs = append(needs, doc.Spec.Steps[j].Name)
		}
		return d.spell.Of(SettingNoNeeds) + ": needs " + strings.Join(needs, ", ") + ", neither selected nor done"
	}
	return ""
}

// notTriggered is the skip reason of step i when no trigger changed
// anything; resumed: the record resumes the step's own inputs.
func notTriggered(doc *load.Document, i int, resumed bool) string {
	r := "not triggered: none of " + strings.Join(doc.Spec.Steps[i].TriggeredBy, ", ") + " changed anything in this run"
	if resumed {
		r += "; its own inputs are unchanged since it succeeded (state record)"
	}
	return r
}

// Facts are what a step's fate is decided from besides the spec and the
// selection: the record and the cluster's executors.
type Facts struct {
	// Resumed[i]: the state record has step i done with its current
	// inputs (Resumes). nil: the record was not read (an offline plan):
	// nothing resumes, and --no-needs cannot be checked against it.
	Resumed []bool
	// Undoes[i]: step i's executor undoes something (destroy only).
	Undoes []bool
}

// Resumes reports, per step of doc, whether the record rec lets a run
// resume it: it succeeded with the same, known inputs (hashes), and no
// when: excludes it. A nil rec resumes nothing.
func Resumes(doc *load.Document, rec *state.Record, hashes []string) []bool {
	out := make([]bool, len(doc.Spec.Steps))
	for i, st := range doc.Spec.Steps {
		out[i] = doc.Included(i) && rec.Resumes(st.Name, hashes[i])
	}
	return out
}

// Dispose decides every step's fate for command, from the spec, the
// selection (nil: every step), the record and the executors (f). It is
// the one place a fate is decided: apply and destroy run what it says,
// plan, diff, status and the provider show it.
//
// Forward (apply, plan, diff, status, graph), in order: not selected, then
// excluded by when:, then forced by --replace, then conditional (it has
// triggeredBy, and there is no record or the record resumes its own
// inputs: with changed inputs it runs as any step), then resumed, else it
// runs. A step --no-needs runs whose need is neither selected, excluded
// nor resumed is blocked. Destroy: not selected, then excluded, then left
// alone when its executor undoes nothing, else undone.
func Dispose(doc *load.Document, command Command, sel *Selection, f Facts) []Disposition {
	n := len(doc.Spec.Steps)
	out := make([]Disposition, n)
	resumed := func(i int) bool { return f.Resumed != nil && f.Resumed[i] }
	for i := range n {
		d := &out[i]
		d.Resumed, d.spell = resumed(i), sel.spelling()
		switch {
		case !sel.Selected(i):
			d.Fate = FateNotSelected
		case !doc.Included(i):
			d.Fate = FateExcluded
		case command == CommandDestroy:
			d.Fate = FateUndo
			if f.Undoes != nil && !f.Undoes[i] {
				d.Fate = FateLeftAlone
			}
		case sel.replaces(i):
			d.Fate = FateForced
		case conditional(doc, i, d.Resumed):
			d.Fate = FateConditional
			for _, name := range doc.Spec.Steps[i].TriggeredBy {
				if j, ok := doc.Graph.Index(name); ok {
					d.Triggers = append(d.Triggers, j)
				}
			}
		case d.Resumed:
			d.Fate = FateResume
		default:
			d.Fate = FateRun
		}
	}
	// --no-needs: a need must be selected, excluded or done; offline with
	// a record nothing shows a need done, so nothing is blocked
	if command == CommandDestroy || sel == nil || !sel.noNeeds || sel.picked == nil || (f.Resumed == nil && doc.Spec.State.IsEnabled()) {
		return out
	}
	for i, p := range sel.picked {
		if !p || !doc.Included(i) {
			continue
		}
		var missing []int
		for _, j := range doc.Graph.Needs(i) {
			if sel.in[j] || !doc.Included(j) || resumed(j) {
				continue
			}
			missing = append(missing, j)
		}
		if len(missing) > 0 {
			out[i] = Disposition{Fate: FateBlocked, Resumed: out[i].Resumed, Missing: missing, spell: sel.spell}
		}
	}
	return out
}

// conditional reports whether step i runs only when a trigger changes
// something: it has triggeredBy, and there is no record or the record
// resumes it.
func conditional(doc *load.Document, i int, resumed bool) bool {
	if len(doc.Spec.Steps[i].TriggeredBy) == 0 {
		return false
	}
	return !doc.Spec.State.IsEnabled() || resumed
}

// CheckBlocked refuses a command some step of which is blocked (--no-needs
// without a need): every such need is named, and nothing runs (a
// *UsageError).
func CheckBlocked(doc *load.Document, disp []Disposition) error {
	var (
		missing []string
		spell   Spelling
	)
	for i, d := range disp {
		if d.Fate != FateBlocked {
			continue
		}
		spell = d.spell
		for _, j := range d.Missing {
			missing = append(missing, fmt.Sprintf("%s needs %s", doc.Spec.Steps[i].Name, doc.Spec.Steps[j].Name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	why := "which is neither selected nor recorded done in the state record"
	if !doc.Spec.State.IsEnabled() {
		why = "which is not selected (without a state record, nothing shows a need done)"
	}
	noNeeds := spell.Of(SettingNoNeeds)
	return usage(fmt.Errorf("%s: %s, %s: select it too, or leave out %s; nothing was run", noNeeds, strings.Join(missing, ", "), why, noNeeds))
}

// Change is what a plan or diff predicts of a step: whether running it
// changes something.
type Change int

// The predictions.
const (
	ChangeNone Change = iota
	ChangeSome
	ChangeUnknown
)

// ResolveTriggers decides, in DAG order, the conditional steps of disp
// from their triggers' predictions (change, asked only of triggers that
// run): one predicted to change something makes the step triggered;
// without one, a trigger that cannot tell leaves it conditional (Unknown
// names it), else it is not triggered. A trigger that is itself skipped
// (not selected, excluded, resumed, not triggered) changes nothing.
func ResolveTriggers(doc *load.Document, disp []Disposition, change func(j int) Change) {
	for _, i := range doc.Graph.Order() {
		d := &disp[i]
		if d.Fate != FateConditional {
			continue
		}
		d.Changed, d.Unknown = nil, nil
		for _, j := range d.Triggers {
			if disp[j].Fate.Skipped() || disp[j].Fate == FateBlocked {
				continue
			}
			switch change(j) {
			case ChangeSome:
				d.Changed = append(d.Changed, doc.Spec.Steps[j].Name)
			case ChangeUnknown:
				d.Unknown = append(d.Unknown, doc.Spec.Steps[j].Name)
			}
		}
		switch {
		case len(d.Changed) > 0:
			d.Fate, d.Unknown = FateTriggered, nil
		case len(d.Unknown) == 0:
			d.Fate = FateNotTriggered
		}
	}
}

// errNoExecutors: without the executors, which declare what a step reads,
// a hash would leave the files out and never match apply's.
var errNoExecutors = errors.New("this build of khook has no step executors to read the steps' inputs")
