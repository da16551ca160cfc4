//go:build integration

package delete_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/kube"
	"khook.io/core/redact"
	"khook.io/core/step"
	"khook.io/core/steps/apply"
	deletestep "khook.io/core/steps/delete"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
	"khook.io/core/waiter"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

type env struct {
	t       *testing.T
	c       *testcluster.Cluster
	clients *kube.Clients
	ns      string
}

func newEnv(t *testing.T) *env {
	c := testcluster.Get(t)
	return &env{t: t, c: c, clients: steptest.Clients(t, c.RESTConfig(t)), ns: c.NewNamespace(t, "delete")}
}

func (e *env) request(yaml string, opts ...steptest.Options) *step.Request {
	e.t.Helper()
	var o steptest.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return steptest.Request(e.t, e.clients, yaml, o)
}

func run(t *testing.T, req *step.Request) (step.Outcome, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), req.Timeout)
	defer cancel()
	return step.RunStep(ctx, deletestep.New(deletestep.Options{}), req)
}

func mustRun(t *testing.T, req *step.Request) step.Outcome {
	t.Helper()
	out, err := run(t, req)
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	return out
}

func (e *env) configMap(ns, name string, labels map[string]string, finalizers ...string) *corev1.ConfigMap {
	e.t.Helper()
	cm, err := e.clients.Typed.CoreV1().ConfigMaps(ns).Create(e.t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Finalizers: finalizers},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cm
}

func (e *env) exists(ns, name string) bool {
	e.t.Helper()
	_, err := e.clients.Typed.CoreV1().ConfigMaps(ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	return err == nil
}

// waitExists waits, by watch, until the ConfigMap ns/name exists.
func (e *env) waitExists(ns, name string) {
	e.t.Helper()
	m, err := e.clients.Mapper.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1")
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	defer cancel()
	exists := func(*unstructured.Unstructured) (bool, string, error) { return true, "exists", nil }
	if err := waiter.Wait(ctx, e.clients, waiter.Options{Targets: []waiter.Target{{Mapping: m, Namespace: ns, Name: name}}, Check: exists}); err != nil {
		e.t.Fatal(err)
	}
}

func cmYAML(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

// manifestsStep is a delete-by-manifests step with inline manifests.
func manifestsStep(fields string, docs ...string) string {
	var b strings.Builder
	b.WriteString("name: del\ndelete:\n")
	for _, l := range strings.Split(strings.TrimSpace(fields), "\n") {
		if l != "" {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("  manifests:\n")
	for _, d := range docs {
		b.WriteString("    - inline: |\n")
		for _, l := range strings.Split(strings.TrimRight(d, "\n"), "\n") {
			b.WriteString("        " + l + "\n")
		}
	}
	return b.String()
}

func TestDeleteByManifests(t *testing.T) {
	e := newEnv(t)
	apps := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: x}]}\n"
	applyReq := steptest.Request(t, e.clients, "name: a\napply:\n  namespace: "+e.ns+"\n  manifests:\n    - inline: |\n"+indent(cmYAML("a")+"---\n"+cmYAML("b")+"---\n"+apps, 8), steptest.Options{})
	if _, err := step.RunStep(t.Context(), apply.New(apply.Options{}), applyReq); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, e.request(manifestsStep("namespace: "+e.ns, cmYAML("a")+"---\n"+cmYAML("b"), apps)))
	if out.Message != "deleted 3 objects" {
		t.Errorf("message %q", out.Message)
	}
	if e.exists(e.ns, "a") || e.exists(e.ns, "b") {
		t.Error("objects left")
	}
	if _, err := e.clients.Typed.AppsV1().Deployments(e.ns).Get(t.Context(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment: %v", err)
	}
	// absent is success by default
	out = mustRun(t, e.request(manifestsStep("namespace: "+e.ns, cmYAML("a"))))
	if out.Message != "nothing to delete: 1 object already gone" {
		t.Errorf("message %q", out.Message)
	}
	// ignoreNotFound: false deletes what exists, then fails naming the absent
	e.configMap(e.ns, "present", nil)
	_, err := run(t, e.request(manifestsStep("namespace: "+e.ns+"\nignoreNotFound: false", cmYAML("present")+"---\n"+cmYAML("missing"))))
	if err == nil || err.Error() != "not found: ConfigMap/missing in "+e.ns {
		t.Errorf("error %v", err)
	}
	if e.exists(e.ns, "present") {
		t.Error("the present object was not deleted")
	}
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(pad + l + "\n")
	}
	return b.String()
}

