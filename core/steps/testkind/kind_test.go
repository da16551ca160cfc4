package testkind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	yaml "go.yaml.in/yaml/v3"

	"khook.io/core/cli"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/state"
	"khook.io/core/step"
	"khook.io/core/steps/builtin"
	"khook.io/core/vars"
)

// khook runs the command line in-process with the built-in kinds plus
// configMap:, and returns its exit code, standard output and error.
func khook(t *testing.T, steps func() (*step.Registry, error), env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Execute(context.Background(), cli.Config{
		Name: "kubectl khook", In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Environ: env, Steps: steps,
	}, args)
	return code, out.String(), errOut.String()
}

// parse loads spec text with the built-in kinds plus configMap:.
func parse(t *testing.T, dir, src string, env ...string) (*load.Document, *redact.Redactor, error) {
	t.Helper()
	red := redact.New()
	set, err := vars.Resolve(vars.Options{Environ: env}, red)
	if err != nil {
		t.Fatal(err)
	}
	l := load.Loader{Steps: registry}
	doc, err := l.Parse([]byte(src), "spec.yaml", dir, set, red)
	return doc, red, err
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const head = "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: kinds}\nsteps:\n"

// TestTestKindValidates: the kind's own rules and the spec's rules about
// action keys apply to it, every problem at its file:line:col, all at
// once: its Check (name, namespace, keys, file), its Hint (skipIf), the
// misspelled key, the action keys a step may have, and its identifier
// field.
func TestTestKindValidates(t *testing.T) {
	dir := t.TempDir()
	_, _, err := parse(t, dir, head+`  - name: settings
    configMap:
      name: App_Settings
      namespace: Apps
      skipIf: exists
      data:
        level: info
        bad key: x
      fromFile: ./missing.txt
  - name: other
    configmap: {name: x}
  - name: none
    needs: [other]
  - name: both
    configMap: {}
    wait: {for: delete, on: pods/x}
  - name: secret
    configMap: {name: "${TOKEN}"}
`, "KHOOK_SECRET_TOKEN=token-value-123")
	want := "invalid spec: 9 problems:\n" +
		`spec.yaml:7:13: steps[0] (settings).configMap.name: "App_Settings" is not a valid ConfigMap name (a lowercase DNS name)` + "\n" +
		`spec.yaml:8:18: steps[0] (settings).configMap.namespace: "Apps" is not a valid namespace (RFC 1123 label: lowercase letters, digits and '-', at most 63)` + "\n" +
		`spec.yaml:9:7: steps[0] (settings).configMap.skipIf: unknown field "skipIf": configMap steps have no skipIf: writing the same data again changes nothing` + "\n" +
		`spec.yaml:12:18: steps[0] (settings).configMap.data.bad key: "bad key" is not a valid ConfigMap key (letters, digits, '-', '_' and '.')` + "\n" +
		`spec.yaml:13:17: steps[0] (settings).configMap.fromFile: file "./missing.txt": no such file or directory` + "\n" +
		`spec.yaml:15:5: steps[1] (other).configmap: unknown field "configmap" (did you mean "configMap"?)` + "\n" +
		`spec.yaml:16:5: steps[2] (none): a step needs exactly one action key: helm, apply, delete, patch, wait, rollout, job or configMap` + "\n" +
		`spec.yaml:19:16: steps[3] (both).configMap: a step has exactly one action key, but this one has wait and configMap` + "\n" +
		`spec.yaml:22:24: steps[4] (secret).configMap.name: uses the secret variable TOKEN: a ConfigMap name is an identifier: it names the object in the cluster, so it cannot hold a secret (use a plain variable)`
	var inv *load.InvalidError
	if !errors.As(err, &inv) || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}

	// a valid step, checked by the same rules
	write(t, filepath.Join(dir, "extra.txt"), "hello\n")
	doc, _, err := parse(t, dir, head+"  - name: settings\n    configMap: {name: app-settings, namespace: apps, data: {level: info}, fromFile: ./extra.txt}\n")
	if err != nil {
		t.Fatal(err)
	}
	if st := &doc.Spec.Steps[0]; st.Type() != Type || st.Action().(*ConfigMap).Name != "app-settings" {
		t.Errorf("decoded %s %+v", st.Type(), st.Action())
	}
}

// TestTestKindCommands: the offline commands take the kind from the
// registry they are given: validate, plan (its summary) and graph.
func TestTestKindCommands(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "extra.txt"), "hello\n")
	file := filepath.Join(dir, "spec.yaml")
	write(t, file, head+"  - name: settings\n    configMap: {name: app-settings, namespace: apps, data: {level: info}, fromFile: ./extra.txt}\n"+
		"  - name: after\n    needs: [settings]\n    wait: {for: delete, on: pods/x, namespace: apps}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate"}, "is valid: kinds, 2 steps in 2 levels"},
		{[]string{"plan"}, "0      settings  configMap  run     -         ConfigMap app-settings in apps with 2 keys, one from ./extra.txt\n"},
		{[]string{"graph"}, `s0["settings<br/>configMap"]`},
	} {
		code, out, errOut := khook(t, registry, []string{}, append(tc.args, "-f", file)...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want 0 and %q in:\n%s%s", tc.args, code, tc.want, out, errOut)
		}
	}
	// without the kind registered, the same spec is invalid (exit 2)
	code, _, errOut := khook(t, builtin.Registry, []string{}, "validate", "-f", file)
	if want := `spec.yaml:6:5: steps[0] (settings).configMap: unknown field "configMap"`; code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("built-in kinds only: exit %d, want 2 and %q in:\n%s", code, want, errOut)
	}
}

