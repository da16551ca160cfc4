//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/testing/testcluster"
)

// resumeTree is the standard layout of a spec with local inputs: a
// kustomize overlay whose base and component live outside its folder (the
// base reads a patch file, a generator file and a replacements file), and
// a local chart whose file:// dependency lives outside the chart's folder,
// with a values file.
var resumeTree = map[string]string{
	"deploy/base/kustomization.yaml": `resources: [cm.yaml, source.yaml]
patches: [{path: patch.yaml}]
generatorOptions: {disableNameSuffixHash: true}
configMapGenerator:
  - {name: gen, files: [gen.properties]}
replacements: [{path: replacements.yaml}]
`,
	"deploy/base/cm.yaml":                        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {v: base-1, p: none, r: none}\n",
	"deploy/base/source.yaml":                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: source}\ndata: {first: from-first, second: from-second}\n",
	"deploy/base/patch.yaml":                     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {p: patch-1}\n",
	"deploy/base/gen.properties":                 "k=gen-1\n",
	"deploy/base/replacements.yaml":              "- source: {kind: ConfigMap, name: source, fieldPath: data.first}\n  targets: [{select: {kind: ConfigMap, name: cm}, fieldPaths: [data.r]}]\n",
	"deploy/components/extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [extra.yaml]\n",
	"deploy/components/extra/extra.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {v: component-1}\n",
	"deploy/overlays/prod/kustomization.yaml":    "namePrefix: prod-\nresources: [../../base]\ncomponents: [../../components/extra]\n",
	"charts/app/Chart.yaml":                      "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n  - {name: common, version: 1.0.0, repository: \"file://../../libs/common\"}\n",
	"charts/app/values.yaml":                     "greeting: default\n",
	"charts/app/templates/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {greeting: {{ .Values.greeting | quote }}}\n",
	"libs/common/Chart.yaml":                     "apiVersion: v2\nname: common\nversion: 1.0.0\n",
	"libs/common/values.yaml":                    "message: common-1\n",
	"libs/common/templates/cm.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: common}\ndata: {message: {{ .Values.message | quote }}}\n",
	"values/app.yaml":                            "greeting: values-1\n",
}

type resumeSpec struct {
	dir, path, ns string
}

func newResumeSpec(t *testing.T) *resumeSpec {
	t.Helper()
	ns := testcluster.Get(t).NewNamespace(t, "resume")
	s := &resumeSpec{dir: t.TempDir(), ns: ns}
	s.path = filepath.Join(s.dir, "spec.yaml")
	for name, body := range resumeTree {
		s.writeFile(t, name, body)
	}
	s.writeSpec(t, 0)
	return s
}

