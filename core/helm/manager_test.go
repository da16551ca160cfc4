package helm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

// TestFieldManagerTransport: every write of an operation carries its
// field manager, replacing Helm's; reads and deletes are left alone, and
// the caller's request is not changed.
func TestFieldManagerTransport(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.RawQuery)
	}))
	defer srv.Close()
	client := &http.Client{Transport: fieldManagerTransport("ops")(http.DefaultTransport)}
	for _, c := range []struct{ method, query string }{
		{http.MethodPost, "fieldManager=kubectl-khook"},
		{http.MethodPatch, "fieldManager=helm&force=false"},
		{http.MethodPut, ""},
		{http.MethodPost, "fieldManager=a&fieldManager=b"},
		{http.MethodGet, "fieldManager=x"},
		{http.MethodDelete, ""},
	} {
		u, _ := url.Parse(srv.URL + "/api/v1/namespaces/ns/configmaps?" + c.query)
		req, _ := http.NewRequestWithContext(context.Background(), c.method, u.String(), nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.URL.RawQuery != c.query {
			t.Errorf("the caller's request was changed: %q", req.URL.RawQuery)
		}
	}
	want := []string{"POST fieldManager=ops", "PATCH fieldManager=ops&force=false", "PUT fieldManager=ops", "POST fieldManager=ops", "GET fieldManager=x", "DELETE "}
	if !slices.Equal(seen, want) {
		t.Errorf("requests %q, want %q", seen, want)
	}
}

// TestHelmsNamespaceCreate: the namespace create Install.CreateNamespace
// asks for (one Namespace of the release's namespace, helm's labels) is
// khook's; anything else is Helm's.
func TestHelmsNamespaceCreate(t *testing.T) {
	info := func(kind, name string, labels map[string]string) *resource.Info {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind(kind)
		u.SetName(name)
		u.SetLabels(labels)
		return &resource.Info{Name: name, Object: u, Mapping: &meta.RESTMapping{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: kind}}}
	}
	k := &createNamespaceKube{namespace: "team"}
	for _, c := range []struct {
		name string
		list helmkube.ResourceList
		want bool
	}{
		{"helm's", helmkube.ResourceList{info("Namespace", "team", map[string]string{"name": "team"})}, true},
		{"another namespace", helmkube.ResourceList{info("Namespace", "other", map[string]string{"name": "other"})}, false},
		{"a chart's, other labels", helmkube.ResourceList{info("Namespace", "team", map[string]string{"app": "x"})}, false},
		{"with other objects", helmkube.ResourceList{info("Namespace", "team", map[string]string{"name": "team"}), info("ConfigMap", "c", nil)}, false},
		{"not a namespace", helmkube.ResourceList{info("ConfigMap", "team", map[string]string{"name": "team"})}, false},
	} {
		if got := k.isHelmsNamespace(c.list); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
