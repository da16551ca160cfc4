package schema

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	yaml "go.yaml.in/yaml/v3"

	"khook.io/core/spec"
	"khook.io/core/steps/builtin"
)

var update = flag.Bool("update", false, "rewrite docs/schema/v1/khook.json from the code")

const committed = "../../docs/schema/v1/khook.json"

// TestCommittedSchemaIsCurrent fails when docs/schema/v1/khook.json is not
// what the code generates. Run `go test ./schema -update` after changing
// the spec types.
func TestCommittedSchemaIsCurrent(t *testing.T) {
	got := builtinJSON(t)
	if *update {
		if err := os.MkdirAll(filepath.Dir(committed), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(committed, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatalf("read the committed schema: %v (run go test ./schema -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the generated schema: run `go test ./schema -update` and commit the result", committed)
	}
}

// builtinJSON is the schema of a spec whose steps are the kinds khook
// ships.
func builtinJSON(t *testing.T) []byte {
	t.Helper()
	reg, err := builtin.Registry()
	if err != nil {
		t.Fatal(err)
	}
	b, err := JSON(reg.Kinds())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(builtinJSON(t)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(ID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(ID)
	if err != nil {
		t.Fatalf("the schema does not compile as draft 2020-12: %v", err)
	}
	return s
}

// yamlToJSONValue decodes YAML (1.2, as khook reads it) into the generic
// value the validator takes.
func yamlToJSONValue(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExamplesValidateAgainstSchema checks every examples/*.yaml, as
// written (before variable substitution, as an editor sees it).
func TestExamplesValidateAgainstSchema(t *testing.T) {
	s := compile(t)
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 7 {
		t.Fatalf("want the quickstart and at least six examples, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			if first != "# yaml-language-server: $schema="+ID {
				t.Errorf("first line is %q, want the yaml-language-server modeline", first)
			}
			if err := s.Validate(yamlToJSONValue(t, data)); err != nil {
				t.Fatalf("does not validate against the schema:\n%v", err)
			}
		})
	}
}

// TestSchemaRejects proves the schema carries the rules it claims.
func TestSchemaRejects(t *testing.T) {
	s := compile(t)
	head := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps:\n"
	tests := []struct {
		name, doc string
		valid     bool
	}{
		{"valid", head + "  - {name: a, wait: {for: delete, on: pods/x}}\n", true},
		{"variables in typed fields", head + "  - {name: a, retries: '${R:-1}', timeout: '${T:-5m}', wait: {for: delete, on: pods/x, allNamespaces: '${ALL}'}}\n", true},
		{"wrong apiVersion", strings.Replace(head, "khook.io/v1", "khook.io/v2", 1) + "  - {name: a, wait: {for: delete, on: pods/x}}\n", false},
		{"no action", head + "  - {name: a}\n", false},
		{"two actions", head + "  - {name: a, wait: {for: delete, on: pods/x}, job: {image: x}}\n", false},
		{"unknown field", head + "  - {name: a, wait: {for: delete, on: pods/x, namespce: y}}\n", false},
		{"helm skipIf word", head + "  - {name: a, helm: {chart: ./c, skipIf: exists}}\n", false},
		{"apply skipIf word", head + "  - {name: a, apply: {manifests: [{file: ./m.yaml}], skipIf: exists}}\n", true},
		{"job skipIf word", head + "  - {name: a, job: {image: x, skipIf: installed}}\n", false},
		{"manifest entry with two sources", head + "  - {name: a, apply: {manifests: [{file: ./m.yaml, url: 'https://x'}]}}\n", false},
		{"values entry with no source", head + "  - {name: a, helm: {chart: ./c, valuesFrom: [{}]}}\n", false},
		{"delete two forms", head + "  - {name: a, delete: {resource: pods/x, release: y}}\n", false},
		{"delete release with selector", head + "  - {name: a, delete: {release: y, selector: a=b}}\n", false},
		{"json patch needs a list", head + "  - {name: a, patch: {target: d/x, type: json, patch: {a: 1}}}\n", false},
		{"strategic patch needs a mapping", head + "  - {name: a, patch: {target: d/x, patch: [{op: add, path: /a, value: 1}]}}\n", false},
		{"json patch op enum", head + "  - {name: a, patch: {target: d/x, type: json, patch: [{op: upsert, path: /a}]}}\n", false},
		{"rollout both", head + "  - {name: a, rollout: {restart: deployment/x, status: deployment/x, namespace: a}}\n", false},
		{"onError enum", head + "  - {name: a, onError: skip, wait: {for: delete, on: pods/x}}\n", false},
		{"kustomize must be local", head + "  - {name: a, apply: {manifests: [{kustomize: 'github.com/x/y'}]}}\n", false},
		{"job image required", head + "  - {name: a, job: {command: [sh]}}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate(yamlToJSONValue(t, []byte(tt.doc)))
			if tt.valid && err != nil {
				t.Fatalf("want valid, got %v", err)
			}
			if !tt.valid && err == nil {
				t.Fatal("want a schema violation, got none")
			}
		})
	}
}

type Block struct {
	A string `yaml:"a" doc:"a"`
}

// packageBlock is a new package-level Block, which TestKindsOfOneName's
// own Block hides.
func packageBlock() any { return new(Block) }

// TestKindsOfOneName: the schema names its definitions after the spec's
// structs, so two kinds whose blocks are different structs of one name,
// or an unnamed struct, are refused, not merged.
func TestKindsOfOneName(t *testing.T) {
	type Block struct {
		B string `yaml:"b" doc:"b"`
	}
	for _, tc := range []struct {
		block any
		want  string
	}{
		{new(Block), "two spec structs are named Block"},
		{&struct{}{}, "needs a name of its own"},
	} {
		kinds, err := spec.NewStepKinds(spec.StepKind{Name: "one", Block: packageBlock()}, spec.StepKind{Name: "other", Block: tc.block})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := JSON(kinds); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
}
