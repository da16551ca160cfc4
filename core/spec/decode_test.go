package spec_test

import (
	"fmt"
	"strings"
	"testing"

	"khook.io/core/spec"
	"khook.io/core/steps/builtin"
	"khook.io/core/steps/wait"
)

// kinds are the built-in step kinds, which the tests' specs use.
func kinds(t testing.TB) *spec.StepKinds {
	t.Helper()
	reg, err := builtin.Registry()
	if err != nil {
		t.Fatal(err)
	}
	return reg.Kinds()
}

const validDoc = "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps: [{name: a, wait: {for: delete, on: pods/x}}]\n"

// TestDecodeDocuments: a spec file is one YAML document; empty documents
// around it are nothing (as kubectl skips them), a second one is an error
// at the line where it starts.
func TestDecodeDocuments(t *testing.T) {
	tests := []struct {
		name, text string
		want       string // "" for no problem
	}{
		{"one document", validDoc, ""},
		{"leading separator", "---\n" + validDoc, ""},
		{"trailing separator", validDoc + "---\n", ""},
		{"trailing separator and comment", validDoc + "--- # end\n# nothing more\n", ""},
		{"document end marker", validDoc + "...\n", ""},
		{"empty documents around it", "---\n# header\n---\n" + validDoc + "---\n---\n~\n", ""},
		{"CRLF", strings.ReplaceAll("---\n"+validDoc+"---\n", "\n", "\r\n"), ""},
		{"YAML 1.2 directive", "%YAML 1.2\n---\n" + validDoc, ""},
		{"YAML 1.1 directive", "%YAML 1.1\n---\n" + validDoc, ""},
		{"YAML 2.0 directive", "%YAML 2.0\n---\n" + validDoc, "1:1: invalid YAML: found incompatible YAML document: the %YAML directive names a version other than 1.1 or 1.2"},
		{"second document", validDoc + "---\n" + validDoc, "5:1: a second YAML document starts here"},
		{"second document after an end marker", validDoc + "...\n---\nfoo: bar\n", "6:1: a second YAML document starts here"},
		{"second document without content before", "---\n" + validDoc + "--- # two\nkind: Khook\n", "6:1: a second YAML document starts here"},
		{"second document, a scalar", validDoc + "--- text\n", "5:1: a second YAML document starts here"},
		{"syntax error in the second document", validDoc + "---\nkind: [a\n", "6:7: invalid YAML: '[' is not closed"},
		{"empty", "", "1:1: the spec is empty"},
		{"only comments and separators", "# a\n---\n# b\n", "1:1: the spec is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, pos, errs := spec.Decode([]byte(tt.text), "f.yaml", nil, kinds(t))
			errs = append(errs, spec.Validate(s, pos, spec.ValidateOptions{})...)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("want no problem, got:\n%v", errs)
				}
				if s.Metadata.Name != "x" || len(s.Steps) != 1 {
					t.Fatalf("decoded %+v", s)
				}
				return
			}
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "f.yaml:"+tt.want) {
				t.Fatalf("want one problem f.yaml:%s..., got:\n%v", tt.want, errs)
			}
		})
	}
}

// TestRequiredAtTheDocument: a missing top-level field is reported at the
// document's first key, not without a line.
func TestRequiredAtTheDocument(t *testing.T) {
	s, pos, errs := spec.Decode([]byte("# comment\n\napiVersion: khook.io/v1\nkind: Khook\n"), "f.yaml", nil, kinds(t))
	errs = append(errs, spec.Validate(s, pos, spec.ValidateOptions{})...)
	want := "f.yaml:3:1: metadata is required\nf.yaml:3:1: steps is required"
	if got := errs.Sort().Error(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestAliasPositions: a problem in an aliased value is reported where the
// alias uses it.
func TestAliasPositions(t *testing.T) {
	text := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nx-args: &args [1, [2]]\nsteps:\n  - name: a\n    job: {image: *args, args: *args}\n"
	_, _, errs := spec.Decode([]byte(text), "f.yaml", nil, kinds(t))
	got := errs.Sort().Error()
	for _, want := range []string{
		`f.yaml:4:1: x-args: unknown field "x-args"`,
		"f.yaml:7:18: steps[0].job.image: must be a string, not a list",   // the alias
		"f.yaml:4:19: steps[0].job.args[1]: must be a string, not a list", // the element, where it is written
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestAliasBomb: an alias bomb is one problem, at the alias that expands
// most, however many fields reach it; decoding it costs no expansion.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps:\n")
	b.WriteString("  - name: a\n    patch: {target: a/b, patch: &l0 {a: [lol, lol, lol, lol, lol, lol, lol, lol, lol]}}\n")
	for i := 1; i <= 20; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9), ", ")
		fmt.Fprintf(&b, "  - name: s%d\n    patch: {target: a/b, patch: &l%d {a: [%s]}}\n", i, i, refs)
	}
	text := b.String()
	_, pos, errs := spec.Decode([]byte(text), "f.yaml", nil, kinds(t))
	if len(errs) != 1 || !pos.Failed("") {
		t.Fatalf("want one problem, got %d:\n%v", len(errs), errs)
	}
	line := strings.Count(text, "\n") // the last step's line
	want := fmt.Sprintf("f.yaml:%d:43: excessive aliasing: the alias *l19 expands to more than 10^", line)
	if !strings.HasPrefix(errs[0].Error(), want) {
		t.Fatalf("got  %v\nwant %s...", errs[0], want)
	}
}

