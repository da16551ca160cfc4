package diff

import (
	"strings"
	"unicode/utf8"

	"khook.io/core/redact"
)

// MinLearned is the shortest value Learn registers, in characters (white
// space around it not counted): the rule khook applies to secret variables
// (a shorter value would mask ordinary text everywhere).
const MinLearned = 3

// Learn registers with red what live holds where desired holds a
// registered value. desired is what khook writes now (an object of its
// own manifests, a patch body, a chart's values), live what the cluster
// holds (the object as it is, a release's previous values). Where khook
// writes a secret, the cluster holds a secret too: the same one, or the
// value of a secret variable before it was rotated, which this run was
// never given. Once registered, that value is masked in everything khook
// prints, whichever step or object shows it (a diff's context lines, the
// value a wait saw), in every form the redactor knows.
//
// A string field is compared with the string khook writes: only the part
// of the live text where the two differ around the secret is registered
// (a config file holding a secret teaches the old secret, not the whole
// old file). The last-applied-configuration annotation, a copy of the
// manifest khook applied before, is read at the same fields.
func Learn(red *redact.Redactor, desired, live map[string]any) {
	if red == nil || desired == nil || live == nil {
		return
	}
	paths := secretPaths(desired, red)
	if len(paths) == 0 {
		return
	}
	for _, p := range dropAnnotationPaths(paths) {
		learnAt(red, desired, live, p)
	}
	if s, ok := annotation(live); ok {
		if j := parseJSON(s, true); j != nil {
			for _, p := range dropAnnotationPaths(paths) {
				learnAt(red, desired, j, p)
			}
		}
	}
}

func learnAt(red *redact.Redactor, desired, live map[string]any, p FieldPath) {
	lv, ok := get(live, p)
	if !ok {
		return
	}
	switch lv.(type) {
	case map[string]any, []any, nil:
		return
	}
	dv, _ := get(desired, p)
	ds, dok := dv.(string)
	ls, lok := lv.(string)
	if !dok || !lok {
		learnValue(red, scalar(lv))
		return
	}
	if ds == ls || len(red.Occurrences(ls)) > 0 {
		return // the secret khook writes now: known already
	}
	learnValue(red, changedMiddle(red, ds, ls))
}

// changedMiddle is the part of live that differs from desired around the
// registered values desired holds: the old value where the new one sits.
func changedMiddle(red *redact.Redactor, desired, live string) string {
	sp := spans(red, desired)
	p, q := commonPrefix(desired, live), commonSuffix(desired, live)
	if len(sp) > 0 {
		p, q = min(p, sp[0][0]), min(q, len(desired)-sp[len(sp)-1][1])
	}
	for p > 0 && !runeStart(live, p) {
		p--
	}
	for q > 0 && !runeStart(live, len(live)-q) {
		q--
	}
	if p+q > len(live) {
		return ""
	}
	return live[p : len(live)-q]
}

func learnValue(red *redact.Redactor, v string) {
	if utf8.RuneCountInString(strings.TrimSpace(v)) < MinLearned {
		return
	}
	red.Add(v)
}
