package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"khook.io/core/load"
	"khook.io/core/render"
	"khook.io/core/steps/builtin"
)

// builtinLoader loads specs whose steps are the kinds khook ships.
func builtinLoader() *load.Loader { return &load.Loader{Steps: builtin.Registry} }

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// run executes the command tree in-process and returns stdout, stderr and
// the exit code.
func runCLI(t *testing.T, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), Config{
		Name:    "kubectl khook",
		In:      strings.NewReader(stdin),
		Out:     &out,
		ErrOut:  &errOut,
		Environ: append([]string{"PATH=/usr/bin"}, env...),
		Steps:   builtin.Registry,
	}, args)
	return out.String(), errOut.String(), code
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cli -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./cli -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestGoldenOutputs(t *testing.T) {
	spec := "testdata/golden-spec.yaml"
	tests := []struct {
		golden string
		env    []string
		args   []string
	}{
		{"plan.txt", nil, []string{"plan", "-f", spec, "--offline"}},
		{"plan-argocd.txt", []string{"KHOOK_VAR_ENABLE_ARGOCD=true"}, []string{"plan", "-f", spec}},
		{"plan.json", nil, []string{"plan", "-f", spec, "-o", "json"}},
		{"plan.yaml", nil, []string{"plan", "-f", spec, "-o", "yaml"}},
		{"graph.mmd", nil, []string{"graph", "-f", spec}},
		{"graph.dot", nil, []string{"graph", "-f", spec, "--format", "dot"}},
		{"validate.txt", nil, []string{"validate", "-f", spec}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			out, errOut, code := runCLI(t, tt.env, "", tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, tt.golden, out)
		})
	}
}

func TestPlanJSONShape(t *testing.T) {
	out, errOut, code := runCLI(t, nil, "", "plan", "-f", "testdata/golden-spec.yaml", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Name  string `json:"name"`
		Steps []map[string]any
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Name != "golden" || len(doc.Steps) != 5 {
		t.Fatalf("unexpected plan: %s", out)
	}
	for _, s := range doc.Steps {
		for _, k := range []string{"name", "type", "level", "needs", "action"} {
			if _, ok := s[k]; !ok {
				t.Errorf("step %v lacks %q", s["name"], k)
			}
		}
		if s["name"] == "argocd" && (s["action"] != "skip" || s["reason"] == "") {
			t.Errorf("a when-excluded step must be action skip with a reason, got %v", s)
		}
	}
}

func TestExitCodes(t *testing.T) {
	bad := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps: [{name: a}]\n"
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		inErr string
	}{
		{"valid", "", []string{"validate", "-f", "testdata/golden-spec.yaml"}, 0, ""},
		{"invalid spec", bad, []string{"validate", "-f", "-"}, 2, "<stdin>:4:9: steps[0] (a): a step needs exactly one action key"},
		{"invalid spec json", bad, []string{"validate", "-f", "-", "-o", "json"}, 2, ""},
		{"no file flag", "", []string{"plan"}, 2, "no spec given"},
		{"missing file", "", []string{"plan", "-f", "testdata/nope.yaml"}, 1, "read spec"},
		{"unknown flag", "", []string{"plan", "--nope"}, 2, "unknown flag: --nope"},
		{"bad output", "", []string{"plan", "-f", "x", "-o", "xml"}, 2, "must be one of text|json|yaml"},
		{"unknown command", "", []string{"aply"}, 2, "unknown command \"aply\""},
		{"positional argument", "", []string{"validate", "spec.yaml"}, 2, "pass the spec with -f"},
		{"bad --set", "", []string{"validate", "-f", "testdata/golden-spec.yaml", "--set", "NOVALUE"}, 2, "NOVALUE"},
		{"same prefixes", "", []string{"validate", "-f", "testdata/golden-spec.yaml", "--var-prefix", "X_", "--secret-prefix", "X_"}, 2, "must differ"},
		{"log level too high", "", []string{"validate", "-f", "testdata/golden-spec.yaml", "-v", "8"}, 2, "-v 8: the log level is 0 to 7"},
		{"negative log level", "", []string{"validate", "-f", "testdata/golden-spec.yaml", "-v=-1"}, 2, "the log level is 0 to 7"},
		{"highest log level", "", []string{"validate", "-f", "testdata/golden-spec.yaml", "-v", "7"}, 0, ""},
		{"version", "", []string{"version"}, 0, ""},
		{"schema", "", []string{"schema"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, errOut)
			}
			if !strings.Contains(errOut, tt.inErr) {
				t.Fatalf("stderr lacks %q:\n%s", tt.inErr, errOut)
			}
		})
	}
}

