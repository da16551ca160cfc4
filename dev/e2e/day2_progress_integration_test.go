//go:build integration

package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"khook.io/core/testing/testcluster"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenFile compares got with testdata/golden/name (-update rewrites it).
func goldenFile(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -tags integration -run %s -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (-update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// timings are what changes from run to run in progress lines and
// summaries: elapsed times, durations, timestamps.
var timings = regexp.MustCompile(`\[ *[0-9.]+(ms|s|m)\]|\b[0-9.]+(µs|ms|s)\b|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z`)

var spaces = regexp.MustCompile(` {2,}`)

// TestDay2ProgressWording: the progress lines and the summary of runs
// that select steps (--steps) and force one (--replace), first without a
// record entry, then over one: what a user reads of selection and forcing.
func TestDay2ProgressWording(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "d2prog")
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: d2prog}
state: {namespace: %[1]s}
steps:
  - name: base
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base}\n"}]
  - name: app
    needs: [base]
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"}]
  - name: other
    needs: [app]
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"}]
`, ns))
	var b strings.Builder
	for _, args := range [][]string{
		{"apply", "-f", spec, "--steps", "app", "--replace", "base"},
		{"apply", "-f", spec, "--steps", "app", "--replace", "base"},
		{"apply", "-f", spec, "--steps", "app", "--no-needs"},
	} {
		res := run(t, bins.Kubectl, kubeEnv(t), "", args...)
		if res.Code != 0 {
			t.Fatalf("%q: exit %d\n%s%s", args, res.Code, res.Stdout, res.Stderr)
		}
		fmt.Fprintf(&b, "$ kubectl khook %s\n--- stderr\n%s--- stdout\n%s\n", strings.Join(append([]string{args[0], "-f", "spec.yaml"}, args[3:]...), " "), res.Stderr, res.Stdout)
	}
	out := timings.ReplaceAllString(b.String(), "T")
	out = strings.ReplaceAll(out, ns, "NS")
	// a table's columns are as wide as their widest value: durations vary
	out = spaces.ReplaceAllString(out, " ")
	goldenFile(t, "progress-day2.txt", out)

	// destroy's plan, shown before its question, has the same selection:
	// app and what needs it (other) are undone, base is not selected
	res := run(t, bins.Kubectl, kubeEnv(t), "", "destroy", "-f", spec, "--steps", "app", "--dry-run")
	for _, want := range []string{
		"  other (apply)\n    gone      ConfigMap/other in " + ns, // never applied: not selected
		"  app (apply)\n    delete    ConfigMap/app in " + ns,
		"  base (apply): skipped: not selected\n",
	} {
		if res.Code != 0 || !strings.Contains(res.Stdout, want) {
			t.Errorf("destroy --steps app --dry-run: exit %d, no %q:\n%s%s", res.Code, want, res.Stdout, res.Stderr)
		}
	}
}