func TestDeleteByKindName(t *testing.T) {
	e := newEnv(t)
	e.configMap(e.ns, "target", nil)
	e.configMap(e.ns, "bystander", nil)
	out := mustRun(t, e.request("name: d\ndelete:\n  resource: configmap/target\n  namespace: "+e.ns))
	if out.Message != "deleted ConfigMap/target in "+e.ns {
		t.Errorf("message %q", out.Message)
	}
	if e.exists(e.ns, "target") || !e.exists(e.ns, "bystander") {
		t.Error("wrong objects deleted")
	}
	out = mustRun(t, e.request("name: d\ndelete:\n  resource: configmap/target\n  namespace: "+e.ns))
	if out.Message != "nothing to delete: configmap/target in namespace "+e.ns+" not found" {
		t.Errorf("message %q", out.Message)
	}
	_, err := run(t, e.request("name: d\ndelete:\n  resource: configmap/target\n  namespace: "+e.ns+"\n  ignoreNotFound: false"))
	if err == nil || err.Error() != "configmap/target in namespace "+e.ns+": not found" {
		t.Errorf("ignoreNotFound false: %v", err)
	}
	// kinds as kubectl spells them, and the request's default namespace
	e.configMap(e.ns, "short", nil)
	req := e.request("name: d\ndelete:\n  resource: cm/short")
	req.DefaultNamespace = e.ns
	mustRun(t, req)
	if e.exists(e.ns, "short") {
		t.Error("cm/short not deleted")
	}
	_, err = run(t, e.request("name: d\ndelete:\n  resource: nosuchkinds/x\n  namespace: "+e.ns))
	if err == nil || !strings.Contains(err.Error(), `the server doesn't have a resource type "nosuchkinds"`) {
		t.Errorf("unknown type: %v", err)
	}
}

func TestDeleteBySelectors(t *testing.T) {
	e := newEnv(t)
	other := e.c.NewNamespace(t, "delete-other")
	e.configMap(e.ns, "a1", map[string]string{"tier": "a"})
	e.configMap(e.ns, "a2", map[string]string{"tier": "a"})
	e.configMap(e.ns, "b1", map[string]string{"tier": "b"})
	e.configMap(other, "a3", map[string]string{"tier": "a"})

	out := mustRun(t, e.request("name: d\ndelete:\n  resource: configmaps\n  namespace: "+e.ns+"\n  selector: tier=a"))
	if out.Message != "deleted 2 configmaps (namespace "+e.ns+")" {
		t.Errorf("message %q", out.Message)
	}
	if e.exists(e.ns, "a1") || e.exists(e.ns, "a2") || !e.exists(e.ns, "b1") || !e.exists(other, "a3") {
		t.Error("label selector deleted the wrong objects")
	}

	out = mustRun(t, e.request("name: d\ndelete:\n  resource: configmaps\n  namespace: "+e.ns+"\n  fieldSelector: metadata.name=b1"))
	if out.Message != "deleted ConfigMap/b1 in "+e.ns || e.exists(e.ns, "b1") {
		t.Errorf("field selector: %q", out.Message)
	}

	// allNamespaces, with a label unique to this test
	uniq := strings.TrimPrefix(e.ns, "delete-")
	e.configMap(e.ns, "u1", map[string]string{"run": uniq})
	e.configMap(other, "u2", map[string]string{"run": uniq})
	out = mustRun(t, e.request("name: d\ndelete:\n  resource: configmaps\n  allNamespaces: true\n  selector: run="+uniq))
	if out.Message != "deleted 2 configmaps (all namespaces)" || e.exists(e.ns, "u1") || e.exists(other, "u2") || !e.exists(other, "a3") {
		t.Errorf("allNamespaces: %q", out.Message)
	}

	// nothing matches
	out = mustRun(t, e.request("name: d\ndelete:\n  resource: configmaps\n  namespace: "+e.ns+"\n  selector: tier=none"))
	if out.Message != "nothing to delete: configmaps matching selector tier=none in namespace "+e.ns+" matched nothing" {
		t.Errorf("message %q", out.Message)
	}
	_, err := run(t, e.request("name: d\ndelete:\n  resource: configmaps\n  namespace: "+e.ns+"\n  selector: tier=none\n  ignoreNotFound: false"))
	if err == nil || err.Error() != "configmaps matching selector tier=none in namespace "+e.ns+": matched nothing" {
		t.Errorf("ignoreNotFound false: %v", err)
	}
}

// A bare type deletes every object of it in the namespace; an object a
// controller re-creates at once (kube-root-ca.crt) counts as gone.
func TestDeleteBareType(t *testing.T) {
	e := newEnv(t)
	e.configMap(e.ns, "x", nil)
	e.configMap(e.ns, "y", nil)
	// the root CA publisher adds kube-root-ca.crt to a new namespace at its
	// own pace (on a loaded machine, after the two above)
	e.waitExists(e.ns, "kube-root-ca.crt")
	out := mustRun(t, e.request("name: d\ndelete:\n  resource: configmaps\n  namespace: "+e.ns))
	if out.Message != "deleted 3 configmaps (namespace "+e.ns+")" {
		t.Errorf("message %q", out.Message)
	}
	if e.exists(e.ns, "x") || e.exists(e.ns, "y") {
		t.Error("objects left")
	}
}