// TestFiveMistakesFiveErrors: every problem at once, each positioned.
func TestFiveMistakesFiveErrors(t *testing.T) {
	spec := `apiVersion: khook.io/v1
kind: Khook
metadata:
  name: five
steps:
  - name: cilium
    needs: [remove-aws-node]
    helm:
      chart: cilium
      namespce: kube-system
  - name: wait
    timeout: soon
    wait:
      for: ready
      on: pods
`
	_, errOut, code := runCLI(t, nil, spec, "validate", "-f", "-")
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	want := []string{
		`<stdin>:7:13: steps[0] (cilium).needs[0]: no step named "remove-aws-node"`,
		`<stdin>:9:7: steps[0] (cilium).helm: repo is required for the bare chart name "cilium"`,
		`<stdin>:10:7: steps[0] (cilium).helm.namespce: unknown field "namespce" (did you mean "namespace"?)`,
		`<stdin>:12:14: steps[1] (wait).timeout: invalid duration "soon"`,
		`<stdin>:14:12: steps[1] (wait).wait.for: "ready": want condition=<Name>[=<value>], jsonpath=<expr>[=<value>] or delete`,
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("missing %q", w)
		}
	}
	if !strings.Contains(errOut, "5 problems") {
		t.Errorf("want exactly five problems:\n%s", errOut)
	}
}

// TestPlantedSecretNeverPrinted plants a secret through KHOOK_SECRET_TOKEN,
// used raw, through b64enc and inside URL userinfo, and searches every
// output of every offline command for it and its encodings, valid and
// invalid specs alike.
func TestPlantedSecretNeverPrinted(t *testing.T) {
	const secret = "s3cr3t/T0k3n+x=y"
	forms := []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), url.QueryEscape(secret), url.PathEscape(secret)}
	env := []string{"KHOOK_SECRET_TOKEN=" + secret}
	spec := "testdata/secret-spec.yaml"
	invalidSpec := `apiVersion: khook.io/v1
kind: Khook
metadata:
  name: leaky
steps:
  - name: a
    helm:
      chart: app
      repo: https://ci:${TOKEN|urlquery}@charts.example.com
      namespace: ${TOKEN}
      release: ${TOKEN|b64enc}
      auth: {username: u, password: "${TOKEN}"}
  - name: b
    job: {image: "${TOKEN} ${MISSING}"}
`
	runs := []struct {
		stdin string
		args  []string
	}{
		{"", []string{"validate", "-f", spec}},
		{"", []string{"validate", "-f", spec, "-o", "json"}},
		{"", []string{"plan", "-f", spec}},
		{"", []string{"plan", "-f", spec, "-o", "json"}},
		{"", []string{"plan", "-f", spec, "-o", "yaml"}},
		{"", []string{"plan", "-f", spec, "--offline"}},
		{"", []string{"graph", "-f", spec}},
		{"", []string{"graph", "-f", spec, "--format", "dot"}},
		{invalidSpec, []string{"validate", "-f", "-"}},
		{invalidSpec, []string{"validate", "-f", "-", "-o", "json"}},
		{invalidSpec, []string{"plan", "-f", "-", "-o", "json"}},
		{invalidSpec, []string{"graph", "-f", "-"}},
	}
	for _, r := range runs {
		out, errOut, code := runCLI(t, env, r.stdin, r.args...)
		if r.stdin == "" && code != 0 {
			t.Fatalf("%v: exit %d: %s", r.args, code, errOut)
		}
		if r.stdin != "" && code != 2 {
			t.Fatalf("%v: exit %d, want 2: %s", r.args, code, errOut)
		}
		if r.stdin == "" && !strings.Contains(out+errOut, "***") && r.args[0] == "plan" {
			t.Errorf("%v: expected masked values in the plan:\n%s", r.args, out)
		}
		for _, f := range forms {
			if strings.Contains(out, f) || strings.Contains(errOut, f) {
				t.Errorf("%v leaked %q:\nstdout:\n%s\nstderr:\n%s", r.args, f, out, errOut)
			}
		}
	}
}

// TestValidateJSONNamesTheStep: -o json keeps the field path as it is and
// gives the step's name beside it.
func TestValidateJSONNamesTheStep(t *testing.T) {
	spec := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps:\n  - name: cilium\n    helm: {chart: cilium}\n  - wait: {for: delete, on: pods/x}\n"
	out, _, code := runCLI(t, nil, spec, "validate", "-f", "-", "-o", "json")
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	var res struct {
		Problems []render.ValidateProblem `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	want := []render.ValidateProblem{
		{File: "-", Line: 6, Column: 11, Path: "steps[0].helm", Step: "cilium", Message: `repo is required for the bare chart name "cilium" (or write a local path ./cilium, or an oci:// reference)`},
		{File: "-", Line: 7, Column: 5, Path: "steps[1]", Message: "name is required"},
	}
	if len(res.Problems) != len(want) {
		t.Fatalf("problems: %+v", res.Problems)
	}
	for i := range want {
		if res.Problems[i] != want[i] {
			t.Errorf("problem %d:\n got %+v\nwant %+v", i, res.Problems[i], want[i])
		}
	}
}
