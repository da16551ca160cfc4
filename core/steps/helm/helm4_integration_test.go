//go:build integration

package helm_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/testing/steptest"
)

// runOut runs the CLI and returns its standard output, standard error
// and error, failing nothing: for a comparison of what helm refuses.
func (h *helmCmd) runOut(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = h.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// cmpChart is a chart for the comparisons: a ConfigMap of values, a
// values schema, NOTES. extra adds or replaces files.
func cmpChart(t *testing.T, extra map[string]string) string {
	files := map[string]string{
		"cmp/Chart.yaml":  "apiVersion: v2\nname: cmp\nversion: 0.1.0\n",
		"cmp/values.yaml": "tag: latest\nreplicas: 1\nnested: {n: 0}\nlist: [0]\n",
		"cmp/values.schema.json": `{"type": "object", "properties": {"replicas": {"type": "integer"}}}
`,
		"cmp/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cmp
data:
  tag: {{ .Values.tag | quote }}
  replicas: {{ .Values.replicas | quote }}
  n: {{ .Values.nested.n | quote }}
  first: {{ index .Values.list 0 | quote }}
`,
		"cmp/templates/NOTES.txt": "Release {{ .Release.Name }} is in {{ .Release.Namespace }}; tag {{ .Values.tag }}.\n",
	}
	maps.Copy(files, extra)
	return filepath.Join(writeFiles(t, files), "cmp")
}

// managers is the (manager, operation) pairs of an object's managed
// fields, but those of status subresources, sorted.
func managers(mf []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range mf {
		if e.Subresource == "" {
			out = append(out, e.Manager+"/"+string(e.Operation))
		}
	}
	slices.Sort(out)
	return out
}

func (f *fixture) cmpConfigMap(ns, name string) (map[string]string, []string) {
	f.t.Helper()
	cm, err := f.clients.Typed.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("ConfigMap %s/%s: %v", ns, name, err)
	}
	return cm.Data, managers(cm.ManagedFields)
}

// releaseSecret returns the managers and the decoded applyMethod of a
// revision's storage Secret.
func (f *fixture) releaseManagers(ns, release string, revision int) []string {
	f.t.Helper()
	s, err := f.clients.Typed.CoreV1().Secrets(ns).Get(context.Background(), fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision), metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return managers(s.ManagedFields)
}

// applyMethod is the release's applyMethod as helm 4 records it, read with
// helm 4's own `helm get metadata`.
func applyMethod(t *testing.T, h *helmCmd, ns, release string) string {
	t.Helper()
	out := h.run(t, "get", "metadata", release, "-n", ns, "-o", "yaml")
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "applyMethod: "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("helm get metadata has no applyMethod:\n%s", out)
	return ""
}

// warnings captures a request's warnings.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) add(text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.list, "\n")
}

// TestAsHelm4: a helm step does what the helm 4 CLI does on the same
// chart and values, side by side on the test cluster (issue 32): each
// subtest runs helm 4 in one namespace and khook in another, and
// compares.
func TestAsHelm4(t *testing.T) {
	f := newFixture(t)
	helm4 := newHelmCmd(t, "helm 4", helm4Version, f.cluster.Kubeconfig)
	step := func(name, chart, ns, more string) string {
		return fmt.Sprintf("name: %s\nhelm:\n  chart: %s\n  namespace: %s\n%s", name, chart, ns, more)
	}

	t.Run("installs server-side as manager helm, unknown fields refused", func(t *testing.T) {
		f := f.on(t)
		chart := cmpChart(t, nil)
		nsH, nsK := f.cluster.NewNamespace(t, "as4-ssa-h"), f.cluster.NewNamespace(t, "as4-ssa-k")
		helm4.run(t, "install", "app", chart, "-n", nsH)
		f.apply(f.request(step("app", chart, nsK, ""), steptest.Options{}))
		dataH, mgrH := f.cmpConfigMap(nsH, "app-cmp")
		dataK, mgrK := f.cmpConfigMap(nsK, "app-cmp")
		if !maps.Equal(dataH, dataK) || !slices.Equal(mgrH, mgrK) || !slices.Equal(mgrK, []string{"helm/Apply"}) {
			t.Errorf("ConfigMap: helm 4 %v %v, khook %v %v; want the same, managed by helm/Apply", dataH, mgrH, dataK, mgrK)
		}
		if h, k := applyMethod(t, helm4, nsH, "app"), applyMethod(t, helm4, nsK, "app"); h != "ssa" || k != h {
			t.Errorf("applyMethod: helm 4 %q, khook %q", h, k)
		}
		// helm writes its storage Secrets without a field manager, so the
		// server names the manager after helm's user agent ("Helm");
		// khook's are written as its field manager (decision 221)
		if h, k := f.releaseManagers(nsH, "app", 1), f.releaseManagers(nsK, "app", 1); !slices.Equal(h, []string{"Helm/Update"}) || !slices.Equal(k, []string{"helm/Update"}) {
			t.Errorf("release Secret managers: helm 4 %v, khook %v", h, k)
		}

		typo := cmpChart(t, map[string]string{"cmp/templates/typo.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-typo\ndta:\n  a: b\n"})
		nsH2, nsK2 := f.cluster.NewNamespace(t, "as4-typo-h"), f.cluster.NewNamespace(t, "as4-typo-k")
		_, stderr, err := helm4.runOut(t, "install", "typo", typo, "-n", nsH2)
		const refused = ".dta: field not declared in schema"
		if err == nil || !strings.Contains(stderr, refused) {
			t.Fatalf("helm 4 installs a chart with an unknown field: %v\n%s", err, stderr)
		}
		kerr := f.applyErr(f.request(step("typo", typo, nsK2, ""), steptest.Options{}))
		if !strings.Contains(kerr.Error(), refused) {
			t.Errorf("khook: %v; helm 4: %s", kerr, stderr)
		}
		if !f.gone(nsK2, "ConfigMap", "typo-typo") {
			t.Error("khook created the ConfigMap with the unknown field")
		}
	})

	t.Run("each upgrades the other's release without a conflict", func(t *testing.T) {
		f := f.on(t)
		chart := cmpChart(t, nil)
		ns := f.cluster.NewNamespace(t, "as4-turns")
		helm4.run(t, "install", "byhelm", chart, "-n", ns, "--set", "tag=one")
		f.apply(f.request(step("byhelm", chart, ns, "  values: {tag: two}"), steptest.Options{}))
		if data, mgr := f.cmpConfigMap(ns, "byhelm-cmp"); data["tag"] != "two" || !slices.Equal(mgr, []string{"helm/Apply"}) {
			t.Errorf("khook's upgrade of helm 4's release: %v %v", data, mgr)
		}
		f.apply(f.request(step("bykhook", chart, ns, "  values: {tag: one}"), steptest.Options{}))
		helm4.run(t, "upgrade", "bykhook", chart, "-n", ns, "--set", "tag=two")
		if data, mgr := f.cmpConfigMap(ns, "bykhook-cmp"); data["tag"] != "two" || !slices.Equal(mgr, []string{"helm/Apply"}) {
			t.Errorf("helm 4's upgrade of khook's release: %v %v", data, mgr)
		}
		for _, rel := range []string{"byhelm", "bykhook"} {
			if m := applyMethod(t, helm4, ns, rel); m != "ssa" {
				t.Errorf("%s: applyMethod %q after the other's upgrade", rel, m)
			}
		}
	})

	t.Run("a release installed client-side is upgraded client-side", func(t *testing.T) {
		f := f.on(t)
		// how khook installed releases before: helm 4 --server-side=false
		chart := cmpChart(t, nil)
		nsH, nsK := f.cluster.NewNamespace(t, "as4-csa-h"), f.cluster.NewNamespace(t, "as4-csa-k")
		for _, ns := range []string{nsH, nsK} {
			helm4.run(t, "install", "old", chart, "-n", ns, "--server-side=false", "--set", "tag=one")
		}
		helm4.run(t, "upgrade", "old", chart, "-n", nsH, "--set", "tag=two")
		f.apply(f.request(step("old", chart, nsK, "  values: {tag: two}"), steptest.Options{}))
		dataH, mgrH := f.cmpConfigMap(nsH, "old-cmp")
		dataK, mgrK := f.cmpConfigMap(nsK, "old-cmp")
		if !maps.Equal(dataH, dataK) || !slices.Equal(mgrH, mgrK) || !slices.Equal(mgrK, []string{"helm/Update"}) {
			t.Errorf("upgrade of a client-side release: helm 4 %v %v, khook %v %v", dataH, mgrH, dataK, mgrK)
		}
		if h, k := applyMethod(t, helm4, nsH, "old"), applyMethod(t, helm4, nsK, "old"); h != "csa" || k != h {
			t.Errorf("applyMethod after the upgrade: helm 4 %q, khook %q", h, k)
		}
	})

	t.Run("createNamespace: after rendering and the schema, labelled as helm", func(t *testing.T) {
		f := f.on(t)
		chart := cmpChart(t, nil)
		broken := cmpChart(t, map[string]string{"cmp/templates/fail.yaml": `{{ fail "refused by the chart" }}`})
		for _, c := range []struct{ name, chart, set, values, want string }{
			{"schema", chart, "replicas=many", "{replicas: many}", "replicas"},
			{"template", broken, "tag=x", "{tag: x}", "refused by the chart"},
		} {
			nsH, nsK := "as4-nsfail-h-"+c.name, "as4-nsfail-k-"+c.name
			f.deleteNamespaceLater(nsH)
			f.deleteNamespaceLater(nsK)
			_, stderr, err := helm4.runOut(t, "install", "x", c.chart, "-n", nsH, "--create-namespace", "--set", c.set)
			if err == nil || !strings.Contains(stderr, c.want) {
				t.Fatalf("%s: helm 4 installed: %v %s", c.name, err, stderr)
			}
			kerr := f.applyErr(f.request(step("x", c.chart, nsK, "  createNamespace: true\n  values: "+c.values), steptest.Options{}))
			if !strings.Contains(kerr.Error(), c.want) {
				t.Errorf("%s: khook's error %v", c.name, kerr)
			}
			for _, ns := range []string{nsH, nsK} {
				_, err := f.clients.Typed.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					t.Errorf("%s: namespace %s left behind by a failed install (%v)", c.name, ns, err)
				}
			}
		}
		nsH, nsK := "as4-ns-h", "as4-ns-k"
		f.deleteNamespaceLater(nsH)
		f.deleteNamespaceLater(nsK)
		helm4.run(t, "install", "x", chart, "-n", nsH, "--create-namespace")
		f.apply(f.request(step("x", chart, nsK, "  createNamespace: true"), steptest.Options{}))
		h, k := f.namespaceLabels(nsH), f.namespaceLabels(nsK)
		want := map[string]string{"name": nsK, "kubernetes.io/metadata.name": nsK, "app.kubernetes.io/managed-by": "khook"}
		if h["name"] != nsH || h["kubernetes.io/metadata.name"] != nsH || len(h) != 2 || !maps.Equal(k, want) {
			t.Errorf("namespace labels: helm 4 %v, khook %v (want helm's and khook's managed-by)", h, k)
		}
	})

	t.Run("values: integers as --set renders them", func(t *testing.T) {
		f := f.on(t)
		chart := cmpChart(t, nil)
		nsH, nsK := f.cluster.NewNamespace(t, "as4-int-h"), f.cluster.NewNamespace(t, "as4-int-k")
		helm4.run(t, "install", "v", chart, "-n", nsH, "--set", "tag=20240101,replicas=3,nested.n=1234567,list={20240101}")
		f.apply(f.request(step("v", chart, nsK, "  values: {tag: 20240101, replicas: 3, nested: {n: 1234567}, list: [20240101]}"), steptest.Options{}))
		dataH, _ := f.cmpConfigMap(nsH, "v-cmp")
		dataK, _ := f.cmpConfigMap(nsK, "v-cmp")
		if !maps.Equal(dataH, dataK) || dataK["tag"] != "20240101" || dataK["first"] != "20240101" {
			t.Errorf("helm 4 --set %v, khook values %v", dataH, dataK)
		}
		// valuesFrom files are read as helm reads -f files
		dir := writeFiles(t, map[string]string{"v.yaml": "tag: 20240101\nnested: {n: 1234567}\n"})
		nsH2, nsK2 := f.cluster.NewNamespace(t, "as4-file-h"), f.cluster.NewNamespace(t, "as4-file-k")
		helm4.run(t, "install", "v", chart, "-n", nsH2, "-f", filepath.Join(dir, "v.yaml"))
		f.apply(f.request(step("v", chart, nsK2, "  valuesFrom: [{file: "+filepath.Join(dir, "v.yaml")+"}]"), steptest.Options{}))
		dataH, _ = f.cmpConfigMap(nsH2, "v-cmp")
		dataK, _ = f.cmpConfigMap(nsK2, "v-cmp")
		if !maps.Equal(dataH, dataK) {
			t.Errorf("helm 4 -f %v, khook valuesFrom %v", dataH, dataK)
		}
	})

	t.Run("field manager: every write", func(t *testing.T) {
		f := f.on(t)
		chart := cmpChart(t, nil)
		ns := f.cluster.NewNamespace(t, "as4-fm")
		r := f.request(step("fm", chart, ns, "  createNamespace: true"), steptest.Options{})
		r.req.FieldManager = "ops"
		f.apply(r)
		if _, mgr := f.cmpConfigMap(ns, "fm-cmp"); !slices.Equal(mgr, []string{"ops/Apply"}) {
			t.Errorf("ConfigMap managers %v", mgr)
		}
		if mgr := f.releaseManagers(ns, "fm", 1); !slices.Equal(mgr, []string{"ops/Update"}) {
			t.Errorf("release Secret managers %v", mgr)
		}
		r = f.request(step("fm", chart, ns, "  values: {tag: two}"), steptest.Options{})
		r.req.FieldManager = "ops"
		f.apply(r)
		if data, mgr := f.cmpConfigMap(ns, "fm-cmp"); data["tag"] != "two" || !slices.Equal(mgr, []string{"ops/Apply"}) {
			t.Errorf("after the upgrade: %v %v", data, mgr)
		}
	})

	t.Run("warnings, NOTES and the rendered-document error", func(t *testing.T) {
		f := f.on(t)
		chart := cmpChart(t, map[string]string{"cmp/Chart.yaml": "apiVersion: v2\nname: cmp\nversion: 0.1.0\ndeprecated: true\n"})
		nsH, nsK := f.cluster.NewNamespace(t, "as4-warn-h"), f.cluster.NewNamespace(t, "as4-warn-k")
		stdout, stderr, err := helm4.runOut(t, "install", "w", chart, "-n", nsH)
		if err != nil || !strings.Contains(stderr, "this chart is deprecated") {
			t.Fatalf("helm 4: %v\n%s", err, stderr)
		}
		r := f.request(step("w", chart, nsK, ""), steptest.Options{})
		var warned warnings
		var notes string
		r.req.Warn = warned.add
		r.req.Notes = func(release, text string) { notes = text }
		f.apply(r)
		if warned.String() != "this chart is deprecated" {
			t.Errorf("khook's warnings %q", warned.String())
		}
		_, helmNotes, _ := strings.Cut(stdout, "NOTES:\n")
		if want := strings.ReplaceAll(strings.TrimSpace(helmNotes), nsH, nsK); strings.TrimSpace(notes) != want || want == "" {
			t.Errorf("NOTES: khook %q, helm 4 %q", notes, want)
		}

		const planted = "values-text-planted"
		kindless := cmpChart(t, map[string]string{"cmp/templates/bad.yaml": "metadata:\n  name: bad\ndata:\n  v: {{ .Values.tag }}\n"})
		_, stderr, err = helm4.runOut(t, "install", "bad", kindless, "-n", nsH, "--set", "tag="+planted)
		const words = "[apiVersion not set, kind not set]"
		if err == nil || !strings.Contains(stderr, words) {
			t.Fatalf("helm 4: %v\n%s", err, stderr)
		}
		kerr := f.applyErr(f.request(step("bad", kindless, nsK, "  values: {tag: "+planted+"}"), steptest.Options{}))
		if !strings.Contains(kerr.Error(), words) || strings.Contains(kerr.Error(), planted) {
			t.Errorf("khook: %v\nhelm 4: %s", kerr, stderr)
		}
	})

	t.Run("a dependency missing from charts/: helm refuses, khook says it resolves it", func(t *testing.T) {
		f := f.on(t)
		dir := writeFiles(t, map[string]string{
			"parent/Chart.yaml":        "apiVersion: v2\nname: parent\nversion: 0.1.0\ndependencies:\n- name: child\n  version: 0.1.0\n  repository: file://../child\n",
			"parent/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-parent\n",
			"child/Chart.yaml":         "apiVersion: v2\nname: child\nversion: 0.1.0\n",
			"child/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-child\n",
		})
		ns := f.cluster.NewNamespace(t, "as4-dep")
		_, stderr, err := helm4.runOut(t, "install", "d", filepath.Join(dir, "parent"), "-n", ns)
		if err == nil || !strings.Contains(stderr, "missing in charts/") {
			t.Fatalf("helm 4 installed a chart whose dependency is missing: %v\n%s", err, stderr)
		}
		r := f.request(step("d", filepath.Join(dir, "parent"), ns, ""), steptest.Options{})
		f.apply(r)
		if !strings.Contains(r.logs(), "dependency child is missing from charts/: resolving child 0.1.0 from file://../child in memory, as helm install --dependency-update would") {
			t.Errorf("progress:\n%s", r.logs())
		}
	})
}