// The step waits until the objects are really gone: a finalizer holds one
// for a second.
func TestDeleteWaitsUntilGone(t *testing.T) {
	e := newEnv(t)
	e.configMap(e.ns, "held", nil, "khook.test/hold")
	go func() {
		time.Sleep(time.Second)
		_, _ = e.clients.Typed.CoreV1().ConfigMaps(e.ns).Patch(context.Background(), "held", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	}()
	began := time.Now()
	mustRun(t, e.request("name: d\ndelete:\n  resource: configmap/held\n  namespace: "+e.ns))
	if d := time.Since(began); d < 900*time.Millisecond {
		t.Errorf("returned after %v, before the object was gone", d)
	}
	if e.exists(e.ns, "held") {
		t.Error("still there")
	}
	// bounded by the timeout
	e.configMap(e.ns, "stuck", nil, "khook.test/hold")
	t.Cleanup(func() {
		_, _ = e.clients.Typed.CoreV1().ConfigMaps(e.ns).Patch(context.Background(), "stuck", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	})
	req := e.request("name: d\ndelete:\n  resource: configmap/stuck\n  namespace: " + e.ns)
	req.Timeout = time.Second
	if _, err := run(t, req); err == nil || !strings.Contains(err.Error(), "wait until deleted") {
		t.Errorf("error %v", err)
	}
}

func TestDeleteLeastPrivilege(t *testing.T) {
	e := newEnv(t)
	lim := steptest.Clients(t, e.c.LimitedRESTConfig(t))
	e.configMap(e.ns, "guarded", nil)
	_, err := run(t, steptest.Request(t, lim, "name: d\ndelete:\n  resource: configmap/guarded\n  namespace: "+e.ns, steptest.Options{}))
	want := fmt.Sprintf(`configmap/guarded in namespace %s: configmaps "guarded" is forbidden: User "khook-limited" cannot get resource "configmaps" in API group "" in the namespace "%s"`, e.ns, e.ns)
	if err == nil || err.Error() != want {
		t.Errorf("\n got %v\nwant %s", err, want)
	}
	_, err = run(t, steptest.Request(t, lim, "name: d\ndelete:\n  resource: configmaps\n  namespace: "+e.ns+"\n  selector: a=b", steptest.Options{}))
	if err == nil || !strings.Contains(err.Error(), `cannot list resource "configmaps" in API group "" in the namespace "`+e.ns+`"`) {
		t.Errorf("list: %v", err)
	}
	if !e.exists(e.ns, "guarded") {
		t.Error("deleted despite the refusal")
	}
	// allowed in its own namespace
	e.configMap(e.c.LimitedNamespace, "mine-"+e.ns, nil)
	out, err := run(t, steptest.Request(t, lim, "name: d\ndelete:\n  resource: configmap/mine-"+e.ns+"\n  namespace: "+e.c.LimitedNamespace, steptest.Options{}))
	if err != nil || !strings.HasPrefix(out.Message, "deleted ") {
		t.Errorf("own namespace: %v %q", err, out.Message)
	}
}

func TestDeletePlan(t *testing.T) {
	e := newEnv(t)
	e.configMap(e.ns, "p1", map[string]string{"k": "v"})
	ex := deletestep.New(deletestep.Options{})
	plan := func(yaml string) step.Prediction {
		t.Helper()
		p, err := ex.Plan(t.Context(), e.request(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := plan("name: d\ndelete:\n  resource: configmaps\n  namespace: " + e.ns + "\n  selector: k=v")
	if p.Action.Word != "delete" || len(p.Details) != 1 || p.Details[0] != "delete ConfigMap/p1 in "+e.ns {
		t.Errorf("selector: %+v", p)
	}
	p = plan("name: d\ndelete:\n  resource: configmap/none\n  namespace: " + e.ns)
	if p.Action.Word != "no-op" || p.Reason != "configmap/none in namespace "+e.ns+" not found" {
		t.Errorf("absent: %+v", p)
	}
	p = plan(manifestsStep("namespace: "+e.ns, cmYAML("p1")+"---\n"+cmYAML("p2")))
	if p.Action.Word != "delete" || strings.Join(p.Details, "|") != "delete ConfigMap/p1 in "+e.ns+"|absent ConfigMap/p2 in "+e.ns {
		t.Errorf("manifests: %+v", p)
	}
	p = plan(manifestsStep("namespace: "+e.ns, cmYAML("p3")))
	if p.Action.Word != "no-op" {
		t.Errorf("manifests, none: %+v", p)
	}
	if !e.exists(e.ns, "p1") {
		t.Fatal("plan deleted")
	}
}

// A planted secret never reaches an error, even in a server message.
func TestDeleteSecretRedacted(t *testing.T) {
	e := newEnv(t)
	const secret = "Pl4nted-S3cret"
	red := redact.New()
	_, err := run(t, e.request("name: d\ndelete:\n  resource: configmaps\n  namespace: "+e.ns+"\n  selector: token=${TOKEN}\n  ignoreNotFound: false",
		steptest.Options{Env: []string{"KHOOK_SECRET_TOKEN=" + secret}, Redactor: red}))
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "token=***") {
		t.Errorf("error %v", err)
	}
}
