package manifest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/spec"
)

func refs(objs []*unstructured.Unstructured) string {
	var s []string
	for _, o := range objs {
		r := Ref(o)
		if o.GetNamespace() != "" {
			r = o.GetNamespace() + ":" + r
		}
		s = append(s, r)
	}
	return strings.Join(s, " ")
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name, in, want, err string
	}{
		{"one", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "ConfigMap/a", ""},
		{"multi with empty and comment-only documents", `
---
# just a comment
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: x}
---

---
apiVersion: v1
kind: Secret
metadata: {generateName: s-}
---
`, "x:ConfigMap/a Secret/s-*", ""},
		{"json document", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"}}`, "ConfigMap/j", ""},
		{"list expanded in place", `
apiVersion: v1
kind: ConfigMap
metadata: {name: first}
---
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
  - {apiVersion: v1, kind: Service, metadata: {name: b}}
---
apiVersion: v1
kind: ConfigMapList
items: []
---
apiVersion: v1
kind: ConfigMap
metadata: {name: last}
`, "ConfigMap/first ConfigMap/a Service/b ConfigMap/last", ""},
		{"a kind ending in List without items is an object", "apiVersion: x.io/v1\nkind: AllowList\nmetadata: {name: a}\n", "AllowList/a", ""},
		{"missing fields", "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: ConfigMap\nmetadata: {}\n", "", "document 2 (line 6): missing apiVersion, metadata.name"},
		{"missing kind", "apiVersion: v1\nmetadata: {name: a}\n", "", "document 1 (line 1): missing kind"},
		{"list item missing name", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n", "", "document 1 (line 1), item 1: missing metadata.name"},
		{"not a mapping", "- a\n- b\n", "", "document 1 (line 1): a manifest must be a mapping, not a list"},
		{"scalar", "---\nhello\n", "", "document 1 (line 2): a manifest must be a mapping, not a string"},
		{"invalid yaml", "apiVersion: v1\nkind: [\n", "", "document 1: invalid YAML at line 2: did not find expected node content"},
		{"bad apiVersion", "apiVersion: a/b/c\nkind: X\nmetadata: {name: a}\n", "", `document 1 (line 1): invalid apiVersion "a/b/c"`},
		{"namespace not a string", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: [x]}\n", "", "metadata.namespace must be a string, not a list"},
		{"empty input", "", "", ""},
		{"comment preamble is not a document", "# header\n\n---\nkind: X\n", "", "document 1 (line 4): missing apiVersion"},
		{"explicit empty documents count", "---\n---\n# c\n---\nkind: X\n", "", "document 3 (line 5): missing apiVersion"},
		{"separator with trailing spaces and CRLF", "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata: {name: a}\r\n---  \r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata: {name: b}\r\n", "ConfigMap/a ConfigMap/b", ""},
		{"--- with text is not a separator", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  x: |\n    --- not a separator\n", "ConfigMap/a", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Decode([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := refs(objs); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Decoding follows kubectl: numbers become int64 (not float64), so the
// objects round-trip through the unstructured helpers.
func TestDecodeLikeKubectl(t *testing.T) {
	objs, err := Decode([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec:\n  replicas: 3\n  paused: yes\n"))
	if err != nil {
		t.Fatal(err)
	}
	n, found, err := unstructured.NestedInt64(objs[0].Object, "spec", "replicas")
	if err != nil || !found || n != 3 {
		t.Fatalf("replicas = %v %v %v, want int64 3", n, found, err)
	}
	// sigs.k8s.io/yaml reads YAML 1.1 booleans, as kubectl does
	if b, _, _ := unstructured.NestedBool(objs[0].Object, "spec", "paused"); !b {
		t.Fatalf("paused = %v, want true", objs[0].Object["spec"])
	}
}

func TestLoadSources(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "two.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: f1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: f2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var hits int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		switch r.URL.Path {
		case "/m.yaml":
			fmt.Fprint(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: u1}\n")
		case "/auth.yaml":
			if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			fmt.Fprint(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: u2}\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	authURL := strings.Replace(srv.URL, "http://", "http://user:pass@", 1) + "/auth.yaml"

	objs, err := Load(context.Background(), []spec.ManifestSource{
		{Inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: i1}\n"},
		{File: "./two.yaml"},
		{URL: srv.URL + "/m.yaml"},
		{URL: authURL},
		{Kustomize: "./kust/base"},
	}, dir, srv.Client())
	if err == nil {
		t.Fatal("kustomize ./kust/base relative to the temp dir should not exist")
	}
	if !strings.Contains(err.Error(), "manifests[4] (kustomize ./kust/base): ") {
		t.Fatalf("error does not name the source: %v", err)
	}

	wd, _ := os.Getwd()
	if err := os.CopyFS(filepath.Join(dir, "kust"), os.DirFS(filepath.Join(wd, "testdata", "kust"))); err != nil {
		t.Fatal(err)
	}
	objs, err = Load(context.Background(), []spec.ManifestSource{
		{Inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: i1}\n"},
		{File: "./two.yaml"},
		{URL: srv.URL + "/m.yaml"},
		{URL: authURL},
		{Kustomize: "./kust/base"},
		{File: filepath.Join(dir, "two.yaml")}, // absolute stays
	}, dir, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	want := "ConfigMap/i1 ConfigMap/f1 ConfigMap/f2 ConfigMap/u1 ConfigMap/u2 ConfigMap/settings Deployment/web ConfigMap/f1 ConfigMap/f2"
	if got := refs(objs); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestLoadErrorsNameSourceAndDocument(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad.yaml" {
			fmt.Fprint(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\n")
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cases := []struct {
		src  spec.ManifestSource
		want string
	}{
		{spec.ManifestSource{Inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\nkind: X\n"}, "manifests[0] (inline), document 3 (line 6): missing apiVersion, metadata.name"},
		{spec.ManifestSource{File: "./nope.yaml"}, "manifests[0] (file ./nope.yaml): no such file or directory"},
		{spec.ManifestSource{URL: srv.URL + "/bad.yaml"}, "manifests[0] (url " + srv.URL + "/bad.yaml), document 2 (line 5): missing metadata.name"},
		{spec.ManifestSource{URL: srv.URL + "/missing.yaml"}, "manifests[0] (url " + srv.URL + "/missing.yaml): 404 Not Found"},
		{spec.ManifestSource{URL: strings.Replace(srv.URL, "http://", "http://u:s3cr3t@", 1) + "/missing.yaml"}, "manifests[0] (url " + strings.Replace(srv.URL, "http://", "http://***@", 1) + "/missing.yaml): 404 Not Found"},
	}
	for _, tc := range cases {
		_, err := Load(context.Background(), []spec.ManifestSource{tc.src}, dir, srv.Client())
		if err == nil || err.Error() != tc.want {
			t.Errorf("error\n got %v\nwant %s", err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("error leaks URL credentials: %v", err)
		}
	}
}

func TestLoadHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Load(ctx, []spec.ManifestSource{{Inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"}}, t.TempDir(), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestKustomizeOverlay(t *testing.T) {
	out, err := Kustomize(context.Background(), "testdata/kust/overlay")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	got := refs(objs)
	for _, want := range []string{"ConfigMap/prod-settings", "Deployment/prod-web", "ConfigMap/prod-generated-"} {
		if !strings.Contains(got, want) {
			t.Errorf("build %q lacks %s", got, want)
		}
	}
	for _, o := range objs {
		if o.GetLabels()["env"] != "prod" {
			t.Errorf("%s lacks the overlay's label: %v", Ref(o), o.GetLabels())
		}
		if o.GetName() == "prod-settings" {
			if mode, _, _ := unstructured.NestedString(o.Object, "data", "mode"); mode != "prod" {
				t.Errorf("patch not applied: mode = %q", mode)
			}
		}
	}
}

func TestKustomizeRefusesRemote(t *testing.T) {
	cases := []struct{ dir, want string }{
		{"remote-git", `testdata/kust/remote-git/kustomization.yaml: resources entry "github.com/example/never//manifests?ref=v1" is remote`},
		{"remote-http", `resources entry "https://example.invalid/manifest.yaml" is remote`},
		{"remote-nested", `testdata/kust/remote-git/kustomization.yaml: resources entry "github.com/example/never//manifests?ref=v1" is remote`},
		{"remote-component", `components entry "git@github.com:example/never.git//component" is remote`},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			_, err := Kustomize(context.Background(), filepath.Join("testdata/kust", tc.dir))
			var re *RemoteError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a RemoteError", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "khook builds local kustomizations only") {
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
		})
	}
	_, err := Load(context.Background(), []spec.ManifestSource{{Kustomize: "./testdata/kust/remote-git"}}, ".", nil)
	if err == nil || !strings.HasPrefix(err.Error(), "manifests[0] (kustomize ./testdata/kust/remote-git): ") {
		t.Fatalf("Load error = %v", err)
	}
}

func TestKustomizeMissingResource(t *testing.T) {
	_, err := Kustomize(context.Background(), "testdata/kust/missing")
	if err == nil || !strings.Contains(err.Error(), "nothere.yaml") {
		t.Fatalf("err = %v, want it to name the missing file", err)
	}
	var re *RemoteError
	if errors.As(err, &re) {
		t.Fatalf("a missing local file is not remote: %v", err)
	}
}

func TestLooksRemote(t *testing.T) {
	for ref, want := range map[string]bool{
		"../base":                          false,
		"base":                             false,
		"deploy.yaml":                      false,
		"dir/with.dots/x":                  false,
		"github.com/org/repo//x":           true,
		"GitHub.com/org/repo":              true,
		"https://github.com/org/repo.git":  true,
		"git::https://host/org/repo":       true,
		"ssh://git@host/org/repo.git":      true,
		"git@github.com:org/repo.git":      true,
		"file:///tmp/repo":                 true,
		"http://example.com/manifest.yaml": true,
	} {
		if got := looksRemote(ref); got != want {
			t.Errorf("looksRemote(%q) = %v, want %v", ref, got, want)
		}
	}
}

// Builds run one at a time (kustomize is not safe for concurrent use);
// under -race, parallel callers must neither race nor fail.
func TestKustomizeConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := Kustomize(context.Background(), "testdata/kust/overlay")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestKustomizeWaitHonoursContext(t *testing.T) {
	kustomizeSem <- struct{}{} // a build in progress
	defer func() { <-kustomizeSem }()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Kustomize(ctx, "testdata/kust/base"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestSetNamespace(t *testing.T) {
	obj := func(ns string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetName("a")
		u.SetNamespace(ns)
		return u
	}
	cases := []struct {
		name       string
		ns         string
		namespaced bool
		def, want  string
	}{
		{"namespaced without one gets the default", "", true, "team", "team"},
		{"namespaced with another keeps it", "other", true, "team", "other"},
		{"cluster-scoped stays without", "", false, "team", ""},
		{"cluster-scoped loses one written on it", "x", false, "team", ""},
	}
	for _, tc := range cases {
		o := obj(tc.ns)
		SetNamespace(o, tc.namespaced, tc.def)
		if got := o.GetNamespace(); got != tc.want {
			t.Errorf("%s: namespace %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Every source splits its documents as kubectl does: "--- # comment"
// separates documents (before, it did not, and all but the first object
// of each source were silently dropped).
func TestLoadCommentedSeparatorsEverySource(t *testing.T) {
	two := func(p string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + p + "1}\n--- # the second\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + p + "2}\n"
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "two.yaml"), []byte(two("f")), 0o644); err != nil {
		t.Fatal(err)
	}
	// a file written on Windows: UTF-8 byte order mark, CRLF line ends
	if err := os.WriteFile(filepath.Join(dir, "bom.yaml"), []byte("\ufeff"+strings.ReplaceAll(two("b"), "\n", "\r\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if err := os.CopyFS(filepath.Join(dir, "kust"), os.DirFS(filepath.Join(wd, "testdata", "separators"))); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, two("u"))
	}))
	defer srv.Close()
	objs, err := Load(context.Background(), []spec.ManifestSource{
		{Inline: two("i")},
		{File: "./two.yaml"},
		{File: "./bom.yaml"},
		{URL: srv.URL + "/two.yaml"},
		{Kustomize: "./kust"},
	}, dir, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	want := "ConfigMap/i1 ConfigMap/i2 ConfigMap/f1 ConfigMap/f2 ConfigMap/b1 ConfigMap/b2 ConfigMap/u1 ConfigMap/u2 ConfigMap/k1 ConfigMap/k2 ConfigMap/k3"
	if got := refs(objs); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// What kubectl would silently drop is an error naming the source, the
// document and the line; every problem of a source is reported.
func TestLoadReportsWhatKubectlWouldDrop(t *testing.T) {
	in := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n...\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\nkind: ConfigMap\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n--- !tag\n"
	_, err := Load(context.Background(), []spec.ManifestSource{{Inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n"}, {Inline: in}}, t.TempDir(), nil)
	want := `manifests[1] (inline), document 1: content after the document end marker "..." at line 4: kubectl would read only the document before it and silently drop the rest; separate documents with "---"
manifests[1] (inline), document 2 (line 9): missing apiVersion, metadata.name
manifests[1] (inline), invalid document separator at line 14: "--- !tag": only white space or a comment may follow "---" on its line (kubectl reads every line starting with "---" as a separator)`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
}
