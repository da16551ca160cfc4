package engine

import (
	"strings"
	"testing"

	"khook.io/core/load"
	"khook.io/core/steps/builtin"
)

// TestTimelineDefs: the timeline's edges are what a run waited for: the
// needs for apply, the needers for destroy (it undoes a step once every
// step that needs it is undone).
func TestTimelineDefs(t *testing.T) {
	doc, err := (&load.Loader{Steps: builtin.Registry}).Load(load.Options{File: "-", Stdin: strings.NewReader(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: defs}
steps:
  - {name: a, wait: {for: delete, on: pods}}
  - {name: b, needs: [a], wait: {for: delete, on: pods}}
  - {name: c, needs: [a, b], wait: {for: delete, on: pods}}
`)})
	if err != nil {
		t.Fatal(err)
	}
	needs := func(command string) string {
		var out []string
		for _, d := range TimelineDefs(doc, Command(command)) {
			out = append(out, d.Name+":"+strings.Join(d.Needs, "+"))
		}
		return strings.Join(out, " ")
	}
	if got, want := needs("apply"), "a: b:a c:a+b"; got != want {
		t.Errorf("apply: %s, want %s", got, want)
	}
	if got, want := needs("destroy"), "a:b+c b:c c:"; got != want {
		t.Errorf("destroy: %s, want %s", got, want)
	}
}
