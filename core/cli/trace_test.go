package cli

import (
	"strings"
	"testing"

	"khook.io/core/load"
)

// TestTraceFlags: --trace-file and --timeline need a name; --timeline
// draws one cluster's run, so --contexts refuses it (exit 2).
func TestTraceFlags(t *testing.T) {
	for _, c := range []struct {
		f     TraceFlags
		fleet bool
		want  string
	}{
		{TraceFlags{}, false, ""},
		{TraceFlags{File: "t.jsonl", Timeline: "t.svg"}, false, ""},
		{TraceFlags{File: "t.jsonl"}, true, ""},
		{TraceFlags{File: " "}, false, "--trace-file needs a file name"},
		{TraceFlags{Timeline: "t.html"}, true, "--timeline draws one cluster's run"},
	} {
		err := c.f.check(c.fleet)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v fleet %v: %v", c.f, c.fleet, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || exitCode(err, ExitFailed) != ExitInvalid):
			t.Errorf("%+v fleet %v: %v, want a usage error %q", c.f, c.fleet, err, c.want)
		}
	}
}

// TestTimelineDefs: the timeline's edges are what a run waited for: the
// needs for apply, the needers for destroy (it undoes a step once every
// step that needs it is undone).
func TestTimelineDefs(t *testing.T) {
	doc, err := builtinLoader().Load(load.Options{File: "-", Stdin: strings.NewReader(`apiVersion: khook.io/v1
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
		for _, d := range timelineDefs(doc, command) {
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
