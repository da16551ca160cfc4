//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/testing/testcluster"
)

// TestFieldManagerWarningsAndNotes: apply --field-manager NAME writes
// every object as NAME, helm's included; a step's warnings are printed
// once on standard error with the step's name; a release's NOTES only
// with -v 1; destroy takes the flag too (issue 32).
func TestFieldManagerWarningsAndNotes(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "fieldmgr")
	dir := t.TempDir()
	for name, body := range map[string]string{
		"chart/Chart.yaml":          "apiVersion: v2\nname: old\nversion: 0.1.0\ndeprecated: true\n",
		"chart/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-old\ndata:\n  tag: {{ .Values.tag | quote }}\n",
		"chart/templates/NOTES.txt": "Thanks for installing {{ .Release.Name }}.\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := filepath.Join(dir, "spec.yaml")
	body := fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: fieldmgr}
steps:
  - name: rel
    helm: {chart: ./chart, namespace: %[1]s, values: {tag: 20240101}}
  - name: cm
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: plain}
            data: {a: "1"}
`, ns)
	if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	env := kubeEnv(t)
	r, res := applyJSON(t, "apply", spec, env, "--field-manager", "ops", "-v", "1")
	if res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	if n := strings.Count(res.Stderr, "Warning: rel: this chart is deprecated\n"); n != 1 {
		t.Errorf("the deprecation warning %d times:\n%s", n, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "NOTES of release rel ("+ns+"):\nThanks for installing rel.\n") {
		t.Errorf("no NOTES with -v 1:\n%s", res.Stderr)
	}
	c := typed(t)
	for name, want := range map[string]string{"rel-old": "ops/Apply", "plain": "ops/Update"} {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range cm.ManagedFields {
			got = append(got, e.Manager+"/"+string(e.Operation))
		}
		if !slices.Equal(got, []string{want}) {
			t.Errorf("%s: managers %v, want %s", name, got, want)
		}
		if name == "rel-old" && cm.Data["tag"] != "20240101" {
			t.Errorf("tag %q", cm.Data["tag"])
		}
	}
	// an upgrade (another tag) without -v: no NOTES, the warning again
	if err := os.WriteFile(spec, []byte(strings.Replace(body, "tag: 20240101", "tag: 20240102", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r, res = applyJSON(t, "apply", spec, env, "--field-manager", "ops")
	if res.Code != 0 || r.Status != "ok" || !strings.Contains(res.Stderr, "Warning: rel: this chart is deprecated") {
		t.Fatalf("upgrade: exit %d\n%s", res.Code, res.Stderr)
	}
	if _, _, errText, _ := r.step(t, "rel"); errText != "" || strings.Contains(res.Stderr, "NOTES") {
		t.Errorf("NOTES without -v (or an error %q):\n%s", errText, res.Stderr)
	}
	if _, res = applyJSON(t, "destroy", spec, env, "--field-manager", "ops"); res.Code != 0 {
		t.Fatalf("destroy: exit %d\n%s", res.Code, res.Stderr)
	}
}
