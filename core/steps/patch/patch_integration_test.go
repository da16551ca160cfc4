//go:build integration

package patch_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/kube"
	khplan "khook.io/core/plan"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/steps/patch"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
	"khook.io/core/waiter"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func get(t *testing.T, c *kube.Clients, typ, ns, name string) *unstructured.Unstructured {
	t.Helper()
	m, err := c.MappingForType(context.Background(), typ)
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.Resource(m, ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func nested(t *testing.T, u *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func run(t *testing.T, req *step.Request) (step.Outcome, error) {
	t.Helper()
	return steptest.Run(patch.New(), req)
}

func plan(t *testing.T, req *step.Request) step.Prediction {
	t.Helper()
	return steptest.Plan(t, patch.New(), req)
}

func request(t *testing.T, c *kube.Clients, y string, opts ...steptest.Options) *step.Request {
	t.Helper()
	o := steptest.Options{Timeout: 30 * time.Second}
	if len(opts) > 0 {
		o = opts[0]
	}
	return steptest.Request(t, c, y, o)
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web, old: label}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: main, image: example.invalid/main:1}
      - {name: sidecar, image: example.invalid/sidecar:1}
`

func TestStrategicIsTheDefault(t *testing.T) {
	c, ns := steptest.Setup(t, "patch-strategic")
	steptest.Create(t, c, ns, deployment)
	// strategic merges the containers list by name: only main changes
	req := request(t, c, `name: bump
patch:
  target: deployment/web
  namespace: `+ns+`
  patch:
    spec:
      template:
        spec:
          containers:
          - name: main
            image: example.invalid/main:2
`)
	p := plan(t, req)
	if p.Action.Word != khplan.ActionPatch || !reflect.DeepEqual(p.Details, []string{".spec.template.spec.containers"}) {
		t.Errorf("plan = %+v, want patch of .spec.template.spec.containers", p)
	}
	if _, err := run(t, req); err != nil {
		t.Fatal(err)
	}
	d := get(t, c, "deployments", ns, "web")
	containers := nested(t, d, "spec", "template", "spec", "containers").([]any)
	if len(containers) != 2 || containers[0].(map[string]any)["image"] != "example.invalid/main:2" || containers[1].(map[string]any)["image"] != "example.invalid/sidecar:1" {
		t.Errorf("containers after a strategic patch = %v, want main:2 and sidecar:1", containers)
	}
	if p := plan(t, req); p.Action.Word != khplan.ActionNoOp {
		t.Errorf("plan after = %+v, want no-op", p)
	}
	out, err := run(t, req)
	if err != nil || !strings.Contains(out.Message, "unchanged") {
		t.Errorf("second run = %+v, %v; want unchanged", out, err)
	}
}

func TestMergeReplacesLists(t *testing.T) {
	c, ns := steptest.Setup(t, "patch-merge")
	steptest.Create(t, c, ns, deployment)
	req := request(t, c, `name: m
patch:
  target: deploy/web
  namespace: `+ns+`
  type: merge
  patch:
    metadata:
      labels:
        old: null
        new: label
    spec:
      template:
        spec:
          containers:
          - name: only
            image: example.invalid/only:1
`)
	if _, err := run(t, req); err != nil {
		t.Fatal(err)
	}
	d := get(t, c, "deployments", ns, "web")
	if got := d.GetLabels(); !reflect.DeepEqual(got, map[string]string{"app": "web", "new": "label"}) {
		t.Errorf("labels = %v", got)
	}
	if containers := nested(t, d, "spec", "template", "spec", "containers").([]any); len(containers) != 1 {
		t.Errorf("a merge patch did not replace the list: %v", containers)
	}
}

func TestJSONPatch(t *testing.T) {
	c, ns := steptest.Setup(t, "patch-json")
	steptest.Create(t, c, ns, deployment)
	req := request(t, c, `name: j
patch:
  target: Deployment/web
  namespace: `+ns+`
  type: json
  patch:
  - {op: replace, path: /spec/replicas, value: 3}
  - {op: remove, path: /spec/template/spec/containers/1}
  - {op: add, path: /metadata/labels/added, value: "yes"}
`)
	p := plan(t, req)
	want := []string{".metadata.labels.added", ".spec.replicas", ".spec.template.spec.containers"}
	if p.Action.Word != khplan.ActionPatch || !reflect.DeepEqual(p.Details, want) {
		t.Errorf("plan = %+v, want patch of %v", p, want)
	}
	if _, err := run(t, req); err != nil {
		t.Fatal(err)
	}
	d := get(t, c, "deployments", ns, "web")
	if r := nested(t, d, "spec", "replicas"); r != int64(3) {
		t.Errorf("replicas = %v", r)
	}
	if containers := nested(t, d, "spec", "template", "spec", "containers").([]any); len(containers) != 1 {
		t.Errorf("containers = %v", containers)
	}
	// a remove of an index that no longer exists fails on the re-run, with
	// the server's reason
	req = request(t, c, "name: j\npatch:\n  target: deployment/web\n  namespace: "+ns+"\n  type: json\n  patch:\n  - {op: remove, path: /spec/template/spec/containers/1}")
	_, err := run(t, req)
	if err == nil || !strings.HasPrefix(err.Error(), "Deployment "+ns+"/web: json patch failed: ") {
		t.Errorf("err = %v", err)
	}
}

func TestMissingTarget(t *testing.T) {
	c, ns := steptest.Setup(t, "patch-missing")
	req := request(t, c, "name: x\npatch:\n  target: daemonset/aws-node\n  namespace: "+ns+"\n  patch: {metadata: {labels: {a: b}}}")
	_, err := run(t, req)
	want := "DaemonSet " + ns + "/aws-node not found: a patch needs an existing target (order this step after the one creating it with needs:)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if !apierrors.IsNotFound(err) {
		t.Error("the error does not unwrap to the NotFound status")
	}
	if p := plan(t, req); p.Action.Word != khplan.ActionUnknown || p.Reason != "DaemonSet "+ns+"/aws-node does not exist yet" {
		t.Errorf("plan = %+v", p)
	}
}

func TestDefaultAndClusterScopedNamespace(t *testing.T) {
	c, ns := steptest.Setup(t, "patch-ns")
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: \"1\"}")
	// namespace from the request's default
	req := request(t, c, "name: x\npatch:\n  target: configmap/cm\n  patch: {data: {a: \"2\"}}")
	req.DefaultNamespace = ns
	if _, err := run(t, req); err != nil {
		t.Fatal(err)
	}
	if v := nested(t, get(t, c, "configmaps", ns, "cm"), "data", "a"); v != "2" {
		t.Errorf("data.a = %v", v)
	}
	// a cluster-scoped kind ignores namespace
	req = request(t, c, "name: x\npatch:\n  target: namespace/"+ns+"\n  namespace: elsewhere\n  type: merge\n  patch: {metadata: {labels: {patched: \"yes\"}}}")
	out, err := run(t, req)
	if err != nil {
		t.Fatal(err)
	}
	if out.Message != "Namespace "+ns+" patched (merge)" {
		t.Errorf("message = %q", out.Message)
	}
	if l := get(t, c, "namespaces", "", ns).GetLabels()["patched"]; l != "yes" {
		t.Errorf("label = %q", l)
	}
}

func TestStrategicOnCustomResource(t *testing.T) {
	c, ns := steptest.Setup(t, "patch-cr")
	group := ns + ".khook.test"
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.` + group + `}
spec:
  group: ` + group + `
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`
	steptest.Create(t, c, "", crd)
	t.Cleanup(func() {
		_ = c.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
			Delete(context.Background(), "widgets."+group, metav1.DeleteOptions{})
	})
	crdMapping, err := c.MappingForType(context.Background(), "customresourcedefinitions")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waiter.Until(ctx, c, []waiter.Target{{Mapping: crdMapping, Name: "widgets." + group}}, mustWaitFor(t, "condition=Established"), nil); err != nil {
		t.Fatal(err)
	}
	steptest.Create(t, c, ns, "apiVersion: "+group+"/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1, parts: [a, b]}")

	req := request(t, c, "name: x\npatch:\n  target: widget."+group+"/w\n  namespace: "+ns+"\n  patch: {spec: {size: 2}}")
	_, err = run(t, req)
	want := "Widget " + ns + "/w: a strategic merge patch is not supported for custom resources (the server answered 415 Unsupported Media Type): use type: merge (RFC 7386), or type: json for list surgery"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	if !apierrors.IsUnsupportedMediaType(err) {
		t.Error("the error does not unwrap to the 415 status")
	}
	// merge works, on the kind written as Widget
	req = request(t, c, "name: x\npatch:\n  target: Widget/w\n  namespace: "+ns+"\n  type: merge\n  patch: {spec: {size: 2}}")
	if p := plan(t, req); p.Action.Word != khplan.ActionPatch || !reflect.DeepEqual(p.Details, []string{".spec.size"}) {
		t.Errorf("plan = %+v", p)
	}
	if _, err := run(t, req); err != nil {
		t.Fatal(err)
	}
	if v := nested(t, get(t, c, "widgets."+group, ns, "w"), "spec", "size"); v != int64(2) {
		t.Errorf("spec.size = %v", v)
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	c, ns := steptest.Setup(t, "patch-secret")
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}")
	const secret = "pl@nted s3cret value"
	// an invalid label value: the server's error quotes it
	req := request(t, c, "name: x\npatch:\n  target: configmap/cm\n  namespace: "+ns+"\n  patch: {metadata: {labels: {token: \"${TOKEN}\"}}}",
		steptest.Options{Timeout: 30 * time.Second, Env: []string{"KHOOK_SECRET_TOKEN=" + secret}})
	_, err := run(t, req)
	if err == nil {
		t.Fatal("an invalid label value was accepted")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error shows the secret: %v", err)
	}
	if !strings.Contains(err.Error(), "***") {
		t.Errorf("err = %v, want the server's message with the value masked", err)
	}
	t.Logf("error: %v", err)
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Error("the error does not unwrap to the API status")
	}
	// the plan's dry run fails the same way, masked too
	_, perr := step.PlanStep(context.Background(), patch.New(), req)
	if perr == nil || strings.Contains(perr.Error(), secret) {
		t.Errorf("plan err = %v", perr)
	}
}

func mustWaitFor(t *testing.T, s string) spec.WaitFor {
	t.Helper()
	w, err := spec.ParseWaitFor(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