func (s *resumeSpec) writeFile(t *testing.T, name, body string) {
	t.Helper()
	p := filepath.Join(s.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSpec writes the spec in one of several forms that differ only
// cosmetically: comments, key order, quoting, flow or block style.
func (s *resumeSpec) writeSpec(t *testing.T, form int) {
	t.Helper()
	var steps string
	switch form % 4 {
	case 0:
		steps = `
  - name: kust
    apply:
      namespace: %[1]s
      manifests:
        - kustomize: ./deploy/overlays/prod
  - name: chart
    helm:
      chart: ./charts/app
      namespace: %[1]s
      valuesFrom:
        - file: ./values/app.yaml
`
	case 1:
		steps = `
  # the overlay, built in-process
  - name: kust
    apply:
      manifests:
        - kustomize: ./deploy/overlays/prod   # prod
      namespace: %[1]s
  # the chart
  - helm:
      valuesFrom:
        - file: ./values/app.yaml
      namespace: %[1]s
      chart: ./charts/app
    name: chart
`
	case 2:
		steps = `
  - name: "kust"
    apply: {namespace: "%[1]s", manifests: [{kustomize: './deploy/overlays/prod'}]}
  - name: 'chart'
    helm: {chart: "./charts/app", namespace: '%[1]s', valuesFrom: [{file: "./values/app.yaml"}]}
`
	case 3:
		steps = `
  - name: kust
    timeout: 2m
    apply:
      namespace: %[1]s
      manifests:
        - kustomize: ./deploy/overlays/prod
  - name: chart
    retries: 1
    helm:
      namespace: %[1]s
      chart: ./charts/app
      valuesFrom: [{file: ./values/app.yaml}]
`
	}
	s.writeFile(t, "spec.yaml", fmt.Sprintf("apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: %[1]s}\nstate: {namespace: %[1]s}\nsteps:"+steps, s.ns))
}

func (s *resumeSpec) apply(t *testing.T) report {
	t.Helper()
	r, res := applyJSON(t, "apply", s.path, kubeEnv(t))
	if res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	return r
}

func (s *resumeSpec) configMap(t *testing.T, name, key string) string {
	t.Helper()
	cm, err := typed(t).CoreV1().ConfigMaps(s.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", name, err)
	}
	return cm.Data[key]
}

// TestResumeSeesEveryLocalInput: with state, editing any file a step
// actually reads re-runs that step (and only it), and the cluster gets the
// new value; a cosmetic edit of the spec resumes everything. On the old
// code, every kustomize file outside the overlay's folder and the chart's
// file:// dependency outside its folder were missed: the step resumed and
// the cluster kept the old value.
func TestResumeSeesEveryLocalInput(t *testing.T) {
	s := newResumeSpec(t)
	if r := s.apply(t); fmt.Sprint(ran(r)) != "[kust chart]" && fmt.Sprint(ran(r)) != "[chart kust]" {
		t.Fatalf("first apply ran %v", ran(r))
	}
	if got := s.configMap(t, "prod-cm", "r"); got != "from-first" {
		t.Fatalf("the replacement did not apply: r = %q", got)
	}
	if r := s.apply(t); len(ran(r)) != 0 {
		t.Fatalf("unchanged: ran %v", ran(r))
	}
	edits := []struct {
		name, file, body string
		step             string
		cm, key, want    string
	}{
		{"a resource of the base outside the overlay's folder", "deploy/base/cm.yaml",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {v: base-2, p: none, r: none}\n", "kust", "prod-cm", "v", "base-2"},
		{"a component", "deploy/components/extra/extra.yaml",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {v: component-2}\n", "kust", "prod-extra", "v", "component-2"},
		{"a patch file", "deploy/base/patch.yaml",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {p: patch-2}\n", "kust", "prod-cm", "p", "patch-2"},
		{"a configMapGenerator file", "deploy/base/gen.properties", "k=gen-2\n", "kust", "prod-gen", "gen.properties", "k=gen-2\n"},
		{"a replacements file", "deploy/base/replacements.yaml",
			"- source: {kind: ConfigMap, name: source, fieldPath: data.second}\n  targets: [{select: {kind: ConfigMap, name: cm}, fieldPaths: [data.r]}]\n", "kust", "prod-cm", "r", "from-second"},
		{"a chart's file:// dependency outside its folder", "libs/common/values.yaml", "message: common-2\n", "chart", "common", "message", "common-2"},
		{"a valuesFrom file", "values/app.yaml", "greeting: values-2\n", "chart", "app", "greeting", "values-2"},
	}
	for i, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			s.writeFile(t, e.file, e.body)
			if r := s.apply(t); fmt.Sprint(ran(r)) != "["+e.step+"]" {
				t.Fatalf("edited %s: ran %v, want [%s]", e.file, ran(r), e.step)
			}
			if got := s.configMap(t, e.cm, e.key); got != e.want {
				t.Fatalf("after editing %s: ConfigMap %s %s = %q, want %q", e.file, e.cm, e.key, got, e.want)
			}
			// a cosmetic edit of the spec: everything resumes
			s.writeSpec(t, i+1)
			if r := s.apply(t); len(ran(r)) != 0 {
				t.Fatalf("a cosmetic edit of the spec (form %d): ran %v", (i+1)%4, ran(r))
			}
		})
	}
}

// TestResumeBrokenKustomization: a kustomization broken after a
// successful run fails at its own step with kustomize's error; the other
// steps still resume, and fixing it re-runs it.
func TestResumeBrokenKustomization(t *testing.T) {
	s := newResumeSpec(t)
	s.apply(t)
	s.writeFile(t, "deploy/base/kustomization.yaml", "resources: [cm.yaml, missing.yaml]\n")
	r, res := applyJSON(t, "apply", s.path, kubeEnv(t))
	if res.Code != 1 || fmt.Sprint(ran(r)) != "[kust]" {
		t.Fatalf("broken base: exit %d, ran %v\n%s", res.Code, ran(r), res.Stderr)
	}
	status, _, errText, _ := r.step(t, "kust")
	if status != "failed" || !strings.Contains(errText, "missing.yaml") || !strings.Contains(errText, "kustomize ./deploy/overlays/prod") {
		t.Fatalf("the kust step: %s %q", status, errText)
	}
	s.writeFile(t, "deploy/base/kustomization.yaml", resumeTree["deploy/base/kustomization.yaml"])
	if r := s.apply(t); fmt.Sprint(ran(r)) != "[kust]" {
		t.Fatalf("fixed: ran %v", ran(r))
	}
	if r := s.apply(t); len(ran(r)) != 0 {
		t.Fatalf("unchanged after the fix: ran %v", ran(r))
	}
}

// TestResumeRemoteInputsAreNamed: a url: source is identified by its URL,
// so new content behind it does not re-run the step (as the spec says);
// status (text and JSON) and plan say which steps depend on such content.
func TestResumeRemoteInputsAreNamed(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "remote")
	var version atomic.Int32
	version.Store(1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: remote}\ndata: {v: \"%d\"}\n", version.Load())
	}))
	defer srv.Close()
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: remote
    apply: {namespace: %[1]s, manifests: [{url: "%[2]s/cm.yaml"}]}
  - name: local
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n"}]}
`, ns, srv.URL))
	if _, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("apply: %s", res.Stderr)
	}
	version.Store(2)
	if r, _ := applyJSON(t, "apply", spec, kubeEnv(t)); len(ran(r)) != 0 {
		t.Fatalf("new content behind an unchanged url: ran %v (the spec identifies remote content by reference)", ran(r))
	}
	want := "manifests[0] (url " + srv.URL + "/cm.yaml)"
	res := run(t, bins.Kubectl, kubeEnv(t), "", "status", "-f", spec, "-o", "json")
	var st struct {
		Steps []struct {
			Name          string   `json:"name"`
			HashCannotSee []string `json:"hashCannotSee"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil || len(st.Steps) != 2 {
		t.Fatalf("status -o json: %v\n%s", err, res.Stdout)
	}
	if fmt.Sprint(st.Steps[0].HashCannotSee) != "["+want+"]" || st.Steps[1].HashCannotSee != nil {
		t.Fatalf("status -o json: %+v", st.Steps)
	}
	res = run(t, bins.Kubectl, kubeEnv(t), "", "status", "-f", spec)
	if !strings.Contains(res.Stdout, "Remote content the input hashes cannot see") || !strings.Contains(res.Stdout, "remote  "+want) {
		t.Fatalf("status:\n%s", res.Stdout)
	}
	for _, args := range [][]string{{"plan", "-f", spec}, {"plan", "-f", spec, "--offline"}} {
		res = run(t, bins.Kubectl, kubeEnv(t), "", args...)
		if res.Code != 0 || !strings.Contains(res.Stdout, "↳ the input hash cannot see "+want) || strings.Count(res.Stdout, "cannot see") != 1 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, res.Code, res.Stdout, res.Stderr)
		}
	}
}

