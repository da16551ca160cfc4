//go:build integration

package apply_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/objects"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/steps/apply"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
	"khook.io/core/waiter"
)

// Every source kind in one step, in order, with namespace defaulting.
func TestApplySources(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(dedent(content)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("two.yaml", configMap("from-file-1", nil)+"---\n# comment only\n---\n"+configMap("from-file-2", nil))
	write("kust/kustomization.yaml", "namePrefix: k-\nresources: [cm.yaml]\nconfigMapGenerator:\n  - name: gen\n    literals: [a=b]\n")
	write("kust/cm.yaml", configMap("from-kustomize", map[string]string{"x": "y"}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, configMap("from-url", nil)+"---\napiVersion: v1\nkind: List\nitems:\n- "+strings.ReplaceAll(strings.TrimSpace(configMap("from-url-list", nil)), "\n", "\n  ")+"\n")
	}))
	defer srv.Close()

	req := e.request(stepYAML("sources", "namespace: "+e.ns,
		inline(configMap("from-inline", map[string]string{"k": "v"})+"---\n"+configMap("from-inline-2", nil)),
		src("file: ./two.yaml"),
		src("url: "+srv.URL+"/m.yaml"),
		src("kustomize: ./kust"),
	), steptest.Options{BaseDir: dir})
	out := run(t, req)
	if want := "applied 8 objects: 8 created"; out.Message != want {
		t.Errorf("message %q, want %q", out.Message, want)
	}
	for _, n := range []string{"from-inline", "from-inline-2", "from-file-1", "from-file-2", "from-url", "from-url-list", "k-from-kustomize"} {
		e.get(cmGVR, e.ns, n)
	}
	list, err := e.res(cmGVR, e.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gen := false
	for _, cm := range list.Items {
		gen = gen || strings.HasPrefix(cm.GetName(), "k-gen-")
	}
	if !gen {
		t.Error("the kustomize configMapGenerator's ConfigMap is missing")
	}
}

