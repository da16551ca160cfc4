package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/render"
)

// TestValidateOptions: validate's options, built without the command
// tree, check a spec from a file or standard input and report every
// problem: as the error (exit 2 through Execute), or as JSON.
func TestValidateOptions(t *testing.T) {
	bad := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps:\n  - name: a\n  - name: a\n    wait: {for: delete, on: pods/x}\n"
	for _, tc := range []struct {
		name, file, stdin, output string
		out                       string // what standard output holds
		problems                  int    // in the error
		code                      int    // of an *ExitError
	}{
		{name: "valid", file: "testdata/golden-spec.yaml", output: "text", out: "testdata/golden-spec.yaml is valid: golden, 5 steps in 4 levels.\n"},
		{name: "invalid", file: "-", stdin: bad, output: "text", problems: 2},
		{name: "invalid json", file: "-", stdin: bad, output: "json", out: `"valid": false`, problems: 2, code: ExitInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			f := NewValidateFlags()
			f.Spec.File = tc.file
			if err := f.Output.Set(tc.output); err != nil {
				t.Fatal(err)
			}
			o, err := f.ToOptions(streams, SpecSource{Loader: builtinLoader(), Stdin: strings.NewReader(tc.stdin), Redactor: redact.New()})
			if err != nil {
				t.Fatal(err)
			}
			err = o.Run(context.Background())
			if !strings.Contains(out.String(), tc.out) {
				t.Errorf("output lacks %q:\n%s", tc.out, out.String())
			}
			var inv *load.InvalidError
			var exit *ExitError
			switch {
			case tc.problems == 0 && err != nil:
				t.Fatalf("Run: %v", err)
			case tc.problems == 0:
				return
			case !errors.As(err, &inv):
				t.Fatalf("want an *load.InvalidError, got %v", err)
			case len(inv.Problems) != tc.problems:
				t.Errorf("%d problems, want %d: %v", len(inv.Problems), tc.problems, err)
			case tc.code != 0 && (!errors.As(err, &exit) || exit.Code != tc.code || !exit.Silent):
				t.Errorf("want a silent exit %d, got %#v", tc.code, err)
			}
			if tc.output == "json" {
				var res render.ValidateReport
				if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Problems) != tc.problems {
					t.Errorf("JSON problems %+v, %v", res.Problems, err)
				}
			}
		})
	}
}

// TestSpecFlagsToOptions: the spec flags are checked once, in ToOptions,
// before anything is read.
func TestSpecFlagsToOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*SpecFlags)
		err  string
	}{
		{"no file", func(f *SpecFlags) { f.File = "" }, "no spec given"},
		{"empty prefix", func(f *SpecFlags) { f.VarPrefix = "" }, "must not be empty"},
		{"same prefixes", func(f *SpecFlags) { f.SecretPrefix = f.VarPrefix }, "must differ"},
		{"fine", func(*SpecFlags) {}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewSpecFlags()
			f.File = "spec.yaml"
			tc.edit(&f)
			_, err := f.ToOptions(SpecSource{})
			var exit *ExitError
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &exit) || exit.Code != ExitInvalid):
				t.Errorf("want exit 2 with %q, got %v", tc.err, err)
			}
		})
	}
}
