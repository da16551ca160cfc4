package helm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"

	"khook.io/core/redact"
)

func TestNearestVersions(t *testing.T) {
	avail := []string{"0.1.0", "0.2.0", "0.2.1", "1.0.0", "1.1.0-rc.1", "2.0.0", "not-a-version"}
	for _, tc := range []struct {
		want string
		n    int
		out  []string
	}{
		{"0.3.0", 4, []string{"0.2.0", "0.2.1", "1.0.0", "1.1.0-rc.1"}},
		{"0.3.0", 2, []string{"0.2.1", "1.0.0"}},
		{"9.0.0", 3, []string{"1.0.0", "1.1.0-rc.1", "2.0.0"}},
		{"0.0.1", 2, []string{"0.1.0", "0.2.0"}},
		{"", 3, []string{"2.0.0", "1.1.0-rc.1", "1.0.0"}},                                  // latest first
		{"~0.5", 2, []string{"2.0.0", "1.1.0-rc.1"}},                                       // a constraint: latest
		{"0.2.0", 3, []string{"0.1.0", "0.2.0", "0.2.1"}},                                  // includes the version itself
		{"v1.0.0", 1, []string{"1.0.0"}},                                                   // v prefix parses
		{"1.0.0", 10, []string{"0.1.0", "0.2.0", "0.2.1", "1.0.0", "1.1.0-rc.1", "2.0.0"}}, // all valid ones
	} {
		if got := nearestVersions(avail, tc.want, tc.n); !reflect.DeepEqual(got, tc.out) {
			t.Errorf("nearestVersions(%q, %d) = %v, want %v", tc.want, tc.n, got, tc.out)
		}
	}
	if got := nearestVersions(nil, "1.0.0", 3); len(got) != 0 {
		t.Errorf("no versions: got %v", got)
	}
}

