package engine

import (
	"slices"
	"strings"
	"testing"

	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/steps/builtin"
)

// fateTableSpec is the spec of TestFates: a needs b needs... as drawn:
//
//	a ── b ── c (rollout, triggeredBy b)
//	│    └─── e (job) ── f (rollout, triggeredBy e)
//	└── d (when: false)
const fateTableSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: fates}
%STATE%steps:
  - name: a
    apply: {manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n"}]}
  - name: b
    needs: [a]
    apply: {manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: default}\n"}]}
  - name: c
    needs: [b]
    triggeredBy: [b]
    rollout: {restart: deployment/web, namespace: default}
  - name: d
    needs: [a]
    when: vars.get("NEVER", "false") == "true"
    apply: {manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d, namespace: default}\n"}]}
  - name: e
    needs: [b]
    job: {image: busybox:1.36, args: ["true"]}
  - name: f
    needs: [e]
    triggeredBy: [e]
    rollout: {restart: deployment/web, namespace: default}
`

// TestFates: every step's fate, and its reason, against a table written
// by hand (not another reading of Dispose): the selection (--steps,
// --no-needs), when:, --replace (forced, a trigger forced among them, and
// the request of a forced step alone says replace), triggeredBy with and
// without a record (a resumed step with triggeredBy is conditional, then
// triggered or not by its triggers' predicted changes), a blocked
// --no-needs, and destroy's undo and left alone.
func TestFates(t *testing.T) {
	const (
		resumedNotTriggered = "not triggered | not triggered: none of b changed anything in this run; its own inputs are unchanged since it succeeded (state record)"
		excluded            = `excluded | when: vars.get("NEVER", "false") == "true" is false`
		notSelected         = "not selected | not selected"
		resumed             = "resume | unchanged since it succeeded in a previous run (state record)"
	)
	for _, tc := range []struct {
		name    string
		command Command
		state   bool
		sel     SelectOptions
		// record: the record was read (Facts.Resumed not nil); resumed:
		// the steps it has done with their current inputs
		record  bool
		resumed []string
		// changes: the triggers' predicted changes (nil: fates before
		// ResolveTriggers); a trigger not named changes nothing
		changes map[string]Change
		// want: each step's fate, then " | " and its reason where it has
		// one; replace: the steps whose request says --replace
		want    map[string]string
		replace []string
		// refused: what CheckBlocked refuses ("": nothing)
		refused string
	}{{
		name: "apply without a record: triggeredBy is conditional", command: CommandApply,
		want: map[string]string{"a": "run", "b": "run", "c": "conditional | runs if b changes", "d": excluded, "e": "run", "f": "conditional | runs if e changes"},
	}, {
		name: "plan without a record: triggers predicted", command: CommandPlan,
		changes: map[string]Change{"b": ChangeSome, "e": ChangeNone},
		want:    map[string]string{"a": "run", "b": "run", "c": "triggered | triggered: b changes", "d": excluded, "e": "run", "f": "not triggered | not triggered: none of e changed anything in this run"},
	}, {
		name: "plan without a record: a trigger that cannot tell", command: CommandPlan,
		changes: map[string]Change{"b": ChangeUnknown, "e": ChangeUnknown},
		want:    map[string]string{"a": "run", "b": "run", "c": "conditional | runs if b changes (b: unknown)", "d": excluded, "e": "run", "f": "conditional | runs if e changes (e: unknown)"},
	}, {
		name: "state, first run: triggeredBy runs as any step", command: CommandApply, state: true, record: true,
		want: map[string]string{"a": "run", "b": "run", "c": "run", "d": excluded, "e": "run", "f": "run"},
	}, {
		name: "state, all resumed: a resumed step with triggeredBy is conditional", command: CommandApply, state: true, record: true,
		resumed: []string{"a", "b", "c", "e", "f"},
		want:    map[string]string{"a": resumed, "b": resumed, "c": "conditional | runs if b changes", "d": excluded, "e": resumed, "f": "conditional | runs if e changes"},
	}, {
		name: "state, all resumed, resolved: a skipped trigger changes nothing", command: CommandPlan, state: true, record: true,
		resumed: []string{"a", "b", "c", "e", "f"},
		changes: map[string]Change{"b": ChangeSome, "e": ChangeSome},
		want:    map[string]string{"a": resumed, "b": resumed, "c": resumedNotTriggered, "d": excluded, "e": resumed, "f": "not triggered | not triggered: none of e changed anything in this run; its own inputs are unchanged since it succeeded (state record)"},
	}, {
		name: "state, the trigger's inputs changed: the resumed step is triggered", command: CommandPlan, state: true, record: true,
		resumed: []string{"a", "c", "e", "f"},
		changes: map[string]Change{"b": ChangeSome},
		want:    map[string]string{"a": resumed, "b": "run", "c": "triggered | triggered: b changes", "d": excluded, "e": resumed, "f": "not triggered | not triggered: none of e changed anything in this run; its own inputs are unchanged since it succeeded (state record)"},
	}, {
		name: "--replace of a trigger the record resumes: forced, and its step triggered", command: CommandPlan, state: true, record: true,
		sel: SelectOptions{Replace: []string{"b"}}, resumed: []string{"a", "b", "c", "e", "f"},
		changes: map[string]Change{"b": ChangeSome},
		want:    map[string]string{"a": resumed, "b": "forced | forced by --replace (the state record had it unchanged)", "c": "triggered | triggered: b changes", "d": excluded, "e": resumed, "f": "not triggered | not triggered: none of e changed anything in this run; its own inputs are unchanged since it succeeded (state record)"},
		replace: []string{"b"},
	}, {
		name: "--replace of a trigger predicted to change nothing: forced, its step not triggered", command: CommandPlan, state: true, record: true,
		sel: SelectOptions{Replace: []string{"b"}}, resumed: []string{"a", "b", "c", "e", "f"},
		changes: map[string]Change{},
		want:    map[string]string{"a": resumed, "b": "forced | forced by --replace (the state record had it unchanged)", "c": resumedNotTriggered, "d": excluded, "e": resumed, "f": "not triggered | not triggered: none of e changed anything in this run; its own inputs are unchanged since it succeeded (state record)"},
		replace: []string{"b"},
	}, {
		name: "--replace of a conditional step and of a step the record does not have", command: CommandApply, state: true, record: true,
		sel: SelectOptions{Replace: []string{"c", "e"}}, resumed: []string{"a", "b", "c", "f"},
		want:    map[string]string{"a": resumed, "b": resumed, "c": "forced | forced by --replace (the state record had it unchanged)", "d": excluded, "e": "forced | forced by --replace", "f": "conditional | runs if e changes"},
		replace: []string{"c", "e"},
	}, {
		name: "--replace of a step when: excludes: excluded, not replaced", command: CommandApply,
		sel:  SelectOptions{Replace: []string{"d"}},
		want: map[string]string{"a": "run", "b": "run", "c": "conditional | runs if b changes", "d": excluded, "e": "run", "f": "conditional | runs if e changes"},
	}, {
		name: "--steps takes the steps named and their needs", command: CommandApply,
		sel:  SelectOptions{Steps: []string{"e"}},
		want: map[string]string{"a": "run", "b": "run", "c": notSelected, "d": notSelected, "e": "run", "f": notSelected},
	}, {
		name: "--steps --no-needs: a need neither selected nor done blocks", command: CommandApply, state: true, record: true,
		sel: SelectOptions{Steps: []string{"c", "f"}, NoNeeds: true}, resumed: []string{"a", "e"},
		want:    map[string]string{"a": notSelected, "b": notSelected, "c": "blocked | --no-needs: needs b, neither selected nor done", "d": notSelected, "e": notSelected, "f": "run"},
		refused: "--no-needs: c needs b, which is neither selected nor recorded done in the state record: select it too, or leave out --no-needs; nothing was run",
	}, {
		name: "--steps --no-needs offline with a record: nothing is blocked", command: CommandPlan, state: true,
		sel:  SelectOptions{Steps: []string{"c"}, NoNeeds: true},
		want: map[string]string{"a": notSelected, "b": notSelected, "c": "run", "d": notSelected, "e": notSelected, "f": notSelected},
	}, {
		name: "destroy: undo, left alone, excluded", command: CommandDestroy, state: true, record: true,
		resumed: []string{"a", "b"},
		want:    map[string]string{"a": "undo", "b": "undo", "c": "left alone | nothing to undo: destroy leaves rollout steps alone", "d": excluded, "e": "left alone | nothing to undo: destroy leaves job steps alone", "f": "left alone | nothing to undo: destroy leaves rollout steps alone"},
	}, {
		name: "destroy --steps takes the steps that need them", command: CommandDestroy,
		sel:  SelectOptions{Steps: []string{"e"}},
		want: map[string]string{"a": notSelected, "b": notSelected, "c": notSelected, "d": notSelected, "e": "left alone | nothing to undo: destroy leaves job steps alone", "f": "left alone | nothing to undo: destroy leaves rollout steps alone"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(fateTableSpec, "%STATE%", map[bool]string{true: "state: {}\n"}[tc.state], 1)
			doc, err := (&load.Loader{Steps: builtin.Registry}).Load(load.Options{File: "-", Stdin: strings.NewReader(text), Redactor: redact.New()})
			if err != nil {
				t.Fatal(err)
			}
			// spelled as the CLI spells its flags: the reasons read as
			// a user of kubectl khook reads them
			opts := tc.sel
			opts.Spelling = func(s Setting) string { return "--" + string(s) }
			sel, err := Resolve(doc, tc.command, opts)
			if err != nil {
				t.Fatal(err)
			}
			n := len(doc.Spec.Steps)
			var f Facts
			if tc.record {
				f.Resumed = make([]bool, n)
				for _, name := range tc.resumed {
					i, _ := doc.Graph.Index(name)
					f.Resumed[i] = true
				}
			}
			if tc.command == CommandDestroy {
				// apply: steps undo; the others have nothing to undo
				// (decided by hand here, where the run asks the
				// executors)
				f.Undoes = make([]bool, n)
				for i := range doc.Spec.Steps {
					f.Undoes[i] = doc.Spec.Steps[i].Type() == "apply"
				}
			}
			disp := Dispose(doc, tc.command, sel, f)
			if tc.changes != nil {
				ResolveTriggers(doc, disp, func(j int) Change { return tc.changes[doc.Spec.Steps[j].Name] })
			}
			c := &Cluster{doc: doc, red: redact.New()}
			var replaced []string
			for i := range doc.Spec.Steps {
				name := doc.Spec.Steps[i].Name
				got := disp[i].Fate.String()
				if r := disp[i].Reason(doc, i); r != "" {
					got += " | " + r
				}
				if got != tc.want[name] {
					t.Errorf("%s: %q, want %q", name, got, tc.want[name])
				}
				if c.request(i, 1, 0, disp[i], quiet).Replace {
					replaced = append(replaced, name)
				}
			}
			if !slices.Equal(replaced, tc.replace) {
				t.Errorf("requests saying --replace: %v, want %v", replaced, tc.replace)
			}
			if err := CheckBlocked(doc, disp); err == nil && tc.refused != "" || err != nil && err.Error() != tc.refused {
				t.Errorf("CheckBlocked: %v, want %q", err, tc.refused)
			}
		})
	}
}
