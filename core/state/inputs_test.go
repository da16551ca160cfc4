package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/steps/builtin"
	"khook.io/core/vars"
)

// inputsOf loads a one-step spec from dir and computes its step's inputs,
// compared with prev (nil: no record).
func inputsOf(t *testing.T, dir, stepYAML string, prev *Record, env ...string) *Inputs {
	t.Helper()
	st, red := loadStep(t, dir, stepYAML, env...)
	h := &Hasher{BaseDir: dir, Redactor: red, Salt: []byte("0123456789abcdef"), Previous: prev, Steps: builtinSteps(t)}
	in, err := h.Inputs(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func loadStep(t testing.TB, dir, stepYAML string, env ...string) (*spec.Step, *redact.Redactor) {
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
	return &doc.Spec.Steps[0], red
}

func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// kustomizeLayout is the standard layout: the spec names an overlay whose
// base and component live outside its folder; the base reads a patch, a
// generator file, an env file and a replacements file.
var kustomizeLayout = map[string]string{
	"base/kustomization.yaml": `resources: [cm.yaml, source.yaml]
patches: [{path: patch.yaml}]
configMapGenerator:
  - {name: gen, files: [gen.properties]}
secretGenerator:
  - {name: env, envs: [secret.env]}
replacements: [{path: replacement.yaml}]
`,
	"base/cm.yaml":                     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {v: base, r: none}\n",
	"base/source.yaml":                 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: source}\ndata: {value: one}\n",
	"base/patch.yaml":                  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {p: one}\n",
	"base/gen.properties":              "k=1\n",
	"base/secret.env":                  "K=1\n",
	"base/replacement.yaml":            "source: {kind: ConfigMap, name: source, fieldPath: data.value}\ntargets: [{select: {kind: ConfigMap, name: cm}, fieldPaths: [data.r]}]\n",
	"components/c/kustomization.yaml":  "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [extra.yaml]\n",
	"components/c/extra.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {v: one}\n",
	"overlays/prod/kustomization.yaml": "resources: [../../base]\ncomponents: [../../components/c]\n",
	"overlays/prod/README.md":          "notes\n",
}

const kustomizeStep = "  - name: k\n    apply: {manifests: [{kustomize: ./overlays/prod}]}\n"

func TestEveryFileKustomizeReadsIsAnInput(t *testing.T) {
	edits := []struct{ name, file, body string }{
		{"a resource of a base outside the overlay's folder", "base/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {v: edited, r: none}\n"},
		{"the base's kustomization", "base/kustomization.yaml", "resources: [cm.yaml]\n"},
		{"a component", "components/c/extra.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {v: two}\n"},
		{"a patch file", "base/patch.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {p: two}\n"},
		{"a configMapGenerator file", "base/gen.properties", "k=2\n"},
		{"a secretGenerator env file", "base/secret.env", "K=2\n"},
		{"a replacements file", "base/replacement.yaml", "source: {kind: ConfigMap, name: source, fieldPath: data.value}\ntargets: [{select: {kind: ConfigMap, name: cm}, fieldPaths: [data.v]}]\n"},
		{"a replacement's source object", "base/source.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: source}\ndata: {value: two}\n"},
		{"the overlay", "overlays/prod/kustomization.yaml", "resources: [../../base]\ncomponents: [../../components/c]\nnamePrefix: x-\n"},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, kustomizeLayout)
			before := inputsOf(t, dir, kustomizeStep, nil)
			if before.Err != nil || before.Hash == "" {
				t.Fatalf("inputs: %v", before.Err)
			}
			writeTree(t, dir, map[string]string{e.file: e.body})
			after := inputsOf(t, dir, kustomizeStep, nil)
			if after.Err != nil {
				t.Fatal(after.Err)
			}
			if after.Hash == before.Hash {
				t.Fatalf("editing %s did not change the hash", e.file)
			}
			// with the record of the first run, the replay sees the edit too
			prev := &Record{Steps: map[string]*StepRecord{"k": {Status: StepOK, Hash: before.Hash, Reads: before.Reads}}}
			if got := inputsOf(t, dir, kustomizeStep, prev); got.Hash != after.Hash {
				t.Fatalf("with the record: hash %s, want %s", got.Hash, after.Hash)
			}
		})
	}
}