func testIndex(t *testing.T) *repo.IndexFile {
	t.Helper()
	idx := repo.NewIndexFile()
	for _, v := range []string{"0.1.0", "0.2.0", "0.2.5", "1.0.0", "1.1.0-beta.1"} {
		if err := idx.MustAdd(&chart.Metadata{APIVersion: "v2", Name: "demo", Version: v}, "charts/demo-"+v+".tgz", "", "sha256:0"); err != nil {
			t.Fatal(err)
		}
	}
	if err := idx.MustAdd(&chart.Metadata{APIVersion: "v2", Name: "demo-extra", Version: "1.0.0"}, "charts/demo-extra-1.0.0.tgz", "", "sha256:0"); err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := parseIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

func TestResolveVersion(t *testing.T) {
	idx := testIndex(t)
	for _, tc := range []struct{ version, want string }{
		{"", "1.0.0"}, // latest stable, the prerelease skipped
		{"0.2.0", "0.2.0"},
		{"~0.2", "0.2.5"},
		{">=0.1 <1", "0.2.5"},
		{"1.1.0-beta.1", "1.1.0-beta.1"}, // an exact prerelease
	} {
		cv, err := resolveVersion(idx, "demo", tc.version)
		if err != nil {
			t.Errorf("version %q: %v", tc.version, err)
			continue
		}
		if cv.Version != tc.want {
			t.Errorf("version %q resolved to %s, want %s", tc.version, cv.Version, tc.want)
		}
	}

	_, err := resolveVersion(idx, "demo", "0.3.0")
	want := `chart "demo" has no version 0.3.0; nearest available versions: 0.1.0, 0.2.0, 0.2.5, 1.0.0, 1.1.0-beta.1 (latest 1.1.0-beta.1)`
	if err == nil || err.Error() != want {
		t.Errorf("missing version:\n got %v\nwant %s", err, want)
	}
	_, err = resolveVersion(idx, "demo", "~3.0")
	if err == nil || !strings.Contains(err.Error(), "latest available versions: 1.1.0-beta.1, 1.0.0, 0.2.5") {
		t.Errorf("unmatched constraint: %v", err)
	}
	_, err = resolveVersion(idx, "demo", "not a version!")
	if err == nil || !strings.Contains(err.Error(), "neither a version nor a constraint") {
		t.Errorf("invalid version: %v", err)
	}
	_, err = resolveVersion(idx, "dem", "")
	if err == nil || err.Error() != `no chart "dem" in the repository (did you mean demo, demo-extra?)` {
		t.Errorf("missing chart: %v", err)
	}
}

func TestParseIndex(t *testing.T) {
	data := []byte(`apiVersion: v1
entries:
  demo:
    - name: demo
      version: 0.1.0
      urls: [charts/demo-0.1.0.tgz]
    - name: demo
      version: not-semver!
      urls: [charts/demo-x.tgz]
    - name: demo
      version: 0.2.0
      urls: [https://other.example/demo-0.2.0.tgz]
`)
	idx, err := parseIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cv := range idx.Entries["demo"] {
		got = append(got, cv.Version)
	}
	if !reflect.DeepEqual(got, []string{"0.2.0", "0.1.0"}) {
		t.Errorf("versions = %v, want the valid ones, newest first", got)
	}
	for _, bad := range []string{"", "entries: {}", "{{{"} {
		if _, err := parseIndex([]byte(bad)); err == nil {
			t.Errorf("parseIndex(%q): no error", bad)
		}
	}
}

func TestMergeValues(t *testing.T) {
	base := map[string]any{
		"a": 1.0,
		"m": map[string]any{"x": "base", "y": "base", "deep": map[string]any{"k": "base", "keep": true}},
		"l": []any{"base"},
		"s": map[string]any{"replaced": "by a scalar"},
	}
	over := map[string]any{
		"m": map[string]any{"y": "over", "deep": map[string]any{"k": "over"}},
		"l": []any{"over"},
		"s": "scalar",
		"n": nil,
	}
	got := MergeValues(base, over)
	want := map[string]any{
		"a": 1.0,
		"m": map[string]any{"x": "base", "y": "over", "deep": map[string]any{"k": "over", "keep": true}},
		"l": []any{"over"},
		"s": "scalar",
		"n": nil,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MergeValues =\n%v\nwant\n%v", got, want)
	}
	if base["m"].(map[string]any)["y"] != "base" {
		t.Error("MergeValues changed its base")
	}
}

// TestValuesOrder: valuesFrom entries merge in order (files and URLs), and
// inline values win, deep-merged like helm -f.
func TestValuesOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("one.yaml", "greeting: one\ncolor: one\nnested: {size: one, shape: one}\nlist: [1, 2]\n")
	write("empty.yaml", "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != "user" || p != "pa:ss" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "color: url\nnested: {shape: url}\nlist: [3]\n")
	}))
	defer srv.Close()
	c := NewClient(Env{BaseDir: dir, HTTP: srv.Client(), Redactor: redact.New()})
	urlWithAuth := strings.Replace(srv.URL, "http://", "http://user:pa%3Ass@", 1)
	vals, err := c.Values(context.Background(),
		[]ValuesSource{{File: "one.yaml"}, {File: "empty.yaml"}, {URL: urlWithAuth}},
		map[string]any{"greeting": "inline", "nested": map[string]any{"size": "inline"}, "count": 3, "odd": map[any]any{1: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"greeting": "inline",
		"color":    "url",
		"nested":   map[string]any{"size": "inline", "shape": "url"},
		"list":     []any{3.0},
		"count":    3.0,
		"odd":      map[string]any{"1": "x"},
	}
	if !sameValues(vals, want) {
		t.Errorf("values =\n%v\nwant\n%v", vals, want)
	}

	_, err = c.Values(context.Background(), []ValuesSource{{File: "missing.yaml"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "valuesFrom[0] missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	write("list.yaml", "- a\n- b\n")
	_, err = c.Values(context.Background(), []ValuesSource{{File: "one.yaml"}, {File: "list.yaml"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "valuesFrom[1] list.yaml: not a YAML mapping") {
		t.Errorf("a list: %v", err)
	}
	_, err = c.Values(context.Background(), []ValuesSource{{URL: strings.Replace(srv.URL, "http://", "http://user:wrong-Pass@", 1)}}, nil)
	if err == nil || strings.Contains(err.Error(), "wrong-Pass") || !strings.Contains(err.Error(), "401") {
		t.Errorf("bad credentials: %v", err)
	}
}

func TestSameValues(t *testing.T) {
	a := map[string]any{"n": 3, "m": map[string]any{"x": []any{1, "a"}}}
	b := map[string]any{"n": 3.0, "m": map[string]any{"x": []any{1.0, "a"}}}
	if !sameValues(a, b) {
		t.Error("ints and floats of the same value differ")
	}
	if !sameValues(nil, map[string]any{}) {
		t.Error("nil and empty values differ")
	}
	if sameValues(a, map[string]any{"n": 4}) {
		t.Error("different values are the same")
	}
}

func TestCredentials(t *testing.T) {
	red := redact.New()
	base, creds := splitUserinfo("https://us%40er:p%40ss%3Aw%2Frd@charts.example/path", red)
	if base != "https://charts.example/path" {
		t.Errorf("base = %q", base)
	}
	if creds == nil || creds.Username != "us@er" || creds.Password != "p@ss:w/rd" {
		t.Errorf("credentials = %+v, want them URL-decoded", creds)
	}
	if got := red.String("token p@ss:w/rd here"); strings.Contains(got, "p@ss:w/rd") {
		t.Errorf("the password is not registered for redaction: %q", got)
	}
	if _, creds := splitUserinfo("https://charts.example", red); creds != nil {
		t.Errorf("no userinfo: %+v", creds)
	}
	u := withCredentials("https://charts.example/index.yaml", &Credentials{Username: "u", Password: "p@ss/w"})
	if u != "https://u:p%40ss%2Fw@charts.example/index.yaml" {
		t.Errorf("withCredentials = %q", u)
	}
	if !sameHost("https://a.example/x", "https://a.example/charts") || sameHost("https://a.example", "https://b.example") ||
		sameHost("http://a.example", "https://a.example") {
		t.Error("sameHost")
	}
}

// repoServer serves an index of the demo chart at several versions, behind
// basic auth when user is set. It counts requests by path.
func repoServer(t *testing.T, user, pass string, versions ...string) (*httptest.Server, *sync.Map) {
	t.Helper()
	charts := map[string][]byte{}
	idx := repo.NewIndexFile()
	for _, v := range versions {
		data := packageChart(t, demoChart(t, v))
		name := "demo-" + v + ".tgz"
		charts["/charts/"+name] = data
		if err := idx.MustAdd(&chart.Metadata{APIVersion: "v2", Name: "demo", Version: v}, "charts/"+name, "", "sha256:0"); err != nil {
			t.Fatal(err)
		}
	}
	index, err := yaml.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	var hits sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := hits.LoadOrStore(r.URL.Path, new(int))
		*n.(*int)++
		if user != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if r.URL.Path == "/index.yaml" {
			_, _ = w.Write(index)
			return
		}
		if data, ok := charts[r.URL.Path]; ok {
			_, _ = w.Write(data)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// demoChart writes a minimal chart into a new directory.
func demoChart(t *testing.T, version string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	files := map[string]string{
		"Chart.yaml":                "apiVersion: v2\nname: demo\nversion: " + version + "\n",
		"values.yaml":               "greeting: hello\n",
		"templates/configmap.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
		"templates/_helpers.tpl":    "",
		"charts/.gitkeep-not-chart": "",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func packageChart(t *testing.T, dir string) []byte {
	t.Helper()
	ch, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	file, err := chartutil.Save(ch, out)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLoadChartFromRepo(t *testing.T) {
	srv, hits := repoServer(t, "user", "s3cret-pw", "0.1.0", "0.2.0", "1.0.0")
	red := redact.New()
	c := NewClient(Env{HTTP: srv.Client(), Redactor: red})
	ctx := context.Background()

	ch, err := c.LoadChart(ctx, Source{Chart: "demo:0.2.0", Repo: srv.URL, Auth: &Credentials{Username: "user", Password: "s3cret-pw"}})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Name != "demo" || ch.Version != "0.2.0" || ch.Ref != "demo 0.2.0 from "+srv.URL {
		t.Errorf("chart = %+v", ch)
	}
	withUser := strings.Replace(srv.URL, "http://", "http://user:s3cret-pw@", 1)
	ch, err = c.LoadChart(ctx, Source{Chart: "demo", Repo: withUser})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Version != "1.0.0" || strings.Contains(ch.Ref, "s3cret") {
		t.Errorf("latest through userinfo: %+v", ch)
	}

	_, err = c.LoadChart(ctx, Source{Chart: "demo", Repo: srv.URL, Version: "0.3.0", Auth: &Credentials{Username: "user", Password: "s3cret-pw"}})
	want := "chart demo 0.3.0 from " + srv.URL + `: chart "demo" has no version 0.3.0; nearest available versions: 0.1.0, 0.2.0, 1.0.0 (latest 1.0.0)`
	if err == nil || err.Error() != want {
		t.Errorf("missing version:\n got %v\nwant %s", err, want)
	}

	_, err = c.LoadChart(ctx, Source{Chart: "demo", Repo: strings.Replace(srv.URL, "http://", "http://user:Wr0ng-pw@", 1)})
	if err == nil || strings.Contains(err.Error(), "Wr0ng-pw") || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("wrong password: %v", err)
	}
	if n, ok := hits.Load("/index.yaml"); !ok || *n.(*int) != 4 {
		t.Errorf("index fetched %v times, want once per LoadChart", n)
	}
}

func TestLoadLocalChart(t *testing.T) {
	dir := demoChart(t, "0.4.0")
	base := filepath.Dir(dir)
	if err := os.WriteFile(filepath.Join(base, "demo-0.4.0.tgz"), packageChart(t, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	c := NewClient(Env{BaseDir: base, Redactor: redact.New()})
	for _, src := range []string{"./demo", "./demo-0.4.0.tgz", dir} {
		ch, err := c.LoadChart(context.Background(), Source{Chart: src})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if ch.Name != "demo" || ch.Version != "0.4.0" || ch.Ref != src {
			t.Errorf("%s: %+v", src, ch)
		}
		// Each load is a fresh copy.
		a, _ := ch.load()
		b, _ := ch.load()
		if a == b || a.Metadata == b.Metadata {
			t.Errorf("%s: load returned a shared chart", src)
		}
	}
	_, err := c.LoadChart(context.Background(), Source{Chart: "./nope"})
	if err == nil || !strings.Contains(err.Error(), "nope does not exist") {
		t.Errorf("missing chart: %v", err)
	}
}

// TestDependencies: a local chart's dependencies that are not vendored are
// fetched like helm dependency build: file:// relative to the chart, an
// HTTP repository at the Chart.lock version; one without a repository is a
// clear error.
func TestDependencies(t *testing.T) {
	srv, _ := repoServer(t, "", "", "0.1.0", "0.2.0", "0.3.0")
	root := t.TempDir()
	sub := demoChart(t, "9.9.9")
	if err := os.Rename(sub, filepath.Join(root, "local-sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "local-sub", "Chart.yaml"), []byte("apiVersion: v2\nname: localsub\nversion: 9.9.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := filepath.Join(root, "parent")
	write := func(name, body string) {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", fmt.Sprintf(`apiVersion: v2
name: parent
version: 1.0.0
dependencies:
  - name: demo
    version: ">=0.1.0"
    repository: %s
  - name: localsub
    version: 9.9.9
    repository: file://../local-sub
`, srv.URL))
	write("Chart.lock", fmt.Sprintf(`dependencies:
  - name: demo
    version: 0.2.0
    repository: %s
  - name: localsub
    version: 9.9.9
    repository: file://../local-sub
digest: sha256:0
generated: "2026-01-01T00:00:00Z"
`, srv.URL))
	write("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: parent\n")

	c := NewClient(Env{BaseDir: root, HTTP: srv.Client(), Redactor: redact.New()})
	ch, err := c.LoadChart(context.Background(), Source{Chart: "./parent"})
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := ch.load()
	if err != nil {
		t.Fatal(err)
	}
	deps := map[string]string{}
	for _, d := range loaded.Dependencies() {
		deps[d.Name()] = d.Metadata.Version
	}
	if !reflect.DeepEqual(deps, map[string]string{"demo": "0.2.0", "localsub": "9.9.9"}) {
		t.Errorf("dependencies = %v, want demo at the locked 0.2.0 and localsub", deps)
	}
	if _, err := os.Stat(filepath.Join(parent, "charts")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the chart directory was written to: %v", err)
	}

	write("Chart.yaml", "apiVersion: v2\nname: parent\nversion: 1.0.0\ndependencies:\n  - name: common\n    version: 1.0.0\n")
	if err := os.Remove(filepath.Join(parent, "Chart.lock")); err != nil {
		t.Fatal(err)
	}
	_, err = c.LoadChart(context.Background(), Source{Chart: "./parent"})
	if err == nil || err.Error() != "chart ./parent: dependency common: not vendored in charts/ and Chart.yaml names no repository to fetch it from" {
		t.Errorf("missing dependency: %v", err)
	}
	write("Chart.yaml", "apiVersion: v2\nname: parent\nversion: 1.0.0\ndependencies:\n  - name: common\n    version: 1.0.0\n    repository: \"@bitnami\"\n")
	_, err = c.LoadChart(context.Background(), Source{Chart: "./parent"})
	if err == nil || !strings.Contains(err.Error(), "khook does not read Helm's repositories.yaml") {
		t.Errorf("repository name: %v", err)
	}
}

func TestBudget(t *testing.T) {
	if got := budget(context.Background(), time.Minute); got != 54*time.Second {
		t.Errorf("1m without a deadline: %v, want 54s (a 10%% margin)", got)
	}
	if got := budget(context.Background(), 10*time.Minute); got != 590*time.Second {
		t.Errorf("10m: %v, want the margin capped at 10s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if got := budget(ctx, time.Hour); got > 18*time.Second || got < 17*time.Second {
		t.Errorf("the deadline wins: %v", got)
	}
	if got := helmTimeout(ctx, Release{Atomic: true, Timeout: time.Hour}); got > 9*time.Second || got < 8*time.Second {
		t.Errorf("atomic keeps half for the rollback: %v", got)
	}
	if got := budget(context.Background(), 0); got != 290*time.Second {
		t.Errorf("no deadline, no timeout: %v, want 5m less the margin", got)
	}
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if got := budget(past, time.Minute); got != time.Millisecond {
		t.Errorf("a past deadline: %v", got)
	}
}

func TestHelmLog(t *testing.T) {
	var l helmLog
	logger := slog.New(&l)
	logger.Debug("waiting for resources", "count", 3)
	logger.Debug("waiting for resource", "namespace", "ns", "name", "app", "kind", "Deployment", "expectedStatus", "Current", "actualStatus", "InProgress")
	logger.Debug("uninstall: Failed to delete release", slog.Any("error", []error{errors.New("boom")}))
	if got := l.lastNotReady(); got != "Deployment ns/app is InProgress" {
		t.Errorf("lastNotReady = %q", got)
	}
	if got := l.lastError(); got != "Failed to delete release: [boom]" {
		t.Errorf("lastError = %q", got)
	}
}

func TestHelmLogKeepsTheFailedWait(t *testing.T) {
	var l helmLog
	logger := slog.New(&l)
	logger.Debug("waiting for resource", "namespace", "ns", "name", "app", "kind", "Deployment", "actualStatus", "InProgress")
	logger.Debug("wait for resources failed", "error", context.DeadlineExceeded)
	logger.Debug("waiting for resource", "namespace", "ns", "name", "app", "kind", "Deployment", "actualStatus", "Failed") // the rollback's wait
	logger.Debug("wait for resources failed", "error", context.DeadlineExceeded)
	if got := l.lastNotReady(); got != "Deployment ns/app is InProgress" {
		t.Errorf("lastNotReady = %q, want the line before the first failed wait", got)
	}
}

func TestFlatten(t *testing.T) {
	for in, want := range map[string]string{
		"install failed: 1 error occurred:\n\t* ConfigMap \"x\" is invalid: bad\n\n": `install failed: ConfigMap "x" is invalid: bad`,
		"2 errors occurred:\n\t* first\n\t* second\n\n":                              "2 errors: first; second",
		"one line": "one line",
		"uninstallation completed with 1 error(s): a\nb": "uninstallation completed with 1 error(s): a b",
	} {
		if got := flatten(in); got != want {
			t.Errorf("flatten(%q) = %q, want %q", in, got, want)
		}
	}
	err := oneLine(fmt.Errorf("wrapped: %w", context.DeadlineExceeded))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("oneLine lost the chain")
	}
	multi := oneLine(fmt.Errorf("1 error occurred:\n\t* %w\n\n", context.Canceled))
	if !errors.Is(multi, context.Canceled) || multi.Error() != "context canceled" {
		t.Errorf("oneLine(multi) = %q", multi)
	}
}

// TestParseIndexAsHelm reads indexes as khook does and as Helm's own loader
// does from a file (what `helm repo add` / `helm install --repo` read), and
// wants the same chart versions from both: entries Helm tolerates are kept
// (a dependency listed twice under one name, as repositories that strip
// aliases write it), entries it drops are dropped, and what it refuses
// whole is refused.
func TestParseIndexAsHelm(t *testing.T) {
	const dupDeps = `apiVersion: v1
entries:
  kps:
    - name: kps
      version: 1.0.0
      apiVersion: v2
      urls: [kps-1.0.0.tgz]
      dependencies:
        - name: common
          version: 1.x
        - name: common
          version: 1.x
    - name: kps
      version: 0.9.0
      apiVersion: v2
      urls: [kps-0.9.0.tgz]
`
	for _, tc := range []struct {
		name, index string
		want        map[string][]string // chart -> versions, newest first; nil: refused
	}{
		{"dependency listed twice under one name", dupDeps, map[string][]string{"kps": {"1.0.0", "0.9.0"}}},
		{"same as JSON", mustJSON(t, dupDeps), map[string][]string{"kps": {"1.0.0", "0.9.0"}}},
		{"invalid version dropped, empty entry dropped", `apiVersion: v1
entries:
  demo:
    - name: demo
      version: 0.1.0
      urls: [demo-0.1.0.tgz]
    -
    - name: demo
      version: not-semver!
      urls: [demo-x.tgz]
`, map[string][]string{"demo": {"0.1.0"}}},
		{"invalid chart name dropped", `apiVersion: v1
entries:
  bad:
    - name: "bad/name"
      version: 1.0.0
      urls: [bad-1.0.0.tgz]
`, map[string][]string{"bad": nil}},
		{"an entry without name or version dropped", `apiVersion: v1
entries:
  x:
    - urls: [x.tgz]
`, map[string][]string{"x": nil}},
		{"unknown field refused, as helm's strict YAML does", `apiVersion: v1
entries: {}
extra: 1
`, nil},
		{"no apiVersion refused", "entries: {}\n", nil},
		{"empty refused", "", nil},
		{"not YAML refused", "{{{", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "index.yaml")
			if err := os.WriteFile(path, []byte(tc.index), 0o600); err != nil {
				t.Fatal(err)
			}
			helmIdx, helmErr := repo.LoadIndexFile(path)
			idx, err := parseIndex([]byte(tc.index))
			if (err != nil) != (helmErr != nil) {
				t.Fatalf("khook error %v, helm error %v: they must agree", err, helmErr)
			}
			if tc.want == nil {
				if err == nil {
					t.Fatal("want the index refused")
				}
				if strings.Contains(err.Error(), os.TempDir()) {
					t.Errorf("error names the temporary file: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			versions := func(idx *repo.IndexFile) map[string][]string {
				out := map[string][]string{}
				for name, cvs := range idx.Entries {
					out[name] = nil
					for _, cv := range cvs {
						out[name] = append(out[name], cv.Version)
					}
				}
				return out
			}
			if got, helm := versions(idx), versions(helmIdx); !reflect.DeepEqual(got, helm) {
				t.Errorf("khook read %v, helm %v", got, helm)
			}
			if got := versions(idx); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("versions = %v, want %v", got, tc.want)
			}
		})
	}

	// what the step resolves: the newest version, whose dependencies repeat
	// a name, is found
	idx, err := parseIndex([]byte(dupDeps))
	if err != nil {
		t.Fatal(err)
	}
	cv, err := resolveVersion(idx, "kps", "")
	if err != nil || cv.Version != "1.0.0" {
		t.Errorf("resolve latest kps: %v, %v; want 1.0.0", cv, err)
	}
}

func mustJSON(t *testing.T, y string) string {
	t.Helper()
	b, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOwnedBy(t *testing.T) {
	owned := map[string]string{"meta.helm.sh/release-name": "app", "meta.helm.sh/release-namespace": "ns"}
	helm := map[string]string{"app.kubernetes.io/managed-by": "Helm"}
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        bool
	}{
		{"the release's", helm, owned, true},
		{"no managed-by label", nil, owned, false},
		{"another release", helm, map[string]string{"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": "ns"}, false},
		{"another namespace", helm, map[string]string{"meta.helm.sh/release-name": "app", "meta.helm.sh/release-namespace": "x"}, false},
		{"no annotations", helm, nil, false},
	} {
		if got := ownedBy(tc.labels, tc.annotations, "app", "ns"); got != tc.want {
			t.Errorf("%s: ownedBy = %v, want %v", tc.name, got, tc.want)
		}
	}
}
