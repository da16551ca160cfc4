package state

import (
	"context"
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/steps/builtin"
	"khook.io/core/vars"
)

const head = "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: t}\nsteps:\n"

// hashOf loads a one-step spec from dir and hashes its step.
func hashOf(t *testing.T, dir, stepYAML string, env ...string) string {
	t.Helper()
	red := redact.New()
	set, err := vars.Resolve(vars.Options{Environ: env}, red)
	if err != nil {
		t.Fatal(err)
	}
	l := load.Loader{Steps: builtin.Registry}
	doc, err := l.Parse([]byte(head+stepYAML), "spec.yaml", dir, set, red)
	if err != nil {
		t.Fatal(err)
	}
	h := &Hasher{BaseDir: dir, Redactor: red, Salt: []byte("0123456789abcdef"), Steps: builtinSteps(t)}
	sum, err := h.Step(context.Background(), &doc.Spec.Steps[0])
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestStepHash(t *testing.T) {
	dir := t.TempDir()
	base := hashOf(t, dir, `  - name: a
    helm:
      chart: app
      repo: https://charts.example.com
      version: "1.0.0"
      values: {replicas: 2, image: {tag: "1.2"}}
`)
	same := []struct{ name, step string }{
		{"comments, key order, flow style and quoting", `  # a comment
  - helm: {version: '1.0.0', values: {image: {tag: "1.2"}, replicas: 2}, repo: "https://charts.example.com", chart: app}  # trailing
    name: "a"
`},
		{"scheduling fields are not inputs", `  - name: a
    needs: []
    when: "true"
    timeout: 9m
    retries: 3
    retryDelay: 1s
    onError: continue
    helm: {chart: app, repo: https://charts.example.com, version: 1.0.0, values: {replicas: 2, image: {tag: "1.2"}}}
`},
		{"a value from a variable", `  - name: a
    helm: {chart: app, repo: https://charts.example.com, version: "${V}", values: {replicas: 2, image: {tag: "1.2"}}}
`},
	}
	for _, c := range same {
		env := []string{"KHOOK_VAR_V=1.0.0"}
		if got := hashOf(t, dir, c.step, env...); got != base {
			t.Errorf("%s changed the hash", c.name)
		}
	}
	different := []struct{ name, step string }{
		{"renamed", "  - name: b\n    helm: {chart: app, repo: https://charts.example.com, version: 1.0.0, values: {replicas: 2, image: {tag: \"1.2\"}}}\n"},
		{"a value", "  - name: a\n    helm: {chart: app, repo: https://charts.example.com, version: 1.0.0, values: {replicas: 3, image: {tag: \"1.2\"}}}\n"},
		{"a value's type", "  - name: a\n    helm: {chart: app, repo: https://charts.example.com, version: 1.0.0, values: {replicas: \"2\", image: {tag: \"1.2\"}}}\n"},
		{"the version", "  - name: a\n    helm: {chart: app, repo: https://charts.example.com, version: 1.0.1, values: {replicas: 2, image: {tag: \"1.2\"}}}\n"},
	}
	for _, c := range different {
		if got := hashOf(t, dir, c.step); got == base {
			t.Errorf("%s did not change the hash", c.name)
		}
	}
}

func TestLocalFilesAreInputs(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "kust"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "kust", "kustomization.yaml"), []byte("resources: [cm.yaml]\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "kust", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("a: 1\n"), 0o644))
	kust := "  - name: k\n    apply: {manifests: [{kustomize: ./kust}]}\n"
	vals := "  - name: v\n    helm: {chart: app, repo: https://x, valuesFrom: [{file: ./values.yaml}]}\n"
	k1, v1 := hashOf(t, dir, kust), hashOf(t, dir, vals)
	must(os.WriteFile(filepath.Join(dir, "kust", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("a: 2\n"), 0o644))
	if hashOf(t, dir, kust) == k1 {
		t.Error("editing a file in a kustomize directory did not change the hash")
	}
	if hashOf(t, dir, vals) == v1 {
		t.Error("editing a values file did not change the hash")
	}
}

func TestSecretsAreFingerprintedNotHashedInTheClear(t *testing.T) {
	dir := t.TempDir()
	step := "  - name: s\n    job: {image: busybox, env: {TOKEN: \"${TOKEN}\", B64: \"${TOKEN|b64enc}\"}}\n"
	h1 := hashOf(t, dir, step, "KHOOK_SECRET_TOKEN=first-secret-value")
	h2 := hashOf(t, dir, step, "KHOOK_SECRET_TOKEN=rotated-secret-value")
	if h1 == h2 {
		t.Fatal("a rotated secret must change the hash")
	}
	if h1 != hashOf(t, dir, step, "KHOOK_SECRET_TOKEN=first-secret-value") {
		t.Fatal("the hash must be stable for the same secret")
	}
	if strings.Contains(h1, "first-secret") {
		t.Fatal("the hash carries the secret")
	}
}

// TestPinnedHashes pins input hashes computed before the steps declared
// their own inputs (the state package read them itself): a record written
// by an earlier khook must still match, or the next run re-runs every step.
func TestPinnedHashes(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, kustomizeLayout)
	writeTree(t, dir, chartLayout)
	writeTree(t, dir, map[string]string{
		"manifests/a.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"manifests/sub/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"values.yaml":          "a: 1\n",
	})
	cases := []struct{ name, step, want string }{
		{"apply: files, a kustomization and a url",
			"  - name: a\n    apply: {manifests: [{file: ./manifests/a.yaml}, {file: ./manifests/sub/b.yaml}, {kustomize: ./overlays/prod}, {url: https://example.com/x.yaml}]}\n",
			"sha256:29f279fe6621323176b67d64e3749403cadfba29452a93cb64530a4d2e5951b4"},
		{"delete: a file", "  - name: d\n    delete: {manifests: [{file: ./manifests/a.yaml}]}\n",
			"sha256:199a9d01889c03345ca794367e6ef572f2074a74dc61dad6d84c14f4e2d8e462"},
		{"helm: a local chart with file:// dependencies and a values file",
			"  - name: h\n    helm: {chart: ./app, namespace: apps, valuesFrom: [{file: ./values.yaml}, {url: https://example.com/v.yaml}]}\n",
			"sha256:a11cdf7bec55af4ce5295515577dba23e2e6899e7d5c7c64662c05ededdfcbc8"},
		{"helm: a remote chart", "  - name: r\n    helm: {chart: app, repo: https://charts.example.com, version: 1.0.0, values: {a: 1}}\n",
			"sha256:8f813c1af9163cf5b6bc84b03470a389e146024e3cffa8ff4c5c1613915d46f9"},
		{"job: no local inputs", "  - name: j\n    job: {image: busybox}\n",
			"sha256:a234023aaeef9298b341663f044aa95589a97c1b9baf0dd7f3105f7f88a88c39"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := hashOf(t, dir, c.step); got != c.want {
				t.Errorf("hash = %q, want %q", got, c.want)
			}
		})
	}
}

// TestStepsOwnTheirInputs: the state package hashes what the executors
// declare; it knows no step type, so it imports none of their packages
// (nor helm's or the manifest loader's, which a step type would read
// through).
func TestStepsOwnTheirInputs(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if imp == "khook.io/core/helm" || imp == "khook.io/core/manifest" || strings.HasPrefix(imp, "khook.io/core/steps/") {
			t.Errorf("package state imports %s", imp)
		}
	}
}
