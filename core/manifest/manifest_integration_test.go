//go:build integration

package manifest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/kube"
	"khook.io/core/manifest"
	"khook.io/core/spec"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// What Load builds from every source kind is what the API server accepts:
// each object, namespace filled in, passes a server-side dry-run create
// with strict field validation.
func TestLoadedObjectsAreAccepted(t *testing.T) {
	c := testcluster.Get(t)
	clients := steptest.Clients(t, c.RESTConfig(t))
	ns := c.NewNamespace(t, "manifest")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: svc}\n  spec:\n    ports: [{port: 80}]\n")
	}))
	defer srv.Close()

	objs, err := manifest.Load(t.Context(), []spec.ManifestSource{
		{Inline: "apiVersion: v1\nkind: Secret\nmetadata: {generateName: s-}\nstringData: {a: b}\n---\n# nothing\n"},
		{File: "./testdata/kust/base/deployment.yaml"},
		{URL: srv.URL + "/list.yaml"},
		{Kustomize: "./testdata/kust/overlay"},
	}, ".", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 6 {
		t.Fatalf("%d objects, want 6", len(objs))
	}
	for _, o := range objs {
		m, err := clients.MappingFor(context.Background(), o.GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		manifest.SetNamespace(o, kube.Namespaced(m), ns)
		_, err = clients.Resource(m, ns).Create(t.Context(), o, metav1.CreateOptions{
			DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict,
		})
		if err != nil {
			t.Errorf("%s: %v", manifest.Ref(o), err)
		}
	}
}