func TestKustomizeInputsIgnoreWhatKustomizeDoesNotRead(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, kustomizeLayout)
	before := inputsOf(t, dir, kustomizeStep, nil)
	writeTree(t, dir, map[string]string{"overlays/prod/README.md": "edited\n", "base/unused.yaml": "x: 1\n"})
	if after := inputsOf(t, dir, kustomizeStep, nil); after.Hash != before.Hash {
		t.Fatal("a file kustomize does not read changed the hash")
	}
	// a file where kustomize looked for one and found none is an input
	writeTree(t, dir, map[string]string{"base/Kustomization": "resources: []\n"})
	if after := inputsOf(t, dir, kustomizeStep, nil); after.Hash == before.Hash {
		t.Fatal("a second kustomization file did not change the inputs")
	}
}

func TestKustomizeInputsReplayTheRecord(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, kustomizeLayout)
	first := inputsOf(t, dir, kustomizeStep, nil)
	reads := first.Reads["./overlays/prod"]
	if len(reads) == 0 {
		t.Fatalf("no reads recorded: %v", first.Reads)
	}
	for _, want := range []string{"read ../../base/gen.properties", "read ../../components/c/extra.yaml", "read kustomization.yaml"} {
		if !contains(reads, want) {
			t.Errorf("recorded reads lack %q: %v", want, reads)
		}
	}
	for _, r := range reads {
		if strings.Contains(r, dir) {
			t.Fatalf("a recorded read holds an absolute path: %q", r)
		}
	}
	prev := &Record{Steps: map[string]*StepRecord{"k": {Status: StepOK, Hash: first.Hash, Reads: first.Reads}}}
	again := inputsOf(t, dir, kustomizeStep, prev)
	if again.Hash != first.Hash || !reflect.DeepEqual(again.Reads, first.Reads) {
		t.Fatalf("replaying the record: %+v, want %+v", again, first)
	}
	// the same tree elsewhere (another checkout) hashes the same
	other := t.TempDir()
	writeTree(t, other, kustomizeLayout)
	if got := inputsOf(t, other, kustomizeStep, prev); got.Hash != first.Hash {
		t.Fatal("the hash depends on where the tree is")
	}
	// a record whose reads do not match its hash is not trusted
	forged := &Record{Steps: map[string]*StepRecord{"k": {Status: StepOK, Hash: first.Hash, Reads: map[string][]string{"./overlays/prod": {"read kustomization.yaml"}}}}}
	if got := inputsOf(t, dir, kustomizeStep, forged); got.Hash != first.Hash || !reflect.DeepEqual(got.Reads, first.Reads) {
		t.Fatalf("with reads that do not produce the hash: %+v", got)
	}
}

func TestSecretPathsAreNotRecorded(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, kustomizeLayout)
	step := "  - name: k\n    apply: {manifests: [{kustomize: \"./overlays/${ENVDIR}\"}]}\n"
	in := inputsOf(t, dir, step, nil, "KHOOK_SECRET_ENVDIR=prod")
	if in.Err != nil || in.Hash == "" || in.Reads != nil {
		t.Fatalf("a kustomize path holding a secret: hash %q, reads %v, err %v", in.Hash, in.Reads, in.Err)
	}
	if in := inputsOf(t, dir, step, nil, "KHOOK_VAR_ENVDIR=prod"); len(in.Reads) == 0 {
		t.Fatal("a plain variable: the reads must be recorded")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestBrokenKustomizationHasNoHash(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, kustomizeLayout)
	writeTree(t, dir, map[string]string{"base/kustomization.yaml": "resources: [cm.yaml, nothere.yaml]\n"})
	in := inputsOf(t, dir, kustomizeStep, nil)
	if in.Hash != "" || in.Err == nil || !strings.Contains(in.Err.Error(), "nothere.yaml") || !strings.HasPrefix(in.Err.Error(), "step k: ") {
		t.Fatalf("a broken kustomization: hash %q, err %v", in.Hash, in.Err)
	}
	rec := &Record{Steps: map[string]*StepRecord{"k": {Status: StepOK, Hash: in.Hash}}}
	if rec.Resumes("k", in.Hash) {
		t.Fatal("a step whose inputs cannot be read must not resume")
	}
}

func TestCosmeticEditsKeepKustomizeAndChartHashes(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, kustomizeLayout)
	writeTree(t, dir, chartLayout)
	cases := []struct{ base, cosmetic string }{
		{kustomizeStep, "  # the overlay\n  - apply:\n      manifests:\n        - kustomize: \"./overlays/prod\"  # prod\n    name: 'k'\n"},
		{chartStep, "  - helm: {namespace: \"apps\", chart: './app'}\n    # local chart\n    name: c\n"},
	}
	for _, c := range cases {
		a, b := inputsOf(t, dir, c.base, nil), inputsOf(t, dir, c.cosmetic, nil)
		if a.Err != nil || a.Hash == "" || a.Hash != b.Hash {
			t.Errorf("a cosmetic edit changed the hash (%v):\n%s", a.Err, c.cosmetic)
		}
	}
}