// TestAliasesWithinReason: a document that reuses a large block through
// aliases, as specs do to share values, is no bomb.
func TestAliasesWithinReason(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps:\n  - name: s0\n    helm:\n      chart: oci://r/c:1\n      values: &v\n")
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, "        k%d: {a: 1, b: [x, y]}\n", i)
	}
	for i := 1; i < 20; i++ {
		fmt.Fprintf(&b, "  - name: s%d\n    helm: {chart: \"oci://r/c:1\", values: *v}\n", i)
	}
	_, _, errs := spec.Decode([]byte(b.String()), "f.yaml", nil, kinds(t))
	if len(errs) != 0 {
		t.Fatalf("want no problem, got:\n%v", errs)
	}
}

// TestAliasCycle: an alias inside its own anchor is reported, not
// followed forever.
func TestAliasCycle(t *testing.T) {
	text := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps:\n  - name: a\n    patch: {target: a/b, patch: &p {a: *p}}\n"
	_, _, errs := spec.Decode([]byte(text), "f.yaml", nil, kinds(t))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "steps[0].patch.patch: anchor 'p' value contains itself") {
		t.Fatalf("got %v", errs)
	}
}

// TestMergeKeys: << merges as yaml.v3 reads it into structs: keys written
// in the mapping win, then the first merged mapping.
func TestMergeKeys(t *testing.T) {
	text := `apiVersion: khook.io/v1
kind: Khook
metadata: {name: x}
steps:
  - name: a
    <<: &common {timeout: 10m, retries: 2, onError: continue}
    retries: 5
    wait: &w {for: delete, on: pods/x}
  - <<: [*common, {timeout: 1m, name: b}]
    wait: *w
  - name: c
    wait:
      <<: *w
      on: pods/y
    job:
      <<: {image: x}
  - name: d
    <<: [*common, 3]
    wait: {<<: *w}
  - name: e
    wait: &self {<<: *self}
`
	s, pos, errs := spec.Decode([]byte(text), "f.yaml", nil, kinds(t))
	errs = append(errs, spec.Validate(s, pos, spec.ValidateOptions{})...)
	want := "f.yaml:16:7: steps[2].job: a step has exactly one action key, but this one has wait and job\n" +
		"f.yaml:18:19: steps[3].<<: a merge key (<<) takes a mapping or a list of mappings, not a list holding a number\n" +
		"f.yaml:21:22: steps[4].wait.<<: a merge key (<<) cannot merge a mapping into itself"
	if got := errs.Sort().Error(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	a, b, c := s.Steps[0], s.Steps[1], s.Steps[2]
	if a.Timeout.Raw != "10m" || *a.Retries != 5 || a.OnError != "continue" {
		t.Errorf("a: %+v", a)
	}
	if bw := spec.BlockOf[wait.Wait](&b); b.Name != "b" || b.Timeout.Raw != "10m" || *b.Retries != 2 || bw.On != "pods/x" {
		t.Errorf("b: %+v %+v", b, bw)
	}
	if cw := spec.BlockOf[wait.Wait](&c); c.Type() != wait.Type || cw.On != "pods/y" || cw.For != "delete" {
		t.Errorf("c: %s %+v", c.Type(), cw)
	}
}
