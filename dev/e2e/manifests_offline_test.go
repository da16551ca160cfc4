package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// inlineSpec has one apply step whose inline manifest holds three
// documents separated by "--- # comment"; the third is broken by body.
func inlineSpec(t *testing.T, third string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "spec.yaml")
	body := `apiVersion: khook.io/v1
kind: Khook
metadata: {name: inline}
steps:
  - name: objects
    apply:
      namespace: ${NS:-default}
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: "${NAME:-first}"}
            --- # the second one
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: second}
            --- # the third one
` + third
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The offline plan counts the objects apply reads, with the same reader:
// documents separated by "--- # comment", a comment-only document, a List.
func TestOfflinePlanCountsInlineObjects(t *testing.T) {
	spec := inlineSpec(t, `            # nothing in this one
            ---
            apiVersion: v1
            kind: List
            items:
              - {apiVersion: v1, kind: ConfigMap, metadata: {name: x1}}
              - {apiVersion: v1, kind: ConfigMap, metadata: {name: x2}}
              - {apiVersion: v1, kind: ConfigMap, metadata: {name: x3}}
`)
	res := run(t, bins.Kubectl, nil, "", "plan", "--offline", "-f", spec)
	if res.Code != 0 || !strings.Contains(res.Stdout, "apply inline (5 objects) in default") {
		t.Fatalf("plan --offline: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
}

// A YAML error inside an inline manifest is reported at its own line and
// column of the spec file (yaml.v2 reports parser errors a line early).
func TestValidateInlineManifestErrorAtItsLine(t *testing.T) {
	spec := inlineSpec(t, `            apiVersion: v1
            kind: List
            items:
              - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
              kind: ConfigMap
`)
	res := run(t, bins.Kubectl, []string{"KHOOK_VAR_NAME=a-much-longer-name"}, "", "validate", "-f", spec, "-o", "json")
	var out struct {
		Valid    bool `json:"valid"`
		Problems []struct {
			Line    int    `json:"line"`
			Column  int    `json:"column"`
			Path    string `json:"path"`
			Message string `json:"message"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("validate -o json: %v\n%s%s", err, res.Stdout, res.Stderr)
	}
	if res.Code != 2 || out.Valid || len(out.Problems) != 1 {
		t.Fatalf("exit %d: %+v", res.Code, out)
	}
	p := out.Problems[0]
	want := "inline manifest, document 3: invalid YAML at line 13: did not find expected '-' indicator"
	if p.Line != 22 || p.Column != 15 || p.Path != "steps[0].apply.manifests[0].inline" || p.Message != want {
		t.Errorf("problem %d:%d %s: %s\nwant 22:15 steps[0].apply.manifests[0].inline: %s", p.Line, p.Column, p.Path, p.Message, want)
	}
}
