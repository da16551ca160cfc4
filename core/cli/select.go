package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"khook.io/core/load"
	"khook.io/core/plan"
	"khook.io/core/run"
	"khook.io/core/spec"
	"khook.io/core/state"
)

// Day-2 control: which steps a run touches (--steps, --no-needs), which
// it re-runs whatever the record says (--replace), and which run only
// when a need changed something (triggeredBy). One resolution serves
// apply, destroy, plan, diff, status and graph, so they agree on every
// step's fate.

// Skip reasons of the selection.
const (
	// NotSelected is the skip reason of a step --steps leaves out.
	NotSelected = "not selected"
	// forcedNote is added to the outcome of a step --replace re-ran.
	forcedNote = "forced by --replace"
)

// SelectFlags are --steps, --no-needs and --replace.
type SelectFlags struct {
	Steps   []string
	NoNeeds bool
	Replace []string

	// emptySteps and emptyReplace record a flag given an empty value
	// (an unset variable): refused, never taken for its absence.
	emptySteps, emptyReplace bool
}

// AddFlags registers --steps, and for the commands that run steps
// forward (apply, plan, diff) --no-needs and --replace; destroy
// (undo=true) takes --steps alone; status and graph (replace=false)
// --steps and --no-needs.
func (f *SelectFlags) AddFlags(cmd *cobra.Command, command string) {
	fs := cmd.Flags()
	undo := command == "destroy"
	usage := "run only these steps and the steps they need, transitively (step names and glob patterns, comma-separated or repeated); the others are skipped: not selected"
	if undo {
		usage = "undo only these steps and the steps that need them, transitively (step names and glob patterns, comma-separated or repeated); the others are left alone"
	}
	fs.Var(&contextsValue{list: &f.Steps, empty: &f.emptySteps}, "steps", usage)
	_ = cmd.RegisterFlagCompletionFunc("steps", completeSteps)
	if undo {
		return
	}
	fs.BoolVar(&f.NoNeeds, "no-needs", false, "with --steps: only the steps named, not the steps they need (each need must be selected or recorded done in the state record)")
	if command == "status" || command == "graph" {
		return
	}
	fs.Var(&contextsValue{list: &f.Replace, empty: &f.emptyReplace}, "replace", "re-run these steps (names and glob patterns) even when the state record says they are unchanged, and whatever their triggeredBy says")
	_ = cmd.RegisterFlagCompletionFunc("replace", completeSteps)
}

// check refuses a selection flag given an empty value, and --no-needs
// without --steps, before the spec is read.
func (f *SelectFlags) check() error {
	var errs []error
	if f.emptySteps || len(f.Steps) > 0 && !slices.ContainsFunc(f.Steps, notBlank) {
		errs = append(errs, errors.New("--steps was given an empty value (an unset variable?): it names the steps to run, so it is not taken for its absence (every step); name the steps, or leave the flag out"))
	}
	if f.emptyReplace || len(f.Replace) > 0 && !slices.ContainsFunc(f.Replace, notBlank) {
		errs = append(errs, errors.New("--replace was given an empty value (an unset variable?): name the steps to re-run, or leave the flag out"))
	}
	if f.NoNeeds && len(f.Steps) == 0 && !f.emptySteps {
		errs = append(errs, errors.New("--no-needs needs --steps: it runs the steps --steps names without the steps they need"))
	}
	if len(errs) > 0 {
		return invalid(errors.Join(errs...))
	}
	return nil
}

// selection is SelectFlags resolved against one spec.
type selection struct {
	// in: step i takes part in the run (by index); all true when --steps
	// is absent.
	in []bool
	// picked: step i was named by --steps (nil without it).
	picked []bool
	// forced: step i is re-run whatever the record says (--replace).
	forced  []bool
	partial bool
	noNeeds bool
	// warnings say what the flags name that the run will not do: a step
	// --steps or --replace names that when: excludes (decision 192).
	warnings []string
}

