package cli

import (
	"strings"
	"testing"
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