// TestTestKindHashes: the step's input hash covers its block and the file
// its executor declares (step.InputDeclarer): it changes when either
// changes, and comes back when they do.
func TestTestKindHashes(t *testing.T) {
	dir := t.TempDir()
	extra := filepath.Join(dir, "extra.txt")
	reg, err := registry()
	if err != nil {
		t.Fatal(err)
	}
	hash := func(data string) string {
		t.Helper()
		doc, red, err := parse(t, dir, head+"  - name: settings\n    configMap: {name: app-settings, data: {level: "+data+"}, fromFile: ./extra.txt}\n")
		if err != nil {
			t.Fatal(err)
		}
		h := &state.Hasher{BaseDir: dir, Redactor: red, Salt: []byte("0123456789abcdef"), Steps: reg}
		in, err := h.Inputs(context.Background(), &doc.Spec.Steps[0])
		if err != nil || in.Err != nil || in.Hash == "" || len(in.HashCannotSee) > 0 {
			t.Fatalf("inputs %+v, %v", in, err)
		}
		canon, err := state.Canonical(&doc.Spec.Steps[0])
		if want := `{"name":"settings","type":"configMap","action":{"Name":"app-settings","Namespace":"","Data":{"level":"` + data + `"},"FromFile":"./extra.txt"}}`; err != nil || canon != want {
			t.Errorf("canonical %s, %v\nwant      %s", canon, err, want)
		}
		return in.Hash
	}
	write(t, extra, "one\n")
	first := hash("info")
	write(t, extra, "two\n")
	fileChanged := hash("info")
	blockChanged := hash("debug")
	write(t, extra, "one\n")
	again := hash("info")
	if first == fileChanged || first == blockChanged || fileChanged == blockChanged || again != first {
		t.Errorf("hashes: first %s, file changed %s, block changed %s, back %s", first, fileChanged, blockChanged, again)
	}
}

// TestTestKindInSchema: khook schema describes the kind from its block's
// tags (a $defs entry, the action key with its description, one more
// oneOf alternative), and a spec using it validates against the schema
// while a misspelled field of its block does not. Without the kind
// registered, the schema has none of it.
func TestTestKindInSchema(t *testing.T) {
	code, out, errOut := khook(t, registry, []string{}, "schema")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var stepDef struct {
		Properties map[string]any   `json:"properties"`
		OneOf      []map[string]any `json:"oneOf"`
	}
	if err := json.Unmarshal(doc.Defs["Step"], &stepDef); err != nil {
		t.Fatal(err)
	}
	if got, want := stepDef.Properties[Type], map[string]any{"$ref": "#/$defs/ConfigMap", "description": "write a ConfigMap (a kind of the tests)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("steps[].configMap: %v, want %v", got, want)
	}
	if n := len(stepDef.OneOf); n != 8 || !reflect.DeepEqual(stepDef.OneOf[n-1], map[string]any{"required": []any{Type}}) {
		t.Errorf("step oneOf: %v", stepDef.OneOf)
	}
	var cmDef struct {
		Required   []string       `json:"required"`
		Properties map[string]any `json:"properties"`
		Additional bool           `json:"additionalProperties"`
	}
	if err := json.Unmarshal(doc.Defs["ConfigMap"], &cmDef); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cmDef.Required, []string{"name"}) || len(cmDef.Properties) != 4 || cmDef.Additional {
		t.Errorf("$defs.ConfigMap: %s", doc.Defs["ConfigMap"])
	}

	s := compileSchema(t, out)
	for _, tc := range []struct {
		doc   string
		valid bool
	}{
		{head + "  - name: a\n    configMap: {name: x, data: {a: b}}\n", true},
		{head + "  - name: a\n    configMap: {name: x, dta: {a: b}}\n", false},
		{head + "  - name: a\n    configMap: {data: {a: b}}\n", false},
	} {
		var v any
		if err := yaml.Unmarshal([]byte(tc.doc), &v); err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); (err == nil) != tc.valid {
			t.Errorf("valid %v, want %v: %v\n%s", err == nil, tc.valid, err, tc.doc)
		}
	}

	_, builtinOut, _ := khook(t, builtin.Registry, []string{}, "schema")
	if strings.Contains(builtinOut, "ConfigMap") || strings.Contains(builtinOut, `"`+Type+`"`) {
		t.Error("the built-in schema describes configMap:")
	}
}

func compileSchema(t *testing.T, text string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("https://khook.io/schema/v1/khook.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("https://khook.io/schema/v1/khook.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
