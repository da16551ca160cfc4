package spec_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"khook.io/core/spec"
)

// validateText decodes and validates a spec, returning its problems, one
// per line as printed ("file:line:col: path: message").
func validateText(t *testing.T, text string, mapPos spec.PosMapper, dir string) []string {
	t.Helper()
	s, pos, errs := spec.Decode([]byte(text), "spec.yaml", mapPos, kinds(t))
	if len(errs) > 0 {
		t.Fatalf("decode: %v", errs)
	}
	var out []string
	for _, e := range spec.Validate(s, pos, spec.ValidateOptions{BaseDir: dir}).Sort() {
		out = append(out, e.Error())
	}
	return out
}

const manifestsHead = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: t}
steps:
  - name: a
    apply:
      manifests:
`

// Problems inside an inline manifest written as a block (inline: |) are
// reported at their own line and column of the spec file, from the same
// splitter apply uses: "--- # c" separates documents, and what kubectl
// would silently drop is an error.
func TestValidateInlineManifestPositions(t *testing.T) {
	cases := []struct {
		name, manifests string
		want            []string
	}{
		{"commented separator, second object without a name", `        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: a}
            --- # the second
            apiVersion: v1
            kind: ConfigMap
`, []string{"spec.yaml:13:13: steps[0].apply.manifests[0].inline: inline manifest, document 2 (line 5): missing metadata.name"}},
		{"YAML syntax error, parser", `        - inline: |
            apiVersion: v1
            kind: List
            items:
              - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
              x: 1
`, []string{`spec.yaml:13:15: steps[0].apply.manifests[0].inline: inline manifest, document 1: invalid YAML at line 5: did not find expected '-' indicator`}},
		{"YAML syntax error, scanner, in the second document", `        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: a}
            ---
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: b
               labels: {}
`, []string{`spec.yaml:17:16: steps[0].apply.manifests[0].inline: inline manifest, document 2: invalid YAML at line 9: mapping values are not allowed in this context`}},
		{"unclosed flow", `        - inline: |

            apiVersion: v1
            kind: ConfigMap
            metadata: {name: a
`, []string{`spec.yaml:12:13: steps[0].apply.manifests[0].inline: inline manifest, document 1: invalid YAML at line 4: did not find expected ',' or '}'`}},
		{"a document after a document end marker", `        - inline: |-
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: a}
            ...
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: b}
`, []string{`spec.yaml:12:13: steps[0].apply.manifests[0].inline: inline manifest, document 1: content after the document end marker "..." at line 4: kubectl would read only the document before it and silently drop the rest; separate documents with "---"`}},
		{"invalid separator, every problem", `        - inline: |
            kind: ConfigMap
            metadata: {name: a}
            --- !tag
            apiVersion: v1
`, []string{
			"spec.yaml:9:13: steps[0].apply.manifests[0].inline: inline manifest, document 1 (line 1): missing apiVersion",
			`spec.yaml:11:13: steps[0].apply.manifests[0].inline: inline manifest, invalid document separator at line 3: "--- !tag": only white space or a comment may follow "---" on its line (kubectl reads every line starting with "---" as a separator)`,
		}},
		{"a quoted inline manifest is positioned at its field", `        - inline: "apiVersion: v1\nkind: ConfigMap\n--- # c\napiVersion: v1\n"
`, []string{
			"spec.yaml:8:19: steps[0].apply.manifests[0].inline: inline manifest, document 1 (line 1): missing metadata.name",
			"spec.yaml:8:19: steps[0].apply.manifests[0].inline: inline manifest, document 2 (line 4): missing kind, metadata.name",
		}},
		{"valid", `        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: a}
            --- # c
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}
            ---
            {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := validateText(t, manifestsHead+tc.manifests, nil, t.TempDir())
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// Positions go through the spec.PosMapper, from the substituted text back to
// the file as written.
func TestValidateInlineManifestPositionsMapped(t *testing.T) {
	text := manifestsHead + `        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: a}
            ---
            kind: ConfigMap
`
	shift := func(line, col int) (int, int) { return line + 100, col + 1 }
	got := validateText(t, text, shift, t.TempDir())
	want := "spec.yaml:113:14: steps[0].apply.manifests[0].inline: inline manifest, document 2 (line 5): missing apiVersion, metadata.name"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("problems %q\nwant %q", got, want)
	}
}

// File manifests are read as kubectl reads a file, by the same splitter.
func TestValidateFileManifests(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u := utf16.Encode([]rune("\ufeffapiVersion: v1\r\nkind: ConfigMap\r\nmetadata: {name: a}\r\n--- # c\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata: {name: b}\r\n"))
	utf16le := make([]byte, 2*len(u))
	for i, r := range u {
		binary.LittleEndian.PutUint16(utf16le[2*i:], r)
	}
	write("utf16.yaml", utf16le)
	write("dropped.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n--- # c\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n...\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"))
	got := validateText(t, manifestsHead+`        - file: ./utf16.yaml
        - file: ./dropped.yaml
`, nil, dir)
	want := `spec.yaml:9:17: steps[0].apply.manifests[1].file: ./dropped.yaml, document 2: content after the document end marker "..." at line 8: kubectl would read only the document before it and silently drop the rest; separate documents with "---"`
	if len(got) != 1 || got[0] != want {
		t.Fatalf("problems %q\nwant %q", got, want)
	}
}

// The offline plan counts the objects apply reads, with the same splitter.
func TestDescribeInlineCountsObjects(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n--- # c\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n", "inline (2 objects)"},
		{"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# nothing\n---\n", "inline (1 object)"},
		{"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n", "inline (2 objects)"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  x: |\n    ---\n    y\n", "inline (1 object)"},
	} {
		if got := (spec.ManifestSource{Inline: tc.in}).Describe(); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}