// chartLayout: a local chart whose file:// dependency lives outside its
// folder, with a .helmignore; and a v1 chart naming one in
// requirements.yaml.
var chartLayout = map[string]string{
	"app/Chart.yaml":              "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n  - {name: common, version: 1.x, repository: file://../libs/common}\n",
	"app/values.yaml":             "replicas: 1\n",
	"app/templates/cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n",
	"app/.helmignore":             "*.md\n",
	"app/NOTES.md":                "ignored by helm\n",
	"libs/common/Chart.yaml":      "apiVersion: v2\nname: common\nversion: 1.2.0\n",
	"libs/common/values.yaml":     "common: one\n",
	"libs/common/templates/x.tpl": "{{- define \"common.x\" -}}one{{- end -}}\n",
	"old/Chart.yaml":              "apiVersion: v1\nname: old\nversion: 0.1.0\n",
	"old/requirements.yaml":       "dependencies:\n  - {name: common, version: 1.2.0, repository: \"file://../libs/common\"}\n",
	"old/templates/cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old}\n",
}

const chartStep = "  - name: c\n    helm: {chart: ./app, namespace: apps}\n"

func TestLocalChartInputs(t *testing.T) {
	oldStep := "  - name: c\n    helm: {chart: ./old, namespace: apps}\n"
	edits := []struct {
		name, step, file, body string
		changes                bool
	}{
		{"a chart template", chartStep, "app/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app2}\n", true},
		{"a file:// dependency outside the chart folder", chartStep, "libs/common/values.yaml", "common: two\n", true},
		{"a file:// dependency's template", chartStep, "libs/common/templates/x.tpl", "{{- define \"common.x\" -}}two{{- end -}}\n", true},
		{"a file .helmignore excludes", chartStep, "app/NOTES.md", "edited\n", false},
		{"a v1 chart's requirements.yaml dependency", oldStep, "libs/common/values.yaml", "common: three\n", true},
		{"a vendored subchart", chartStep, "app/charts/common/values.yaml", "common: vendored-two\n", true},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, chartLayout)
			if strings.Contains(e.file, "/charts/") {
				writeTree(t, dir, map[string]string{
					"app/charts/common/Chart.yaml":  "apiVersion: v2\nname: common\nversion: 1.2.0\n",
					"app/charts/common/values.yaml": "common: vendored\n",
				})
			}
			before := inputsOf(t, dir, e.step, nil)
			if before.Err != nil || before.Hash == "" {
				t.Fatalf("inputs: %v", before.Err)
			}
			writeTree(t, dir, map[string]string{e.file: e.body})
			after := inputsOf(t, dir, e.step, nil)
			if (after.Hash != before.Hash) != e.changes {
				t.Fatalf("editing %s: hash changed %v, want %v", e.file, after.Hash != before.Hash, e.changes)
			}
		})
	}
}

