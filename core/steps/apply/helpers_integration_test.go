//go:build integration

package apply_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"khook.io/core/kube"
	"khook.io/core/step"
	"khook.io/core/steps/apply"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

var (
	cmGVR     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	nsGVR     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	schemaSvc = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// env is one test's cluster access: admin clients (shared like a run's)
// and a fresh namespace.
type env struct {
	t       *testing.T
	c       *testcluster.Cluster
	clients *kube.Clients
	ns      string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := testcluster.Get(t)
	return &env{t: t, c: c, clients: steptest.Clients(t, c.RESTConfig(t)), ns: c.NewNamespace(t, "apply")}
}

// step builds an apply step: fields are lines under apply: (besides
// manifests), sources are manifests entries made by inline() or src().
func stepYAML(name, fields string, sources ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\napply:\n", name)
	for _, l := range strings.Split(strings.TrimSpace(fields), "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString("  " + strings.TrimSpace(l) + "\n")
		}
	}
	b.WriteString("  manifests:\n")
	for _, s := range sources {
		b.WriteString(s)
	}
	return b.String()
}

// inline is a manifests entry holding yaml (dedented).
func inline(yaml string) string {
	var b strings.Builder
	b.WriteString("    - inline: |\n")
	for _, l := range strings.Split(strings.Trim(dedent(yaml), "\n"), "\n") {
		b.WriteString("        " + l + "\n")
	}
	return b.String()
}

// src is a manifests entry such as "file: ./x.yaml".
func src(entry string) string { return "    - " + entry + "\n" }

func dedent(s string) string {
	lines := strings.Split(s, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

func (e *env) request(stepYAML string, opts ...steptest.Options) *step.Request {
	e.t.Helper()
	var o steptest.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return steptest.Request(e.t, e.clients, stepYAML, o)
}

func run(t *testing.T, req *step.Request) step.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), req.Timeout)
	defer cancel()
	out, err := step.RunStep(ctx, apply.New(apply.Options{}), req)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return out
}

func runErr(t *testing.T, req *step.Request) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), req.Timeout)
	defer cancel()
	_, err := step.RunStep(ctx, apply.New(apply.Options{}), req)
	if err == nil {
		t.Fatal("apply succeeded, want an error")
	}
	return err
}

func (e *env) res(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return e.clients.Dynamic.Resource(gvr)
	}
	return e.clients.Dynamic.Resource(gvr).Namespace(ns)
}

func (e *env) get(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	e.t.Helper()
	u, err := e.res(gvr, ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return u
}

func (e *env) absent(gvr schema.GroupVersionResource, ns, name string) bool {
	e.t.Helper()
	_, err := e.res(gvr, ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return apierrors.IsNotFound(err)
}

// crdFixture is a namespaced CRD of a group unique to the test, deleted
// in cleanup.
type crdFixture struct {
	group, kind, plural string
}

func (e *env) crd() crdFixture {
	suffix := fmt.Sprintf("%06d", rand.IntN(1_000_000))
	f := crdFixture{group: "t" + suffix + ".khook.test", kind: "Widget", plural: "widgets"}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.clients.Dynamic.Resource(crdGVR).Delete(ctx, f.plural+"."+f.group, metav1.DeleteOptions{})
	})
	return f
}

func (f crdFixture) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: f.group, Version: "v1", Resource: f.plural}
}

func (f crdFixture) manifest() string {
	return fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: %[2]s, plural: %[3]s, singular: widget, listKind: %[2]sList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
                color: {type: string}
                tags: {type: array, items: {type: string}}
`, f.group, f.kind, f.plural)
}

func (f crdFixture) cr(name string, size int) string {
	return fmt.Sprintf(`
apiVersion: %s/v1
kind: %s
metadata:
  name: %s
spec:
  size: %d
  tags: [a, b]
`, f.group, f.kind, name, size)
}

func configMap(name string, data map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n", name)
	for k, v := range data {
		fmt.Fprintf(&b, "  %s: %q\n", k, v)
	}
	if len(data) == 0 {
		b.WriteString("  {}\n")
	}
	return b.String()
}

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.invalid/web:1.0
          ports: [{containerPort: 8080}]
`
