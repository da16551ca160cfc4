package manifest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kustTree writes a kustomization tree, the standard layout: an overlay
// whose base and component live outside its folder, the base holding a
// patch file, a generator file and a replacements file.
func kustTree(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"base/kustomization.yaml": `resources: [cm.yaml, source.yaml]
patches:
  - path: patch.yaml
configMapGenerator:
  - name: gen
    files: [gen.properties]
replacements:
  - path: replacement.yaml
`,
		"base/cm.yaml":                     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {v: base, r: none}\n",
		"base/source.yaml":                 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: source}\ndata: {value: from-source}\n",
		"base/patch.yaml":                  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {p: patched}\n",
		"base/gen.properties":              "k=1\n",
		"base/replacement.yaml":            "source: {kind: ConfigMap, name: source, fieldPath: data.value}\ntargets:\n  - select: {kind: ConfigMap, name: cm}\n    fieldPaths: [data.r]\n",
		"components/c/kustomization.yaml":  "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [extra.yaml]\n",
		"components/c/extra.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {v: component}\n",
		"overlays/prod/kustomization.yaml": "resources: [../../base]\ncomponents: [../../components/c]\nnamePrefix: prod-\n",
		"overlays/prod/README.md":          "not read by kustomize\n",
	}
	for name, body := range files {
		writeFile(t, filepath.Join(root, name), body)
	}
	return root
}

func writeFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestKustomizeBuildRecordsWhatItReads(t *testing.T) {
	root := kustTree(t)
	b, err := BuildKustomization(context.Background(), filepath.Join(root, "overlays/prod"))
	if err != nil {
		t.Fatal(err)
	}
	read, probed := map[string]string{}, map[string]string{}
	for _, r := range b.Reads {
		switch r.Op {
		case opRead:
			read[r.Path] = r.Result
		case opAbs:
			probed[r.Path] = r.Result
		}
	}
	for _, want := range []string{
		"kustomization.yaml",
		"../../base/kustomization.yaml",
		"../../base/cm.yaml",
		"../../base/patch.yaml",
		"../../base/gen.properties",
		"../../base/replacement.yaml",
		"../../base/source.yaml",
		"../../components/c/kustomization.yaml",
		"../../components/c/extra.yaml",
	} {
		if !strings.HasPrefix(read[want], "sha256:") {
			t.Errorf("the build's reads lack %s (got %q)", want, read[want])
		}
	}
	if _, ok := read["README.md"]; ok {
		t.Error("README.md is not something kustomize reads")
	}
	// kustomize probes the other kustomization file names: their absence
	// is part of what the build saw
	if got := probed["kustomization.yml"]; !strings.HasPrefix(got, "error") {
		t.Errorf("the probe of kustomization.yml: %q", got)
	}
	out := string(b.YAML)
	for _, want := range []string{"name: prod-cm", "p: patched", "r: from-source", "k=1", "v: component"} {
		if !strings.Contains(out, want) {
			t.Errorf("build output lacks %q:\n%s", want, out)
		}
	}
}

func TestKustomizeBuildIsReusedWhileItsReadsHold(t *testing.T) {
	root := kustTree(t)
	dir := filepath.Join(root, "overlays/prod")
	first, err := BuildKustomization(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := BuildKustomization(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatal("an unchanged kustomization was built twice")
	}
	// a file kustomize never reads changes nothing
	writeFile(t, filepath.Join(dir, "README.md"), "edited\n")
	if again, _ = BuildKustomization(context.Background(), dir); again != first {
		t.Fatal("editing a file kustomize does not read rebuilt the kustomization")
	}
	// a file of the base, outside the overlay's folder, does
	writeFile(t, filepath.Join(root, "base/gen.properties"), "k=2\n")
	second, err := BuildKustomization(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if second == first || !strings.Contains(string(second.YAML), "k=2") {
		t.Fatalf("an edited generator file was not rebuilt:\n%s", second.YAML)
	}
	// a new file where kustomize looked for one and found none
	writeFile(t, filepath.Join(root, "base/kustomization.yml"), "resources: []\n")
	if _, err := BuildKustomization(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "multiple kustomization files") {
		t.Fatalf("a second kustomization file must be seen: %v", err)
	}
}

func TestKustomizeBuildErrorIsKeptUntilFixed(t *testing.T) {
	root := kustTree(t)
	dir := filepath.Join(root, "overlays/prod")
	writeFile(t, filepath.Join(root, "base/kustomization.yaml"), "resources: [cm.yaml, nothere.yaml]\n")
	for range 2 {
		_, err := Kustomize(context.Background(), dir)
		if err == nil || !strings.Contains(err.Error(), "nothere.yaml") {
			t.Fatalf("err = %v, want kustomize's error naming nothere.yaml", err)
		}
	}
	writeFile(t, filepath.Join(root, "base/nothere.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: now-here}\n")
	out, err := Kustomize(context.Background(), dir)
	if err != nil || !strings.Contains(string(out), "prod-now-here") {
		t.Fatalf("after the fix: %v\n%s", err, out)
	}
}

func BenchmarkKustomizeBuild(b *testing.B) {
	root := kustTree(b)
	dir := filepath.Join(root, "overlays/prod")
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			kustomizeCache.put(mustAbs(b, dir), nil)
			if _, err := BuildKustomization(context.Background(), dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reused", func(b *testing.B) {
		for b.Loop() {
			if _, err := BuildKustomization(context.Background(), dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func mustAbs(b *testing.B, p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		b.Fatal(err)
	}
	return abs
}