func TestApplyKustomizeRemoteBaseRefused(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources:\n  - github.com/example/never//base?ref=v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runErr(t, e.request(stepYAML("remote", "namespace: "+e.ns, src("kustomize: ./")), steptest.Options{BaseDir: dir}))
	for _, want := range []string{"manifests[0] (kustomize ./)", `resources entry "github.com/example/never//base?ref=v1" is remote`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestApplyNamespaceDefaulting(t *testing.T) {
	e := newEnv(t)
	other := e.c.NewNamespace(t, "other")
	role := "khook-test-" + strings.TrimPrefix(e.ns, "apply-")
	t.Cleanup(func() {
		_ = e.clients.Typed.RbacV1().ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{})
	})
	out := run(t, e.request(stepYAML("ns", "namespace: "+e.ns,
		inline(configMap("defaulted", nil)),
		inline(strings.Replace(configMap("elsewhere", nil), "metadata:\n", "metadata:\n  namespace: "+other+"\n", 1)),
		inline(fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s\n  namespace: written-but-cluster-scoped\nrules: []\n", role)),
	)))
	if !strings.HasPrefix(out.Message, "applied 3 objects: 3 created") {
		t.Errorf("message %q", out.Message)
	}
	e.get(cmGVR, e.ns, "defaulted")
	e.get(cmGVR, other, "elsewhere")
	if !e.absent(cmGVR, e.ns, "elsewhere") {
		t.Error("an object with its own namespace was moved into the step's namespace")
	}
	cr, err := e.clients.Typed.RbacV1().ClusterRoles().Get(t.Context(), role, metav1.GetOptions{})
	if err != nil || cr.Namespace != "" {
		t.Fatalf("cluster role: %v, namespace %q", err, cr.GetNamespace())
	}
	// re-applying the cluster-scoped object (whose manifest names a
	// namespace) changes nothing
	out = run(t, e.request(stepYAML("ns", "namespace: "+e.ns,
		inline(fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s\n  namespace: written-but-cluster-scoped\nrules: []\n", role)))))
	if out.Message != "applied 1 object: 1 unchanged" {
		t.Errorf("message %q", out.Message)
	}
}

// Without namespace:, the request's default namespace applies (kubectl's
// -n), then "default".
func TestApplyRequestDefaultNamespace(t *testing.T) {
	e := newEnv(t)
	req := e.request(stepYAML("defns", "", inline(configMap("by-default-ns", nil))))
	req.DefaultNamespace = e.ns
	run(t, req)
	e.get(cmGVR, e.ns, "by-default-ns")
}

func TestApplyCreateNamespace(t *testing.T) {
	e := newEnv(t)
	t.Run("new", func(t *testing.T) {
		name := e.ns + "-new"
		t.Cleanup(func() {
			_ = e.clients.Typed.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		out := run(t, e.request(stepYAML("mkns", "namespace: "+name+"\ncreateNamespace: true", inline(configMap("inside", nil)))))
		if want := "applied 1 object: 1 created; namespace " + name + " created"; out.Message != want {
			t.Errorf("message %q, want %q", out.Message, want)
		}
		e.get(cmGVR, name, "inside")
	})
	t.Run("existing left alone", func(t *testing.T) {
		ns, err := e.clients.Typed.CoreV1().Namespaces().Get(t.Context(), e.ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns.Labels["owner"] = "someone-else"
		ns, err = e.clients.Typed.CoreV1().Namespaces().Update(t.Context(), ns, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := run(t, e.request(stepYAML("mkns", "namespace: "+e.ns+"\ncreateNamespace: true", inline(configMap("inside", nil)))))
		if out.Message != "applied 1 object: 1 created" {
			t.Errorf("message %q", out.Message)
		}
		after, err := e.clients.Typed.CoreV1().Namespaces().Get(t.Context(), e.ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != ns.ResourceVersion || after.Labels["owner"] != "someone-else" {
			t.Errorf("the existing namespace was modified: rv %s -> %s, labels %v", ns.ResourceVersion, after.ResourceVersion, after.Labels)
		}
	})
}

func TestApplySkipIfExists(t *testing.T) {
	e := newEnv(t)
	a := configMap("a", map[string]string{"ready": "no"})
	b := configMap("b", map[string]string{"ready": "yes"})
	fields := "namespace: " + e.ns + "\nskipIf: exists\nwaitFor: jsonpath={.data.ready}=yes"

	// not all exist: the step applies (and waits); a exists beforehand
	run(t, e.request(stepYAML("pre", "namespace: "+e.ns, inline(configMap("a", map[string]string{"ready": "yes"})))))
	out := run(t, e.request(stepYAML("skip", fields, inline(configMap("a", map[string]string{"ready": "yes"})), inline(b))))
	if out.Skipped || out.Message != "applied 2 objects: 1 created, 1 unchanged; jsonpath={.data.ready}=yes met" {
		t.Fatalf("outcome %+v, want an apply", out)
	}
	// now every object exists: skipped, content not enforced, and waitFor
	// still waits on exactly those objects
	if _, err := e.res(cmGVR, e.ns).Patch(t.Context(), "a", types.MergePatchType, []byte(`{"data":{"ready":"no"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rv := e.get(cmGVR, e.ns, "b").GetResourceVersion()
	go func() {
		time.Sleep(time.Second)
		_, _ = e.res(cmGVR, e.ns).Patch(context.Background(), "a", types.MergePatchType, []byte(`{"data":{"ready":"yes"}}`), metav1.PatchOptions{})
	}()
	began := time.Now()
	out = run(t, e.request(stepYAML("skip", fields, inline(a), inline(b))))
	if !out.Skipped || out.SkipReason != "all 2 objects exist (skipIf: exists)" {
		t.Fatalf("outcome %+v, want skipped", out)
	}
	if d := time.Since(began); d < 900*time.Millisecond {
		t.Errorf("skipped after %v: waitFor did not wait for the condition", d)
	}
	if e.get(cmGVR, e.ns, "b").GetResourceVersion() != rv {
		t.Error("a skipped step changed an object")
	}
	// the wait really is enforced: a condition that never holds fails
	req := e.request(stepYAML("skip", "namespace: "+e.ns+"\nskipIf: exists\nwaitFor: jsonpath={.data.ready}=never", inline(a), inline(b)))
	req.Timeout = 2 * time.Second
	if err := runErr(t, req); !strings.Contains(err.Error(), "waitFor jsonpath={.data.ready}=never") {
		t.Errorf("error %q does not name the waitFor", err)
	}
}

func TestApplyServerSide(t *testing.T) {
	e := newEnv(t)
	fields := "namespace: " + e.ns + "\nserverSide: true"
	out := run(t, e.request(stepYAML("ssa", fields, inline(configMap("owned", map[string]string{"mine": "1", "shared": "khook"})))))
	if out.Message != "applied 1 object: 1 created" {
		t.Errorf("message %q", out.Message)
	}
	cm := e.get(cmGVR, e.ns, "owned")
	managers := map[string]string{}
	for _, mf := range cm.GetManagedFields() {
		managers[mf.Manager] = string(mf.Operation)
	}
	if managers["khook"] != "Apply" {
		t.Errorf("managed fields %v, want khook as an Apply manager", managers)
	}
	if _, ok := cm.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok {
		t.Error("server-side apply wrote the client-side last-applied annotation")
	}

	// idempotent
	out = run(t, e.request(stepYAML("ssa", fields, inline(configMap("owned", map[string]string{"mine": "1", "shared": "khook"})))))
	if out.Message != "applied 1 object: 1 unchanged" || e.get(cmGVR, e.ns, "owned").GetResourceVersion() != cm.GetResourceVersion() {
		t.Errorf("second server-side apply: %q", out.Message)
	}

	// another manager (a controller) takes .data.shared over (forced):
	// it is that manager's now, kept, the rest applied (decision 251)
	other := []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owned","namespace":%q},"data":{"shared":"theirs"}}`, e.ns))
	force := true
	if _, err := e.res(cmGVR, e.ns).Patch(t.Context(), "owned", types.ApplyPatchType, other, metav1.PatchOptions{FieldManager: "other-writer", Force: &force}); err != nil {
		t.Fatal(err)
	}
	out = run(t, e.request(stepYAML("ssa", fields, inline(configMap("owned", map[string]string{"mine": "2", "shared": "khook"})))))
	if want := "applied 1 object: 1 configured; kept: ConfigMap/owned data.shared (written by other-writer)"; out.Message != want {
		t.Errorf("message %q, want %q", out.Message, want)
	}
	if data, _, _ := unstructured.NestedStringMap(e.get(cmGVR, e.ns, "owned").Object, "data"); data["shared"] != "theirs" || data["mine"] != "2" {
		t.Errorf("data %v: want shared kept as theirs, mine applied", data)
	}

	// without the drift policy (mode off), khook applies with force:
	// false, as kubectl apply --server-side: the field is a conflict
	fields += "\ndrift: {mode: off}"
	err := runErr(t, e.request(stepYAML("ssa", fields, inline(configMap("owned", map[string]string{"mine": "3", "shared": "khook"})))))
	var ce *objects.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a ConflictError", err, errors.Unwrap(err))
	}
	for _, want := range []string{"ConfigMap/owned apply failed: server-side apply conflict: .data.shared is owned by field manager \"other-writer\"", "force: false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	now := e.get(cmGVR, e.ns, "owned")
	if v, _, _ := unstructured.NestedString(now.Object, "data", "shared"); v != "theirs" {
		t.Errorf("the conflicting field was forced: %q", v)
	}
	if v, _, _ := unstructured.NestedString(now.Object, "data", "mine"); v != "2" {
		t.Errorf("a refused apply changed other fields: mine=%q", v)
	}
	// agreeing with the other manager's value is no conflict
	out = run(t, e.request(stepYAML("ssa", fields, inline(configMap("owned", map[string]string{"mine": "3", "shared": "theirs"})))))
	if out.Message != "applied 1 object: 1 configured" {
		t.Errorf("message %q", out.Message)
	}
}

// Client-side apply patches: fields set by another writer, which the
// manifest never had, survive; fields the manifest drops are removed; the
// object is never replaced.
func TestApplyClientSidePatchesInPlace(t *testing.T) {
	e := newEnv(t)
	fields := "namespace: " + e.ns
	cm1 := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  labels: {team: a}\ndata:\n  keep: \"1\"\n  drop: \"1\"\n"
	run(t, e.request(stepYAML("csa", fields, inline(cm1), inline(deployment))))
	before := e.get(cmGVR, e.ns, "app")
	if _, ok := before.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; !ok {
		t.Fatal("client-side apply did not record the last-applied configuration")
	}
	// another writer
	if _, err := e.res(cmGVR, e.ns).Patch(t.Context(), "app", types.MergePatchType, []byte(`{"metadata":{"labels":{"other":"x"}},"data":{"theirs":"kept"}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.res(deployGVR, e.ns).Patch(t.Context(), "web", types.StrategicMergePatchType, []byte(`{"spec":{"template":{"metadata":{"annotations":{"restarted":"now"}}}}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}

	cm2 := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  labels: {team: b}\ndata:\n  keep: \"2\"\n"
	dep2 := strings.Replace(deployment, "replicas: 2", "replicas: 3", 1)
	out := run(t, e.request(stepYAML("csa", fields, inline(cm2), inline(dep2))))
	if out.Message != "applied 2 objects: 2 configured" {
		t.Errorf("message %q", out.Message)
	}
	after := e.get(cmGVR, e.ns, "app")
	if after.GetUID() != before.GetUID() {
		t.Fatal("the object was replaced")
	}
	data, _, _ := unstructured.NestedStringMap(after.Object, "data")
	if data["keep"] != "2" || data["theirs"] != "kept" || data["drop"] != "" {
		t.Errorf("data %v: want keep=2, theirs kept, drop removed", data)
	}
	if l := after.GetLabels(); l["team"] != "b" || l["other"] != "x" {
		t.Errorf("labels %v", l)
	}
	dep := e.get(deployGVR, e.ns, "web")
	if r, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); r != 3 {
		t.Errorf("replicas %d", r)
	}
	if a, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "metadata", "annotations", "restarted"); a != "now" {
		t.Error("another writer's pod template annotation was lost")
	}
}

// A CRD and a custom resource of it, in one step and in two consecutive
// steps (sharing the run's clients, as the scheduler does).
func TestApplyCRDAndCustomResource(t *testing.T) {
	t.Run("one step", func(t *testing.T) {
		e := newEnv(t)
		f := e.crd()
		out := run(t, e.request(stepYAML("crd", "namespace: "+e.ns, inline(f.manifest()+"---\n"+f.cr("one", 1)))))
		if out.Message != "applied 2 objects: 2 created" {
			t.Errorf("message %q", out.Message)
		}
		cr := e.get(f.gvr(), e.ns, "one")
		// again: the custom resource goes through a JSON merge patch and is unchanged
		out = run(t, e.request(stepYAML("crd", "namespace: "+e.ns, inline(f.manifest()+"---\n"+f.cr("one", 1)))))
		if out.Message != "applied 2 objects: 2 unchanged" {
			t.Errorf("message %q", out.Message)
		}
		out = run(t, e.request(stepYAML("crd", "namespace: "+e.ns, inline(f.manifest()+"---\n"+f.cr("one", 5)))))
		if out.Message != "applied 2 objects: 1 configured, 1 unchanged" {
			t.Errorf("message %q", out.Message)
		}
		after := e.get(f.gvr(), e.ns, "one")
		if n, _, _ := unstructured.NestedInt64(after.Object, "spec", "size"); n != 5 || after.GetUID() != cr.GetUID() {
			t.Errorf("size %d, uid changed %v", n, after.GetUID() != cr.GetUID())
		}
	})
	t.Run("two steps", func(t *testing.T) {
		e := newEnv(t)
		f := e.crd()
		// the run's clients discover before the CRD exists
		if _, err := e.clients.MappingForType(context.Background(), "configmaps"); err != nil {
			t.Fatal(err)
		}
		run(t, e.request(stepYAML("crd", "", inline(f.manifest()))))
		run(t, e.request(stepYAML("cr", "namespace: "+e.ns, inline(f.cr("two", 2)))))
		e.get(f.gvr(), e.ns, "two")
	})
}

func TestApplyWaitForDeploymentAvailable(t *testing.T) {
	e := newEnv(t)
	began := time.Now()
	out := run(t, e.request(stepYAML("web", "namespace: "+e.ns+"\nwaitFor: condition=Available", inline(deployment))))
	if out.Message != "applied 1 object: 1 created; condition=Available met" {
		t.Errorf("message %q", out.Message)
	}
	dep := e.get(deployGVR, e.ns, "web")
	conds, _, _ := unstructured.NestedSlice(dep.Object, "status", "conditions")
	ok := false
	for _, c := range conds {
		m := c.(map[string]any)
		ok = ok || (m["type"] == "Available" && m["status"] == "True")
	}
	if !ok {
		t.Errorf("the step ended before the Deployment was Available: %v", conds)
	}
	t.Logf("applied and Available in %v", time.Since(began))
}

// Applying twice: the second run reports unchanged and writes nothing.
func TestApplyIdempotent(t *testing.T) {
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			e := newEnv(t)
			f := e.crd()
			svc := "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80, targetPort: 8080}]\n"
			yaml := stepYAML("idem", fmt.Sprintf("namespace: %s\nserverSide: %v", e.ns, serverSide),
				inline(configMap("cfg", map[string]string{"a": "1"})), inline(deployment), inline(svc), inline(f.manifest()), inline(f.cr("w", 1)))
			first := run(t, e.request(yaml))
			if first.Message != "applied 5 objects: 5 created" {
				t.Errorf("first: %q", first.Message)
			}
			// let controllers settle (the Deployment Available): the second
			// run meets objects they have written to
			m, err := e.clients.MappingForType(context.Background(), "deployments.apps")
			if err != nil {
				t.Fatal(err)
			}
			if err := waiter.Until(t.Context(), e.clients, []waiter.Target{{Mapping: m, Namespace: e.ns, Name: "web"}},
				spec.WaitFor{Kind: spec.ForCondition, Name: "Available", Value: "True"}, nil); err != nil {
				t.Fatal(err)
			}
			// what the second run changed, without waiting for controllers
			// to stop writing: the objects no controller writes keep their
			// resourceVersion; the Deployment, whose status the controller
			// may still write, keeps its generation and what khook manages
			snapshot := func() map[string]string {
				out := map[string]string{}
				for _, x := range []struct {
					what string
					u    *unstructured.Unstructured
				}{
					{"cm", e.get(cmGVR, e.ns, "cfg")},
					{"svc", e.get(schemaSvc, e.ns, "web")},
					{"crd", e.get(crdGVR, "", f.plural+"."+f.group)},
					{"cr", e.get(f.gvr(), e.ns, "w")},
				} {
					out[x.what] = "resourceVersion " + x.u.GetResourceVersion()
				}
				d := e.get(deployGVR, e.ns, "web")
				out["deploy"] = fmt.Sprintf("generation %d, annotations %v, labels %v", d.GetGeneration(), d.GetAnnotations()[corev1.LastAppliedConfigAnnotation], d.GetLabels())
				for _, mf := range d.GetManagedFields() {
					if mf.Manager == objects.DefaultFieldManager {
						out["deploy"] += fmt.Sprintf(", %s fields at %v: %s", mf.Operation, mf.Time, mf.FieldsV1.Raw)
					}
				}
				return out
			}
			before := snapshot()
			// client-side: the second run's requests, seen on the wire,
			// hold no write at all (server-side apply always sends its
			// apply, which the server turns into no change)
			cfg := e.c.RESTConfig(t)
			writes := &writeLog{}
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return writes.wrap(rt) })
			second := run(t, steptest.Request(t, steptest.Clients(t, cfg), yaml, steptest.Options{}))
			if second.Message != "applied 5 objects: 5 unchanged" {
				t.Errorf("second: %q", second.Message)
			}
			if w := writes.list(); !serverSide && len(w) > 0 {
				t.Errorf("the second run wrote: %s", strings.Join(w, ", "))
			}
			after := snapshot()
			for k, v := range before {
				if after[k] != v {
					t.Errorf("%s changed: %s -> %s", k, v, after[k])
				}
			}
		})
	}
}

// writeLog records the write requests (not GET, HEAD, or a dry run) made
// through a transport.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead && req.URL.Query().Get("dryRun") != "All" {
			l.mu.Lock()
			l.writes = append(l.writes, req.Method+" "+req.URL.Path)
			l.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (l *writeLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// The least-privilege user: refused writes keep the server's wording.
func TestApplyLeastPrivilege(t *testing.T) {
	c := testcluster.Get(t)
	lim := steptest.Clients(t, c.LimitedRESTConfig(t))
	e := newEnv(t)
	limited := func(yaml string) *step.Request { return steptest.Request(t, lim, yaml, steptest.Options{}) }

	// allowed: its own namespace
	out := run(t, limited(stepYAML("ok", "namespace: "+c.LimitedNamespace, inline(configMap("limited-ok-"+e.ns, nil)))))
	if out.Message != "applied 1 object: 1 created" {
		t.Errorf("message %q", out.Message)
	}
	t.Cleanup(func() {
		_ = e.clients.Typed.CoreV1().ConfigMaps(c.LimitedNamespace).Delete(context.Background(), "limited-ok-"+e.ns, metav1.DeleteOptions{})
	})

	for _, serverSide := range []bool{false, true} {
		err := runErr(t, limited(stepYAML("refused", fmt.Sprintf("namespace: %s\nserverSide: %v", e.ns, serverSide), inline(configMap("nope", nil)))))
		verb := "create"
		if serverSide {
			verb = "patch"
		}
		name := ""
		if serverSide {
			name = ` "nope"` // a create request names no object
		}
		want := fmt.Sprintf(`ConfigMap/nope apply failed: configmaps%s is forbidden: User "khook-limited" cannot %s resource "configmaps" in API group "" in the namespace "%s"`, name, verb, e.ns)
		if err.Error() != want {
			t.Errorf("serverSide=%v:\n got %v\nwant %s", serverSide, err, want)
		}
		if !apierrors.IsForbidden(err) {
			t.Errorf("the error chain lost the API status: %v", err)
		}
	}

	err := runErr(t, limited(stepYAML("mkns", "namespace: "+e.ns+"-limited\ncreateNamespace: true", inline(configMap("x", nil)))))
	if want := `namespace ` + e.ns + `-limited: create failed: namespaces is forbidden: User "khook-limited" cannot create resource "namespaces" in API group "" at the cluster scope`; err.Error() != want {
		t.Errorf("createNamespace:\n got %v\nwant %s", err, want)
	}
}

// A secret planted in a manifest never reaches an error, even when the
// API server echoes it.
func TestApplySecretRedacted(t *testing.T) {
	e := newEnv(t)
	const secret = "Pl4nted-S3cret!value"
	red := redact.New()
	opts := steptest.Options{Env: []string{"KHOOK_SECRET_TOKEN=" + secret}, Redactor: red}
	bad := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leaky\n  labels: {token: \"${TOKEN}\"}\n"
	for _, serverSide := range []bool{false, true} {
		err := runErr(t, e.request(stepYAML("leak", fmt.Sprintf("namespace: %s\nserverSide: %v", e.ns, serverSide), inline(bad)), opts))
		if strings.Contains(err.Error(), secret) {
			t.Errorf("serverSide=%v: the secret leaked: %v", serverSide, err)
		}
		if !strings.Contains(err.Error(), "ConfigMap/leaky apply failed") || !strings.Contains(err.Error(), "***") {
			t.Errorf("serverSide=%v: error %v", serverSide, err)
		}
	}
	// an unknown field named after the secret (strict field validation)
	unknown := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leaky2}\n${TOKEN}: 1\n"
	err := runErr(t, e.request(stepYAML("leak2", "namespace: "+e.ns, inline(unknown)), opts))
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: %v", err)
	}
}

func TestApplyPlan(t *testing.T) {
	e := newEnv(t)
	f := e.crd()
	plan := func(yaml string) step.Prediction {
		t.Helper()
		p, err := step.PlanStep(t.Context(), apply.New(apply.Options{}), e.request(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	fields := "namespace: " + e.ns
	p := plan(stepYAML("p", fields, inline(configMap("a", nil)), inline(configMap("b", nil))))
	if p.Action.Word != "create" || len(p.Details) != 2 || p.Details[0] != "ConfigMap/a in "+e.ns+": create" {
		t.Errorf("none exist: %+v", p)
	}
	if !e.absent(cmGVR, e.ns, "a") {
		t.Fatal("plan created an object")
	}
	run(t, e.request(stepYAML("p", fields, inline(configMap("a", nil)))))
	p = plan(stepYAML("p", fields, inline(configMap("a", nil)), inline(configMap("b", nil))))
	if p.Action.Word != "configure" || p.Reason != "1 to create, 1 unchanged" || strings.Join(p.Details, "|") != "ConfigMap/a in "+e.ns+": unchanged|ConfigMap/b in "+e.ns+": create" {
		t.Errorf("some exist: %+v", p)
	}
	// applied as it is: the dry run changes nothing, as diff says
	p = plan(stepYAML("p", fields, inline(configMap("a", nil))))
	if p.Action.Word != "unchanged" || p.Reason != "a dry run of the object changes nothing" || p.Details[0] != "ConfigMap/a in "+e.ns+": unchanged" {
		t.Errorf("applied, unchanged: %+v", p)
	}
	// a changed manifest: configure, naming the fields that change
	// (the data, and the last-applied configuration of client-side apply)
	p = plan(stepYAML("p", fields, inline(configMap("a", map[string]string{"k": "v"}))))
	want := "ConfigMap/a in " + e.ns + `: configure: data.k, metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`
	if p.Action.Word != "configure" || p.Reason != "1 to configure" || p.Details[0] != want {
		t.Errorf("changed manifest: %+v, want configure: %s", p, want)
	}
	// server-side: the same, without the annotation
	run(t, e.request(stepYAML("p", fields+"\nserverSide: true", inline(configMap("s", map[string]string{"k": "v"})))))
	if p = plan(stepYAML("p", fields+"\nserverSide: true", inline(configMap("s", map[string]string{"k": "v"})))); p.Action.Word != "unchanged" {
		t.Errorf("server-side, applied: %+v", p)
	}
	p = plan(stepYAML("p", fields+"\nserverSide: true", inline(configMap("s", map[string]string{"k": "w"}))))
	if p.Action.Word != "configure" || p.Details[0] != "ConfigMap/s in "+e.ns+": configure: data.k" {
		t.Errorf("server-side, changed: %+v", p)
	}
	p = plan(stepYAML("p", fields+"\nskipIf: exists", inline(configMap("a", nil))))
	if p.Action.Word != "skip" || p.Reason != "the object exists (skipIf: exists)" {
		t.Errorf("skipIf: %+v", p)
	}
	p = plan(stepYAML("p", fields, inline(f.cr("w", 1))))
	if p.Action.Word != "unknown" || !strings.Contains(p.Reason, "the cluster does not serve Widget ("+f.group+"/v1)") {
		t.Errorf("missing CRD: %+v", p)
	}
	p = plan(stepYAML("p", fields, inline(f.manifest()), inline(f.cr("w", 1))))
	if p.Action.Word != "create" || !strings.Contains(p.Details[1], "its CRD is applied first by this step") {
		t.Errorf("CRD in the same step: %+v", p)
	}
	missing := e.ns + "-later"
	p = plan(stepYAML("p", "namespace: "+missing, inline(configMap("a", nil))))
	if p.Action.Word != "unknown" || p.Reason != "namespace "+missing+" does not exist (an earlier step may create it)" {
		t.Errorf("missing namespace: %+v", p)
	}
	p = plan(stepYAML("p", "namespace: "+missing+"\ncreateNamespace: true", inline(configMap("a", nil))))
	if p.Action.Word != "create" || p.Details[0] != "Namespace/"+missing+": create (createNamespace)" {
		t.Errorf("createNamespace: %+v", p)
	}
	p = plan(stepYAML("p", "namespace: "+missing, inline("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+missing+"}\n"), inline(configMap("a", nil))))
	if p.Action.Word != "create" {
		t.Errorf("namespace manifest in the step: %+v", p)
	}
	if !e.absent(nsGVR, "", missing) || !e.absent(crdGVR, "", f.plural+"."+f.group) {
		t.Fatal("plan created something")
	}
}

func TestApplyDestroy(t *testing.T) {
	e := newEnv(t)
	f := e.crd()
	nsManifest := e.ns + "-manifest"
	created := e.ns + "-created"
	t.Cleanup(func() {
		for _, n := range []string{nsManifest, created} {
			_ = e.clients.Typed.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	yaml := stepYAML("everything", "namespace: "+created+"\ncreateNamespace: true",
		inline("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+nsManifest+"}\n"),
		inline(f.manifest()), inline(f.cr("w", 1)),
		inline(configMap("cfg", nil)), inline(deployment),
		inline(strings.Replace(configMap("other-ns", nil), "metadata:\n", "metadata:\n  namespace: "+nsManifest+"\n", 1)))
	run(t, e.request(yaml))

	ex := apply.New(apply.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := ex.Destroy(ctx, e.request(yaml))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("deleted 5 objects; left namespace %s, namespace %s in place", created, nsManifest)
	if out.Message != want {
		t.Errorf("message %q, want %q", out.Message, want)
	}
	if !e.absent(cmGVR, created, "cfg") || !e.absent(deployGVR, created, "web") || !e.absent(cmGVR, nsManifest, "other-ns") || !e.absent(crdGVR, "", f.plural+"."+f.group) {
		t.Error("destroy left objects behind")
	}
	for _, n := range []string{created, nsManifest} {
		if ns := e.get(nsGVR, "", n); ns.GetDeletionTimestamp() != nil {
			t.Errorf("namespace %s is being deleted", n)
		}
	}
	// already gone is success: destroy can be re-run
	out, err = ex.Destroy(ctx, e.request(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Message, "nothing to delete: 5 objects already gone") {
		t.Errorf("second destroy: %q", out.Message)
	}
}

// Independent steps run concurrently through one executor and one set of
// clients, as the scheduler runs them.
func TestApplyConcurrentSteps(t *testing.T) {
	e := newEnv(t)
	ex := apply.New(apply.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		req := e.request(stepYAML(fmt.Sprintf("s%d", i), "namespace: "+e.ns, inline(configMap(fmt.Sprintf("c%d-a", i), nil)+"---\n"+configMap(fmt.Sprintf("c%d-b", i), nil))))
		wg.Go(func() {
			_, err := ex.Run(t.Context(), req)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// Turning serverSide on for objects applied client-side (by khook or by
// kubectl) moves the client-side appliers' fields to khook's server-side
// manager, as kubectl apply --server-side does, instead of conflicting
// with them; turning it off again works too.
func TestApplySwitchClientToServerSide(t *testing.T) {
	e := newEnv(t)
	// an object kubectl apply created: annotation + kubectl's CSA manager
	byKubectl := &unstructured.Unstructured{}
	byKubectl.SetAPIVersion("v1")
	byKubectl.SetKind("ConfigMap")
	byKubectl.SetName("by-kubectl")
	_ = unstructured.SetNestedStringMap(byKubectl.Object, map[string]string{"a": "1"}, "data")
	byKubectl.SetAnnotations(map[string]string{corev1.LastAppliedConfigAnnotation: `{"apiVersion":"v1","data":{"a":"1"},"kind":"ConfigMap","metadata":{"annotations":{},"name":"by-kubectl","namespace":"` + e.ns + `"}}`})
	if _, err := e.res(cmGVR, e.ns).Create(t.Context(), byKubectl, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	run(t, e.request(stepYAML("csa", "namespace: "+e.ns, inline(configMap("by-khook", map[string]string{"a": "1"})))))

	ssa := "namespace: " + e.ns + "\nserverSide: true"
	out := run(t, e.request(stepYAML("ssa", ssa, inline(configMap("by-khook", map[string]string{"a": "2"})), inline(configMap("by-kubectl", map[string]string{"a": "2"})))))
	if out.Message != "applied 2 objects: 2 configured" {
		t.Errorf("message %q", out.Message)
	}
	for _, n := range []string{"by-khook", "by-kubectl"} {
		cm := e.get(cmGVR, e.ns, n)
		if v, _, _ := unstructured.NestedString(cm.Object, "data", "a"); v != "2" {
			t.Errorf("%s: a=%q", n, v)
		}
		for _, mf := range cm.GetManagedFields() {
			if mf.Operation == metav1.ManagedFieldsOperationUpdate {
				t.Errorf("%s: client-side manager %q still owns fields", n, mf.Manager)
			}
		}
	}
	out = run(t, e.request(stepYAML("ssa", ssa, inline(configMap("by-khook", map[string]string{"a": "2"})), inline(configMap("by-kubectl", map[string]string{"a": "2"})))))
	if out.Message != "applied 2 objects: 2 unchanged" {
		t.Errorf("message %q", out.Message)
	}
	out = run(t, e.request(stepYAML("csa", "namespace: "+e.ns, inline(configMap("by-khook", map[string]string{"a": "3"})))))
	if out.Message != "applied 1 object: 1 configured" {
		t.Errorf("back to client-side: %q", out.Message)
	}
}