// resolve matches the flags against doc's steps for command: apply,
// plan, diff, status and graph take the steps named and what they need
// (--no-needs: the steps named only); destroy the steps named and what
// needs them. Every entry that matches no step is reported at once,
// listing the steps (exit 2).
func (f *SelectFlags) resolve(doc *load.Document, command string) (*selection, error) {
	steps := doc.Spec.Steps
	n := len(steps)
	sel := &selection{in: make([]bool, n), forced: make([]bool, n), noNeeds: f.NoNeeds}
	var errs []error
	if len(f.Replace) > 0 {
		m, err := matchSteps(steps, f.Replace, "--replace")
		errs = append(errs, err)
		sel.forced = m
	}
	if len(f.Steps) == 0 {
		for i := range sel.in {
			sel.in[i] = true
		}
		if err := errors.Join(errs...); err != nil {
			return nil, invalid(err)
		}
		sel.warnings = excludedWarnings(doc, nil, sel.forced)
		return sel, nil
	}
	picked, err := matchSteps(steps, f.Steps, "--steps")
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, invalid(err)
	}
	sel.picked = picked
	copy(sel.in, picked)
	if !f.NoNeeds {
		next := doc.Graph.Needs
		if command == "destroy" {
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
	if err := unselectedReplace(doc, sel, f.Steps); err != nil {
		return nil, invalid(err)
	}
	sel.warnings = excludedWarnings(doc, sel.picked, sel.forced)
	return sel, nil
}

// unselectedReplace refuses --replace naming a step --steps leaves out:
// it would not run, so it could not be re-run (decision 192). Every such
// step is named at once.
func unselectedReplace(doc *load.Document, sel *selection, steps []string) error {
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
		what = "with --no-needs, the steps it names only"
	}
	return fmt.Errorf("--replace %s: not selected by --steps %s (%s), so it would not run: name it in --steps too, or leave it out of --replace; nothing was run",
		strings.Join(out, ", "), strings.Join(steps, ","), what)
}

// excludedWarnings are the warnings of steps --steps picks or --replace
// forces (nil: none) that when: excludes: they are skipped all the same,
// as the spec's when: decides (decision 160), and the warning says so.
func excludedWarnings(doc *load.Document, picked, forced []bool) []string {
	var out []string
	for i := range doc.Spec.Steps {
		if doc.Included(i) {
			continue
		}
		st := &doc.Spec.Steps[i]
		if picked != nil && picked[i] {
			out = append(out, fmt.Sprintf("--steps names %s, which when: (%s) excludes: it is skipped", st.Name, st.When))
		}
		if forced != nil && forced[i] {
			out = append(out, fmt.Sprintf("--replace names %s, which when: (%s) excludes: it is not re-run", st.Name, st.When))
		}
	}
	return out
}