// BenchmarkNoopRerunKustomize: a no-op re-run of a spec of 10 kustomize
// steps (overlays over a shared base outside their folders) with the state
// record: every step resumes, its kustomization checked by replaying the
// record's reads, not built.
func BenchmarkNoopRerunKustomize(b *testing.B) {
	ns := testcluster.Get(b).NewNamespace(b, "noopk")
	dir := b.TempDir()
	var spec strings.Builder
	fmt.Fprintf(&spec, "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: %[1]s}\nstate: {namespace: %[1]s}\nsteps:\n", ns)
	files := map[string]string{
		"base/kustomization.yaml": "resources: [cm.yaml]\nconfigMapGenerator: [{name: gen, files: [gen.properties]}]\n",
		"base/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {v: base}\n",
		"base/gen.properties":     "k=1\n",
	}
	for i := range 10 {
		files[fmt.Sprintf("overlays/o%d/kustomization.yaml", i)] = fmt.Sprintf("namePrefix: o%d-\nresources: [../../base]\npatches: [{path: patch.yaml}]\n", i)
		files[fmt.Sprintf("overlays/o%d/patch.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {o: \"%d\"}\n", i)
		fmt.Fprintf(&spec, "  - name: k%d\n    apply: {namespace: %s, manifests: [{kustomize: ./overlays/o%d}]}\n", i, ns, i)
	}
	files["spec.yaml"] = spec.String()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(dir, "spec.yaml")
	env := []string{"KUBECONFIG=" + testcluster.Get(b).Kubeconfig}
	if res := runB(b, bins.Kubectl, env, "apply", "-f", path); res.Code != 0 {
		b.Fatalf("first apply: %s", res.Stderr)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := runB(b, bins.Kubectl, env, "apply", "-f", path)
		if res.Code != 0 {
			b.Fatalf("exit %d: %s", res.Code, res.Stderr)
		}
		if strings.Count(res.Stdout, "unchanged since it succeeded") != 10 {
			b.Fatalf("every step must resume:\n%s", res.Stdout)
		}
		b.ReportMetric(float64(res.Elapsed.Milliseconds()), "ms/run")
	}
}