func TestHashCannotSee(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, chartLayout)
	writeTree(t, dir, kustomizeLayout)
	writeTree(t, dir, map[string]string{
		"remote/Chart.yaml":  "apiVersion: v2\nname: remote\nversion: 1.0.0\ndependencies:\n  - {name: redis, version: ~17.0, repository: \"https://u:pw@charts.example.com\"}\n  - {name: pinned, version: 2.0.1, repository: \"oci://registry.example.com/charts\"}\n",
		"remote/values.yaml": "a: 1\n",
	})
	cases := []struct {
		name, step string
		want       []string
	}{
		{"url manifests", "  - name: s\n    apply: {manifests: [{inline: \"apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: a}\\n\"}, {url: \"https://user:pw@example.com/x.yaml\"}]}\n",
			[]string{"manifests[1] (url https://***@example.com/x.yaml)"}},
		{"delete by url", "  - name: s\n    delete: {manifests: [{url: https://example.com/x.yaml}]}\n", []string{"manifests[0] (url https://example.com/x.yaml)"}},
		{"values url", "  - name: s\n    helm: {chart: app, repo: https://charts.example.com, version: 1.0.0, valuesFrom: [{url: https://example.com/v.yaml}]}\n",
			[]string{"valuesFrom[0] (url https://example.com/v.yaml)"}},
		{"repo chart without a version", "  - name: s\n    helm: {chart: app, repo: https://charts.example.com}\n",
			[]string{"chart app from https://charts.example.com (no version: the latest)"}},
		{"repo chart at a range", "  - name: s\n    helm: {chart: app, repo: https://charts.example.com, version: ^1.2}\n",
			[]string{"chart app from https://charts.example.com (version ^1.2 is a range)"}},
		{"repo chart at a partial version", "  - name: s\n    helm: {chart: \"app:1.2\", repo: https://charts.example.com}\n",
			[]string{"chart app from https://charts.example.com (version 1.2 is a range)"}},
		{"repo chart pinned", "  - name: s\n    helm: {chart: app, repo: https://charts.example.com, version: 1.2.3}\n", nil},
		{"repo chart pinned inline", "  - name: s\n    helm: {chart: \"app:v1.2.3\", repo: https://charts.example.com}\n", nil},
		{"oci without a tag", "  - name: s\n    helm: {chart: oci://ghcr.io/org/app}\n", []string{"chart oci://ghcr.io/org/app (no version: the latest)"}},
		{"oci at a range", "  - name: s\n    helm: {chart: oci://ghcr.io/org/app, version: ~1}\n", []string{"chart oci://ghcr.io/org/app (version ~1 is a range)"}},
		{"oci tag that is no version", "  - name: s\n    helm: {chart: \"oci://ghcr.io/org/app:latest\"}\n", []string{"chart oci://ghcr.io/org/app:latest (tag latest is not an exact version)"}},
		{"oci pinned tag", "  - name: s\n    helm: {chart: \"oci://ghcr.io/org/app:1.2.3\"}\n", nil},
		{"oci pinned version", "  - name: s\n    helm: {chart: oci://ghcr.io/org/app, version: 1.2.3}\n", nil},
		{"oci digest", "  - name: s\n    helm: {chart: \"oci://ghcr.io/org/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}\n", nil},
		{"local chart with file:// dependencies", chartStep, nil},
		{"local chart with a remote dependency at a range", "  - name: s\n    helm: {chart: ./remote}\n",
			[]string{"dependency redis of chart remote from https://***@charts.example.com (version ~17.0, not an exact version)"}},
		{"kustomize", kustomizeStep, nil},
		{"files", "  - name: s\n    apply: {manifests: [{file: ./base/cm.yaml}]}\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _ := loadStep(t, dir, c.step)
			got := HashCannotSee(st, dir, builtinSteps(t))
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("HashCannotSee = %q, want %q", got, c.want)
			}
			// Inputs says the same
			h := &Hasher{BaseDir: dir, Redactor: redact.New(), Salt: []byte("salt"), Steps: builtinSteps(t)}
			in, err := h.Inputs(context.Background(), st)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in.HashCannotSee, c.want) {
				t.Fatalf("Inputs.HashCannotSee = %q, want %q", in.HashCannotSee, c.want)
			}
		})
	}
}

// BenchmarkKustomizeInputs: a kustomize step's inputs computed by a build
// (no record, or a changed tree) and by replaying the record's reads (an
// unchanged tree: what a no-op re-run does).
func BenchmarkKustomizeInputs(b *testing.B) {
	dir := b.TempDir()
	writeTree(b, dir, kustomizeLayout)
	st, red := loadStep(b, dir, kustomizeStep)
	h := &Hasher{BaseDir: dir, Redactor: red, Salt: []byte("salt"), Steps: builtinSteps(b)}
	first, err := h.Inputs(context.Background(), st)
	if err != nil || first.Err != nil {
		b.Fatal(err, first.Err)
	}
	b.Run("build", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			// a new file kustomize probes for makes every build a new one
			writeTree(b, dir, map[string]string{"overlays/prod/kustomization.yaml": fmt.Sprintf("resources: [../../base]\ncomponents: [../../components/c]\nnamePrefix: p%d-\n", i)})
			if in, _ := h.Inputs(context.Background(), st); in.Err != nil {
				b.Fatal(in.Err)
			}
		}
	})
	writeTree(b, dir, kustomizeLayout)
	first, _ = h.Inputs(context.Background(), st)
	replay := &Hasher{BaseDir: dir, Redactor: red, Salt: []byte("salt"), Steps: builtinSteps(b),
		Previous: &Record{Steps: map[string]*StepRecord{"k": {Status: StepOK, Hash: first.Hash, Reads: first.Reads}}}}
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			if in, _ := replay.Inputs(context.Background(), st); in.Hash != first.Hash {
				b.Fatal("the replay does not give the recorded hash")
			}
		}
	})
}

// builtinSteps is the executors khook ships: the steps declare their
// inputs, the state package only hashes them.
func builtinSteps(t testing.TB) *step.Registry {
	t.Helper()
	reg, err := builtin.Registry()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