// warn writes the selection's warnings to w, one a line.
func (sel *selection) warn(w io.Writer) {
	if sel == nil || w == nil {
		return
	}
	for _, m := range sel.warnings {
		fmt.Fprintln(w, "warning: "+m)
	}
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

// selected reports whether step i takes part in the run.
func (sel *selection) selected(i int) bool { return sel == nil || sel.in[i] }

// bindSelection resolves f against the session's spec for command and
// keeps it for the run, plan or diff; nil f selects everything.
func (s *session) bindSelection(f *SelectFlags, command string, warnings io.Writer) error {
	if f == nil {
		return nil
	}
	sel, err := f.resolve(s.doc, command)
	if err != nil {
		return err
	}
	sel.warn(warnings)
	s.sel = sel
	return nil
}

// checkNeeds refuses --no-needs when a step it runs needs a step that is
// neither selected nor done: excluded by when:, or (resumes) recorded
// done with its current inputs. Every such need is named (exit 2).
func (s *session) checkNeeds(resumes func(i int) bool) error {
	sel := s.sel
	if sel == nil || !sel.noNeeds || sel.picked == nil {
		return nil
	}
	var missing []string
	for i, p := range sel.picked {
		if !p || !s.doc.Included(i) {
			continue
		}
		for _, j := range s.doc.Graph.Needs(i) {
			if sel.in[j] || !s.doc.Included(j) || resumes(j) {
				continue
			}
			missing = append(missing, fmt.Sprintf("%s needs %s", s.doc.Spec.Steps[i].Name, s.doc.Spec.Steps[j].Name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	why := "which is neither selected nor recorded done in the state record"
	if !s.doc.Spec.State.IsEnabled() {
		why = "which is not selected (without a state record, nothing shows a need done)"
	}
	return invalid(fmt.Errorf("--no-needs: %s, %s: select it too, or leave out --no-needs; nothing was run", strings.Join(missing, ", "), why))
}

// triggerNames lists the names of step i's triggers.
func (s *session) triggerNames(i int) string {
	return strings.Join(s.doc.Spec.Steps[i].TriggeredBy, ", ")
}

// notTriggered is the skip reason of step i when no trigger changed
// anything; resumed: the record resumes the step's own inputs.
func (s *session) notTriggered(i int, resumed bool) string {
	r := "not triggered: none of " + s.triggerNames(i) + " changed anything in this run"
	if resumed {
		r += "; its own inputs are unchanged since it succeeded (state record)"
	}
	return r
}

// shapeTasks applies the selection, --replace and triggeredBy to the
// tasks of command, resumes[i] telling whether the record resumes step i
// (the tasks then carry state.ResumeReason). It returns the skip reasons
// under which a step's record entry stays exactly as it was.
func (s *session) shapeTasks(command string, tasks []run.Task) map[string]string {
	keep := map[string]string{}
	index := make(map[string]int, len(tasks))
	for i, t := range tasks {
		index[t.Name] = i
	}
	for i := range tasks {
		t := &tasks[i]
		if !s.sel.selected(i) {
			t.Skip = NotSelected
			keep[t.Name] = NotSelected
			continue
		}
		if command == "destroy" || !s.doc.Included(i) {
			continue
		}
		resumed := t.Skip == state.ResumeReason
		if s.sel != nil && s.sel.forced[i] {
			t.Skip = ""
			t.Attempt = forced(t.Attempt, resumed)
			continue
		}
		st := &s.doc.Spec.Steps[i]
		if len(st.TriggeredBy) == 0 || (s.doc.Spec.State.IsEnabled() && !resumed) {
			// without triggers, or its own inputs changed (or it never
			// succeeded): it runs as any step
			continue
		}
		t.Skip = ""
		for _, n := range st.TriggeredBy {
			t.Triggers = append(t.Triggers, index[n])
		}
		t.NotTriggered = s.notTriggered(i, resumed)
		keep[t.Name] = t.NotTriggered
	}
	return keep
}

// forced wraps the attempt of a step --replace re-runs: its outcome says
// so.
func forced(fn run.AttemptFunc, resumed bool) run.AttemptFunc {
	note := forcedNote
	if resumed {
		note += " (the state record had it unchanged)"
	}
	return func(ctx context.Context, attempt int) (run.Outcome, error) {
		out, err := fn(ctx, attempt)
		if err == nil {
			if out.Message != "" {
				out.Message += "; "
			}
			out.Message += note
		}
		return out, err
	}
}

// completeSteps completes --steps and --replace with the names of the
// steps of the spec -f names, read as written (no variables resolved).
func completeSteps(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	file, _ := cmd.Flags().GetString("file")
	if file == "" || file == "-" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var doc struct {
		Steps []struct {
			Name string `json:"name"`
		} `json:"steps"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, st := range doc.Steps {
		if st.Name != "" {
			names = append(names, st.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// shape applies the selection, --replace and triggeredBy to the tasks of
// command (see shapeTasks), refuses --no-needs missing a need, and tells
// the run's record (rs, nil without one) which entries to leave as they
// are and whether the run is partial.
func (s *session) shape(command string, tasks []run.Task, rs *runState) error {
	resumes := func(i int) bool {
		return rs != nil && rs.store.Previous().Resumes(s.doc.Spec.Steps[i].Name, rs.hashes[i])
	}
	if command != "destroy" {
		if err := s.checkNeeds(resumes); err != nil {
			return err
		}
	}
	keep := s.shapeTasks(command, tasks)
	if rs != nil {
		rs.keep = keep
		rs.partial = s.sel != nil && s.sel.partial
	}
	return nil
}

// specHash is the whole spec's hash the run records: a partial run keeps
// the previous record's (it applied only some steps, never the spec).
func (rs *runState) specHash(s *session) string {
	if rs.partial {
		if prev := rs.store.Previous(); prev != nil {
			return prev.SpecHash
		}
		return ""
	}
	return state.SpecHash(s.doc.Spec.Metadata.Name, rs.hashes)
}

// The diff summary's categories of the selection.
const (
	catNotSelected  = "not selected"
	catNotTriggered = "not triggered"
)

// forcedStep reports whether --replace re-runs step i.
func (s *session) forcedStep(i int) bool { return s.sel != nil && s.sel.forced[i] }

// conditional reports whether step i runs only when a trigger changes
// something: it has triggeredBy, --replace does not force it, and there
// is no record or the record resumes it (resumed).
func (s *session) conditional(i int, resumed bool) bool {
	if len(s.doc.Spec.Steps[i].TriggeredBy) == 0 || s.forcedStep(i) {
		return false
	}
	return !s.doc.Spec.State.IsEnabled() || resumed
}

// changingAction: a live plan's action that changes the cluster.
func changingAction(a string) bool { return actionChanges[a] }

// planFates gives each step of p the fate apply would give it: not
// selected, forced by --replace, resumed from the record (resumed, nil
// offline or without a record), or run only if a trigger changes
// something, predicted from the triggers' own fates (live), or said so
// (offline). p's steps are in DAG order, so a trigger's fate is decided
// before its dependents'.
func (s *session) planFates(p *plan.Plan, resumed []bool, live bool, dry map[string]bool) {
	index := make(map[string]int, len(s.doc.Spec.Steps))
	for i, st := range s.doc.Spec.Steps {
		index[st.Name] = i
	}
	byName := make(map[string]*plan.Step, len(p.Steps))
	for k := range p.Steps {
		byName[p.Steps[k].Name] = &p.Steps[k]
	}
	for k := range p.Steps {
		ps := &p.Steps[k]
		i := index[ps.Name]
		res := resumed != nil && resumed[i]
		switch {
		case !s.sel.selected(i):
			ps.Action, ps.Reason, ps.Details = plan.ActionSkip, NotSelected, nil
		case !s.doc.Included(i):
		case s.forcedStep(i):
			ps.Reason = forcedNote
			if res {
				ps.Reason += " (the state record had it unchanged)"
			}
		case s.conditional(i, res):
			s.planTriggered(ps, i, res, live, byName, dry)
		case res:
			ps.Action, ps.Reason, ps.Details = plan.ActionSkip, state.ResumeReason, nil
		}
	}
}

// planTriggered decides the plan of step i, which runs only if one of
// its triggers changes something.
func (s *session) planTriggered(ps *plan.Step, i int, resumed, live bool, byName map[string]*plan.Step, dry map[string]bool) {
	names := s.triggerNames(i)
	if !live {
		ps.Reason = "runs if " + names + " changes"
		return
	}
	var changed, unknown []string
	for _, n := range s.doc.Spec.Steps[i].TriggeredBy {
		changes, dried := dry[n]
		switch t := byName[n]; {
		case t == nil:
		case t.Action == plan.ActionSkip:
		case dried && changes:
			changed = append(changed, n)
		case dried:
		case changingAction(t.Action):
			changed = append(changed, n)
		case t.Action == plan.ActionUnknown:
			unknown = append(unknown, n)
		}
	}
	switch {
	case len(changed) > 0:
		ps.Reason = "triggered: " + strings.Join(changed, ", ") + " changes"
	case len(unknown) > 0:
		ps.Reason = "runs if " + names + " changes (" + strings.Join(unknown, ", ") + ": unknown)"
	default:
		ps.Action, ps.Reason, ps.Details = plan.ActionSkip, s.notTriggered(i, resumed), nil
	}
}

// diffFates replaces the diff of each conditional step none of whose
// triggers would change anything by its skip, as apply would skip it;
// resumed is what the record resumes.
func (s *session) diffFates(results []*stepDiff, resumed []bool) {
	index := make(map[string]int, len(s.doc.Spec.Steps))
	for k, st := range s.doc.Spec.Steps {
		index[st.Name] = k
	}
	for _, i := range s.doc.Graph.Order() {
		if s.sel.selected(i) && s.doc.Included(i) && s.forcedStep(i) && results[i] != nil {
			results[i].details = append([]string{forcedNote}, results[i].details...)
		}
		if !s.sel.selected(i) || !s.doc.Included(i) || !s.conditional(i, resumed[i]) {
			continue
		}
		var changed []string
		for _, n := range s.doc.Spec.Steps[i].TriggeredBy {
			if r := results[index[n]]; r != nil && r.counted != catNotTriggered && (r.changes || r.objectChanges) {
				changed = append(changed, n)
			}
		}
		if len(changed) == 0 {
			results[i] = &stepDiff{headline: "skipped: " + s.notTriggered(i, resumed[i]), counted: catNotTriggered}
			continue
		}
		results[i].details = append([]string{"triggered: " + strings.Join(changed, ", ") + " changes"}, results[i].details...)
	}
}

// offlinePlan is doc's offline plan with the selection's fates.
func offlinePlan(doc *load.Document, sel *selection) (*plan.Plan, error) {
	p := doc.OfflinePlan()
	s := &session{doc: doc, sel: sel}
	if err := s.checkNeeds(func(int) bool { return false }); err != nil && !doc.Spec.State.IsEnabled() {
		return nil, err
	}
	s.planFates(p, nil, false, nil)
	return p, nil
}

// planRecord gives the live plan p the fates apply will give its steps,
// reading the state record (without writing it) for what it resumes.
func (s *session) planRecord(ctx context.Context, p *plan.Plan) error {
	resumed, err := s.resumedSteps(ctx)
	if err != nil {
		return err
	}
	if err := s.checkNeeds(func(i int) bool { return resumed[i] }); err != nil {
		return err
	}
	s.planFates(p, resumed, true, s.dryRunTriggers(ctx, resumed))
	return nil
}

// dryRunTriggers diffs each step some conditional step is triggered by
// (a server-side dry run, as diff does), so that the plan predicts
// whether it changes anything: a live plan's configure does not say.
// A step whose diff fails is left out (its plan action decides).
func (s *session) dryRunTriggers(ctx context.Context, resumed []bool) map[string]bool {
	index := make(map[string]int, len(s.doc.Spec.Steps))
	for k, st := range s.doc.Spec.Steps {
		index[st.Name] = k
	}
	out := map[string]bool{}
	for i, st := range s.doc.Spec.Steps {
		if !s.sel.selected(i) || !s.doc.Included(i) || !s.conditional(i, resumed[i]) {
			continue
		}
		for _, n := range st.TriggeredBy {
			j := index[n]
			if _, done := out[n]; done || resumed[j] || !s.sel.selected(j) || !s.doc.Included(j) {
				continue
			}
			exec, err := s.executor(j)
			if err != nil {
				continue
			}
			d := s.diffStep(ctx, j, exec)
			if d.raw != nil {
				d = diffResult(*d.raw, s.red)
			}
			if d.counted != catFailed {
				out[n] = d.changes || d.objectChanges
			}
		}
	}
	return out
}

// filterStatus keeps, of st, the steps --steps selects (with their needs
// unless --no-needs); st nil (no record yet) stays nil.
func (f *SelectFlags) filterStatus(st *state.Status, doc *load.Document) error {
	sel, err := f.resolve(doc, "status")
	if err != nil || st == nil || !sel.partial {
		return err
	}
	in := map[string]bool{}
	for i, s := range doc.Spec.Steps {
		in[s.Name] = sel.in[i]
	}
	st.Steps = slices.DeleteFunc(st.Steps, func(s state.StepStatus) bool { return !in[s.Name] })
	st.Resumes = slices.DeleteFunc(st.Resumes, func(n string) bool { return !in[n] })
	return nil
}
