package load

import (
	"bufio"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"khook.io/core/steps/builtin"
	"khook.io/core/vars"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/problems")

// ProblemsDir holds the invalid specs of TestProblemsGolden: each NAME.yaml
// with its exact report in NAME.golden and, optionally, its environment in
// NAME.env (KEY=VALUE lines). The e2e tests run the same cases through the
// built binaries.
const problemsDir = "testdata/problems"

// readEnv reads a case's environment file, if there is one.
func readEnv(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			env = append(env, line)
		}
	}
	return env
}

// TestProblemsGolden loads every invalid spec of testdata/problems and
// compares the whole report, positions and all, with its golden file
// (go test ./load -update rewrites them: review every changed line against
// what an editor shows).
func TestProblemsGolden(t *testing.T) {
	specs, err := filepath.Glob(filepath.Join(problemsDir, "*.yaml"))
	if err != nil || len(specs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, path := range specs {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			env := readEnv(t, filepath.Join(problemsDir, name+".env"))
			_, err := (&Loader{Steps: builtin.Registry}).Load(Options{File: path, Vars: vars.Options{Environ: env}})
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("want *InvalidError, got %T: %v", err, err)
			}
			got := strings.ReplaceAll(err.Error(), problemsDir+"/", "") + "\n"
			golden := filepath.Join(problemsDir, name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./load -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("report differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

// TestTrickyValid: specs close to the problems above that are valid.
func TestTrickyValid(t *testing.T) {
	tests := []struct {
		name, src string
		env       []string
	}{
		{"separators around the document", "---\n" + envelope + "  - name: a\n    wait: {for: delete, on: pods/x}\n---\n# end\n", nil},
		{"a set variable in a comment", envelope + "  # uses ${ENV}\n  - name: a\n    wait: {for: delete, on: pods/x}\n", []string{"KHOOK_VAR_ENV=prod"}},
		{"an escaped reference in a comment", envelope + "  # write $${ENV} here\n  - name: a\n    wait: {for: delete, on: pods/x}\n", nil},
		{"a substituted literal condition", envelope + "  - name: a\n    when: ${ENABLED:-false}\n    wait: {for: delete, on: pods/x}\n", []string{"KHOOK_VAR_ENABLED=true"}},
		{"secrets outside identifiers", envelope + "  - name: a-${ENV}\n    job:\n      image: busybox\n      args: [\"${TOKEN}\"]\n      env: {TOKEN: \"${TOKEN|b64enc}\"}\n    # the token is ${TOKEN}\n",
			[]string{"KHOOK_VAR_ENV=prod", "KHOOK_SECRET_TOKEN=hunter2"}},
		{"a non-secret value equal to a secret", envelope + "  - name: ${NAME}\n    wait: {for: delete, on: pods/x}\n", []string{"KHOOK_VAR_NAME=same", "KHOOK_SECRET_OTHER=same"}},
		{"an empty secret", envelope + "  - name: a\n    wait: {for: delete, on: pods/x}\n", []string{"KHOOK_SECRET_UNSET="}},
		{"aliases reused", "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: t}\nsteps:\n  - name: a\n    wait: &w {for: delete, on: pods/x}\n  - name: b\n    wait: *w\n", nil},
		{"non-ASCII in values", envelope + "  - name: a\n    job: {image: busybox, args: [\"héllo wörld — ✓\"]}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseSpec(t, tt.src, tt.env...); err != nil {
				t.Fatalf("want valid, got:\n%v", err)
			}
		})
	}
}

// TestVariableAndSpecProblemsAtOnce: a bad variable source does not hide
// the spec's problems.
func TestVariableAndSpecProblemsAtOnce(t *testing.T) {
	src := envelope + "  - name: a\n    wait: {for: ready, on: pods}\n"
	_, err := (&Loader{Steps: builtin.Registry}).Load(Options{File: "spec.yaml", ReadFile: func(string) ([]byte, error) { return []byte(src), nil },
		Vars: vars.Options{Set: []string{"NOVALUE"}}})
	want := "invalid spec: 2 problems:\n" +
		"spec.yaml: --set NOVALUE: want NAME=value\n" +
		`spec.yaml:7:17: steps[0] (a).wait.for: "ready": want condition=<Name>[=<value>], jsonpath=<expr>[=<value>] or delete`
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}
