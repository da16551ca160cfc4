//go:build integration

package helm_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/step"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/steptest"
	"khook.io/core/waiter"
)

// TestInstallUpgradeNoOp: the history decides install or upgrade; changed
// values make revision 2; the same spec again makes no new revision.
func TestInstallUpgradeNoOp(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-lifecycle")
	demo := chartrepo.ChartDir("demo")
	step := func(color string) *run {
		return f.request(fmt.Sprintf("name: web\nhelm:\n  chart: %s\n  namespace: %s\n  values:\n    color: %s\n    nested: {size: large}", demo, ns, color), steptest.Options{})
	}

	out := f.apply(step("red"))
	if !strings.HasPrefix(out.Message, "installed release web ("+ns+") revision 1: chart "+demo) {
		t.Errorf("install: %q", out.Message)
	}
	if d := f.configMap(ns, "web"); d["color"] != "red" || d["size"] != "large" || d["shape"] != "round" || d["greeting"] != "hello" {
		t.Errorf("after install: %v", d)
	}

	out = f.apply(step("green"))
	if !strings.HasPrefix(out.Message, "upgraded release web ("+ns+") to revision 2: chart "+demo+" (was revision 1 (deployed, chart demo 0.1.0))") {
		t.Errorf("upgrade: %q", out.Message)
	}
	if d := f.configMap(ns, "web"); d["color"] != "green" {
		t.Errorf("after upgrade: %v", d)
	}

	out = f.apply(step("green"))
	if !strings.Contains(out.Message, "unchanged at revision 2") {
		t.Errorf("no-op re-run: %q", out.Message)
	}
	if got := f.revisions(ns, "web"); !reflect.DeepEqual(got, []string{"1:superseded", "2:deployed"}) {
		t.Errorf("revisions after the no-op re-run = %v", got)
	}

	// The default namespace of the run (-n) applies when the step sets none.
	r := f.request("name: web-default-ns\nhelm:\n  chart: "+demo, steptest.Options{})
	r.req.DefaultNamespace = ns
	f.apply(r)
	if got := f.revisions(ns, "web-default-ns"); !reflect.DeepEqual(got, []string{"1:deployed"}) {
		t.Errorf("release in the default namespace: %v", got)
	}
}

// TestChartSources installs every chart: form.
func TestChartSources(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-sources")
	tgzDir := writeFiles(t, nil)
	a := chartrepo.Package(t, chartrepo.ChartDir("demo"), "0.2.0")
	if err := os.WriteFile(filepath.Join(tgzDir, a.Filename()), a.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	oci := f.reg.Ref("charts/demo")
	for _, tc := range []struct {
		name, helm, base, want string
	}{
		{"repo-version", "chart: demo\n  repo: " + f.repo.URL() + "\n  version: 0.1.0", "", "0.1.0"},
		{"repo-inline", "chart: demo:0.2.0\n  repo: " + f.repo.URL(), "", "0.2.0"},
		{"repo-latest", "chart: demo\n  repo: " + f.repo.URL(), "", "1.0.0"},
		{"repo-constraint", "chart: demo\n  repo: " + f.repo.URL() + "\n  version: \"~0.2\"", "", "0.2.0"},
		{"oci-tag", "chart: " + oci + ":0.2.0", "", "0.2.0"},
		{"oci-digest", "chart: " + oci + "@" + f.digests["0.1.0"], "", "0.1.0"},
		{"oci-version", "chart: " + oci + "\n  version: 0.1.0", "", "0.1.0"},
		{"oci-latest", "chart: " + oci, "", "1.0.0"},
		{"oci-constraint", "chart: " + oci + "\n  version: \">=0.1 <1\"", "", "0.2.0"},
		{"local-dir", "chart: ./demo", filepath.Dir(chartrepo.ChartDir("demo")), "0.1.0"},
		{"local-tgz", "chart: ./" + a.Filename(), tgzDir, "0.2.0"},
		{"local-abs", "chart: " + chartrepo.ChartDir("demo"), "", "0.1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f.on(t)
			r := f.request(fmt.Sprintf("name: %s\nhelm:\n  %s\n  namespace: %s", tc.name, tc.helm, ns), steptest.Options{BaseDir: tc.base})
			out := f.apply(r)
			if got := f.configMap(ns, tc.name)["chartVersion"]; got != tc.want {
				t.Errorf("chart version %s, want %s (%s)", got, tc.want, out.Message)
			}
		})
	}
}

// TestMissingVersion: a version that is not there is a clear error that
// lists the nearest versions, and a plan says unknown with the reason.
func TestMissingVersion(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-missing")
	for _, tc := range []struct{ name, helm string }{
		{"repo", "chart: demo:0.3.0\n  repo: " + f.repo.URL()},
		{"oci", "chart: " + f.reg.Ref("charts/demo") + ":0.3.0"},
		{"oci-version", "chart: " + f.reg.Ref("charts/demo") + "\n  version: 0.3.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f.on(t)
			r := f.request(fmt.Sprintf("name: %s\nhelm:\n  %s\n  namespace: %s", tc.name, tc.helm, ns), steptest.Options{})
			err := f.applyErr(r)
			if !strings.Contains(err.Error(), "no version 0.3.0") || !strings.Contains(err.Error(), "nearest available versions: 0.1.0, 0.2.0, 1.0.0 (latest 1.0.0)") {
				t.Errorf("error: %v", err)
			}
			p := f.plan(r)
			if p.Action.Word != "unknown" || !strings.Contains(p.Reason, "the chart cannot be fetched") || !strings.Contains(p.Reason, "nearest available versions") {
				t.Errorf("plan: %+v", p)
			}
		})
	}
}

// TestAuth: HTTP repositories and OCI registries behind basic auth, with
// auth: and with URL userinfo; the password (not a KHOOK_SECRET_, so khook
// must register it itself) is absent from every outcome, log, plan and
// error, including the error of a wrong password.
func TestAuth(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-auth")
	authBlock := fmt.Sprintf("\n  auth:\n    username: %s\n    password: %q", user, password)
	wrong := password + "-Wr0ng"
	for _, tc := range []struct{ name, helm, bad string }{
		{"repo-auth", "chart: demo:0.2.0\n  repo: " + f.authRepo.URL() + authBlock,
			fmt.Sprintf("chart: demo:0.2.0\n  repo: %s\n  auth:\n    username: %s\n    password: %q", f.authRepo.URL(), user, wrong)},
		{"repo-userinfo", "chart: demo:0.2.0\n  repo: " + f.authRepo.URLWithUserinfo(user, password),
			"chart: demo:0.2.0\n  repo: " + f.authRepo.URLWithUserinfo(user, wrong)},
		{"oci-auth", "chart: " + f.authReg.Ref("charts/demo") + ":0.2.0" + authBlock,
			fmt.Sprintf("chart: %s:0.2.0\n  auth:\n    username: %s\n    password: %q", f.authReg.Ref("charts/demo"), user, wrong)},
		{"oci-userinfo", "chart: " + f.authReg.RefWithUserinfo("charts/demo", user, password) + ":0.2.0",
			"chart: " + f.authReg.RefWithUserinfo("charts/demo", user, wrong) + ":0.2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f.on(t)
			texts := map[string]string{}
			r := f.request(fmt.Sprintf("name: %s\nhelm:\n  %s\n  namespace: %s", tc.name, tc.helm, ns), steptest.Options{})
			p := f.plan(r)
			if p.Action.Word != "install" {
				t.Errorf("plan: %+v", p)
			}
			texts["plan"] = fmt.Sprint(p)
			out := f.apply(r)
			texts["outcome"] = out.Message
			if got := f.configMap(ns, tc.name)["chartVersion"]; got != "0.2.0" {
				t.Errorf("chart version %s", got)
			}
			p = f.plan(r)
			if p.Action.Word != "no-op" {
				t.Errorf("plan after install: %+v", p)
			}
			texts["plan after install"] = fmt.Sprint(p)
			texts["re-run"] = f.apply(r).Message
			texts["log"] = r.logs()

			bad := f.request(fmt.Sprintf("name: %s-bad\nhelm:\n  %s\n  namespace: %s", tc.name, tc.bad, ns), steptest.Options{})
			err := f.applyErr(bad)
			if !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
				t.Errorf("a wrong password: %v", err)
			}
			texts["error"] = err.Error()
			pb := f.plan(bad)
			if pb.Action.Word != "unknown" {
				t.Errorf("plan with a wrong password: %+v", pb)
			}
			texts["bad plan"] = fmt.Sprint(pb)
			texts["bad log"] = bad.logs()
			assertAbsent(t, password, texts)
			assertAbsent(t, wrong, texts)
		})
	}
	// The credentials only went where they belong: the open repository
	// never saw an Authorization header.
	for _, req := range f.repo.Requests() {
		if req.Authorization != "" {
			t.Errorf("the open repository got credentials for %s", req.Path)
		}
	}
}

// TestAtomic: a failed upgrade of an atomic release is rolled back, and a
// failed atomic install is uninstalled. The Deployment never becomes ready
// (a nodeSelector no node has).
func TestAtomic(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-atomic")
	deploy := chartrepo.ChartDir("deploy")
	base := fmt.Sprintf("name: app\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true\n  atomic: true", deploy, ns)

	begin := time.Now()
	f.apply(f.request(base, steptest.Options{}))
	t.Logf("install with wait: %s", time.Since(begin).Round(time.Millisecond))

	bad := f.request(base+"\n  values:\n    nodeSelector: {khook.io/never: \"true\"}", steptest.Options{Timeout: 20 * time.Second})
	begin = time.Now()
	err := f.applyErr(bad)
	took := time.Since(begin)
	if !strings.Contains(err.Error(), "has been rolled back due to atomic being set") ||
		!strings.Contains(err.Error(), "waited 9s for the resources to be ready") ||
		!strings.Contains(err.Error(), "timed out waiting for readiness on Deployment "+ns+"/app: InProgress") {
		t.Errorf("failed atomic upgrade: %v", err)
	}
	if took > 20*time.Second {
		t.Errorf("the failed upgrade took %s, beyond its 20s timeout", took)
	}
	if got := f.revisions(ns, "app"); !reflect.DeepEqual(got, []string{"1:superseded", "2:failed", "3:deployed"}) {
		t.Errorf("revisions = %v, want the rollback as revision 3", got)
	}
	d, err := f.clients.Typed.AppsV1().Deployments(ns).Get(context.Background(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.NodeSelector) != 0 {
		t.Errorf("the Deployment was not rolled back: nodeSelector %v", d.Spec.Template.Spec.NodeSelector)
	}

	// A failed atomic install leaves no release behind.
	badInstall := f.request(fmt.Sprintf("name: never\nhelm:\n  chart: %s\n  namespace: %s\n  atomic: true\n  values:\n    nodeSelector: {khook.io/never: \"true\"}", deploy, ns),
		steptest.Options{Timeout: 15 * time.Second})
	err = f.applyErr(badInstall)
	if !strings.Contains(err.Error(), "has been uninstalled due to atomic being set") {
		t.Errorf("failed atomic install: %v", err)
	}
	if got := f.revisions(ns, "never"); len(got) != 0 {
		t.Errorf("revisions after a failed atomic install = %v", got)
	}
	if !f.gone(ns, "Deployment", "never") {
		t.Error("the Deployment of the failed atomic install is still there")
	}
}

// TestWaitTimeout: without atomic, a release that does not become ready
// fails the step with what was not ready, and the next run upgrades the
// failed release.
func TestWaitTimeout(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-wait")
	deploy := chartrepo.ChartDir("deploy")
	r := f.request(fmt.Sprintf("name: slow\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true\n  values:\n    nodeSelector: {khook.io/never: \"true\"}", deploy, ns),
		steptest.Options{Timeout: 10 * time.Second})
	err := f.applyErr(r)
	// what was last seen not ready, and why (kstatus's verdict and message)
	// and why, in the scheduler's words
	if !strings.Contains(err.Error(), "install failed: timed out waiting for readiness on Deployment "+ns+"/slow: InProgress: Available: 0/1; cause: Pod "+ns+"/slow-") ||
		!strings.Contains(err.Error(), ": Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.") ||
		!strings.HasSuffix(err.Error(), " (waited 9s for the resources to be ready)") {
		t.Errorf("wait timeout: %v", err)
	}
	if got := f.revisions(ns, "slow"); !reflect.DeepEqual(got, []string{"1:failed"}) {
		t.Errorf("revisions = %v", got)
	}
	fixed := f.request(fmt.Sprintf("name: slow\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true", deploy, ns), steptest.Options{})
	out := f.apply(fixed)
	if !strings.Contains(out.Message, "upgraded release slow ("+ns+") to revision 2") {
		t.Errorf("after the fix: %s", out.Message)
	}
	// A no-op re-run with wait still waits (the resources are ready).
	out = f.apply(fixed)
	if !strings.Contains(out.Message, "unchanged at revision 2") {
		t.Errorf("re-run: %s", out.Message)
	}
}

// TestSkipIfInstalled: an existing release is left alone whatever its
// version and values.
func TestSkipIfInstalled(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-skip")
	f.apply(f.request(fmt.Sprintf("name: once\nhelm:\n  chart: demo:0.1.0\n  repo: %s\n  namespace: %s\n  values: {color: first}", f.repo.URL(), ns), steptest.Options{}))
	r := f.request(fmt.Sprintf("name: once\nhelm:\n  chart: demo:1.0.0\n  repo: %s\n  namespace: %s\n  skipIf: installed\n  values: {color: second}", f.repo.URL(), ns), steptest.Options{})
	if p := f.plan(r); p.Action.Word != "skip" || !strings.Contains(p.Reason, "revision 1 (deployed, chart demo 0.1.0)") {
		t.Errorf("plan: %+v", p)
	}
	out := f.apply(r)
	if !out.Skipped || !strings.Contains(out.SkipReason, "skipIf installed: release once ("+ns+") exists at revision 1") {
		t.Errorf("outcome: %+v", out)
	}
	if d := f.configMap(ns, "once"); d["color"] != "first" || d["chartVersion"] != "0.1.0" {
		t.Errorf("the release changed: %v", d)
	}
	// Absent, it is installed.
	r2 := f.request(fmt.Sprintf("name: fresh\nhelm:\n  chart: demo:1.0.0\n  repo: %s\n  namespace: %s\n  skipIf: installed", f.repo.URL(), ns), steptest.Options{})
	if out := f.apply(r2); out.Skipped {
		t.Errorf("an absent release was skipped: %+v", out)
	}
}

// TestValuesFromOrder: valuesFrom entries (file, url, file) merge in order,
// deep, and values win.
func TestValuesFromOrder(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-values")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "color: url\nnested:\n  size: url\n")
	}))
	defer srv.Close()
	dir := writeFiles(t, map[string]string{
		"values/a.yaml": "greeting: a\ncolor: a\nnested:\n  size: a\n  shape: a\n",
		"values/b.yaml": "nested:\n  shape: b\n",
	})
	r := f.request(fmt.Sprintf(`name: vals
helm:
  chart: %s
  namespace: %s
  valuesFrom:
    - file: ./values/a.yaml
    - url: %s/values.yaml
    - file: ./values/b.yaml
  values:
    greeting: inline`, chartrepo.ChartDir("demo"), ns, srv.URL), steptest.Options{BaseDir: dir})
	f.apply(r)
	want := map[string]string{"greeting": "inline", "color": "url", "size": "url", "shape": "b", "chartVersion": "0.1.0"}
	if got := f.configMap(ns, "vals"); !reflect.DeepEqual(got, want) {
		t.Errorf("data = %v, want %v", got, want)
	}
}

// TestCreateNamespace: a missing namespace is created; an existing one is
// left alone; without createNamespace a missing namespace is a clear
// error.
func TestCreateNamespace(t *testing.T) {
	f := newFixture(t)
	fresh := fmt.Sprintf("khook-helm-new-%d", time.Now().UnixNano()%1_000_000)
	f.deleteNamespaceLater(fresh)
	demo := chartrepo.ChartDir("demo")

	err := f.applyErr(f.request(fmt.Sprintf("name: nons\nhelm:\n  chart: %s\n  namespace: %s", demo, fresh), steptest.Options{}))
	if !strings.Contains(err.Error(), "namespace "+fresh+" does not exist: create it in an earlier step or set createNamespace: true") {
		t.Errorf("missing namespace: %v", err)
	}

	r := f.request(fmt.Sprintf("name: mkns\nhelm:\n  chart: %s\n  namespace: %s\n  createNamespace: true", demo, fresh), steptest.Options{})
	if p := f.plan(r); p.Action.Word != "install" || !strings.Contains(strings.Join(p.Details, "\n"), "namespace "+fresh+" will be created") {
		t.Errorf("plan: %+v", p)
	}
	f.apply(r)
	f.configMap(fresh, "mkns")

	existing := f.cluster.NewNamespace(t, "helm-existing")
	f.labelNamespace(existing, map[string]string{"team": "platform"})
	before := f.namespaceLabels(existing)
	f.apply(f.request(fmt.Sprintf("name: keepns\nhelm:\n  chart: %s\n  namespace: %s\n  createNamespace: true", demo, existing), steptest.Options{}))
	if after := f.namespaceLabels(existing); !reflect.DeepEqual(before, after) {
		t.Errorf("the existing namespace changed: labels %v → %v", before, after)
	}
}

// TestUninstall: delete.release uninstalls and waits until the objects are
// gone (the Deployment's pods too); an absent release is success unless
// ignoreNotFound is false. destroy uninstalls a helm step's release.
func TestUninstall(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-uninstall")
	deploy := f.request(fmt.Sprintf("name: app\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true\n  values: {replicas: 2}", chartrepo.ChartDir("deploy"), ns), steptest.Options{})
	f.apply(deploy)
	if n := len(f.pods(ns, "app.kubernetes.io/instance=app")); n != 2 {
		t.Fatalf("%d pods, want 2", n)
	}

	del := f.request(fmt.Sprintf("name: rm\ndelete:\n  release: app\n  namespace: %s", ns), steptest.Options{})
	exists, err := f.exec.ReleaseExists(context.Background(), del.req, "app", ns)
	if err != nil || !exists {
		t.Fatalf("ReleaseExists = %v, %v", exists, err)
	}
	ctx, cancel := f.ctx(del)
	defer cancel()
	out, err := f.exec.Uninstall(ctx, del.req, "app", ns, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Message, "uninstalled release app ("+ns+") (was revision 1 (deployed, chart deploy 0.1.0)); 1 object gone") {
		t.Errorf("uninstall: %q", out.Message)
	}
	if !f.gone(ns, "Deployment", "app") {
		t.Error("the Deployment is still there")
	}
	// The Pods are the garbage collector's (background propagation,
	// decision 103): they go soon after.
	podTarget := waiter.Target{Mapping: podMapping(t, f), Namespace: ns, LabelSelector: "app.kubernetes.io/instance=app"}
	gctx, gcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer gcancel()
	if err := waiter.UntilGone(gctx, f.clients, []waiter.Target{podTarget}, nil); err != nil {
		t.Errorf("the pods of the uninstalled release: %v", err)
	}
	if got := f.revisions(ns, "app"); len(got) != 0 {
		t.Errorf("history kept: %v", got)
	}
	if exists, _ := f.exec.ReleaseExists(context.Background(), del.req, "app", ns); exists {
		t.Error("ReleaseExists after the uninstall")
	}

	out, err = f.exec.Uninstall(ctx, del.req, "app", ns, true)
	if err != nil || out.Message != "release app ("+ns+") not found: nothing to uninstall" {
		t.Errorf("absent release: %q, %v", out.Message, err)
	}
	if _, err := f.exec.Uninstall(ctx, del.req, "app", ns, false); err == nil ||
		err.Error() != "release app ("+ns+") not found (set ignoreNotFound: true to accept that)" {
		t.Errorf("absent release without ignoreNotFound: %v", err)
	}
	// The namespace defaults to the request's.
	f.apply(f.request(fmt.Sprintf("name: cm\nhelm:\n  chart: %s\n  namespace: %s", chartrepo.ChartDir("demo"), ns), steptest.Options{}))
	del.req.DefaultNamespace = ns
	if out, err := f.exec.Uninstall(ctx, del.req, "cm", "", true); err != nil || !strings.HasPrefix(out.Message, "uninstalled release cm ("+ns+")") {
		t.Errorf("uninstall in the default namespace: %q, %v", out.Message, err)
	}

	// destroy
	f.apply(deploy)
	ctx2, cancel2 := f.ctx(deploy)
	defer cancel2()
	out, err = step.DestroyStep(ctx2, f.exec, deploy.req)
	if err != nil || !strings.HasPrefix(out.Message, "uninstalled release app") {
		t.Errorf("destroy: %q, %v", out.Message, err)
	}
	if !f.gone(ns, "Deployment", "app") {
		t.Error("destroy left the Deployment")
	}
	if out, err = step.DestroyStep(ctx2, f.exec, deploy.req); err != nil || !strings.Contains(out.Message, "not found") {
		t.Errorf("destroy again: %q, %v", out.Message, err)
	}
}

// TestParallel: two helm steps at once, one executor, the same clients.
func TestParallel(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-parallel")
	reqs := []*run{
		f.request(fmt.Sprintf("name: left\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true", chartrepo.ChartDir("deploy"), ns), steptest.Options{}),
		f.request(fmt.Sprintf("name: right\nhelm:\n  chart: demo:1.0.0\n  repo: %s\n  namespace: %s", f.repo.URL(), ns), steptest.Options{}),
		f.request(fmt.Sprintf("name: oci\nhelm:\n  chart: %s:0.2.0\n  namespace: %s", f.reg.Ref("charts/demo"), ns), steptest.Options{}),
	}
	var wg sync.WaitGroup
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := f.ctx(r)
			defer cancel()
			_, errs[i] = step.RunStep(ctx, f.exec, r.req)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", reqs[i].req.Step.Name, err)
		}
	}
	for _, name := range []string{"left", "right", "oci"} {
		if got := f.revisions(ns, name); !reflect.DeepEqual(got, []string{"1:deployed"}) {
			t.Errorf("%s: revisions %v", name, got)
		}
	}
}

// TestSecretValue: a secret passed as a chart value never appears in an
// outcome, a log line, a plan or an error, even when the chart's template
// fails with it or the API server rejects a manifest that holds it.
func TestSecretValue(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-secret")
	const token = "Tok3n-s3cr3t!value"
	env := steptest.Options{Env: []string{"KHOOK_SECRET_TOKEN=" + token}}
	demo := chartrepo.ChartDir("demo")
	texts := map[string]string{}

	ok := f.request(fmt.Sprintf("name: sec\nhelm:\n  chart: %s\n  namespace: %s\n  values:\n    greeting: ${TOKEN}", demo, ns), env)
	texts["install outcome"] = f.apply(ok).Message
	if got := f.configMap(ns, "sec")["greeting"]; got != token {
		t.Errorf("the value did not reach the chart: %q", got)
	}
	texts["install log"] = ok.logs()

	for _, tc := range []struct{ name, values, want, installPlan string }{
		{"template-fail", "failWith: ${TOKEN}", "refusing to render with failWith=***", "unknown"},
		// Only the API server rejects it, once the failed install is
		// recorded: the plan that follows is an upgrade.
		{"invalid-manifest", "labelValue: \"${TOKEN}\"", "Invalid value: \"***\"", "upgrade"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f.on(t)
			// On a new release (install) and on the existing one (upgrade,
			// whose plan renders).
			for _, release := range []string{tc.name, "sec"} {
				r := f.request(fmt.Sprintf("name: %s\nhelm:\n  chart: %s\n  namespace: %s\n  values:\n    %s", release, demo, ns, tc.values), env)
				err := f.applyErr(r)
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %v, want it to hold %q", release, err, tc.want)
				}
				texts[tc.name+" "+release+" error"] = err.Error()
				p := f.plan(r)
				if release == tc.name && p.Action.Word != tc.installPlan {
					t.Errorf("plan of the install: %+v, want %s", p, tc.installPlan)
				}
				if release == tc.name && p.Action.Word == "unknown" && !strings.Contains(p.Reason, tc.want) {
					t.Errorf("plan of the install: %+v, want the reason to hold %q", p, tc.want)
				}
				texts[tc.name+" "+release+" plan"] = fmt.Sprint(p)
				texts[tc.name+" "+release+" log"] = r.logs()
			}
		})
	}
	assertAbsent(t, token, texts)
}

// TestPlan: install, no-op, upgrade (with what changes), and no change to
// the cluster.
func TestPlan(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-plan")
	step := func(version, color string) *run {
		return f.request(fmt.Sprintf("name: planned\nhelm:\n  chart: demo:%s\n  repo: %s\n  namespace: %s\n  values: {color: %s}", version, f.repo.URL(), ns, color), steptest.Options{})
	}
	p := f.plan(step("0.1.0", "red"))
	if p.Action.Word != "install" || !reflect.DeepEqual(p.Details, []string{"release planned in namespace " + ns, "chart demo 0.1.0 from " + f.repo.URL()}) {
		t.Errorf("install plan: %+v", p)
	}
	if got := f.revisions(ns, "planned"); len(got) != 0 {
		t.Fatalf("plan installed: %v", got)
	}
	f.apply(step("0.1.0", "red"))
	if p := f.plan(step("0.1.0", "red")); p.Action.Word != "no-op" || p.Reason != "revision 1 already has this chart, these values and these manifests, and the cluster has its objects as they say" {
		t.Errorf("no-op plan: %+v", p)
	}
	p = f.plan(step("0.2.0", "blue"))
	want := []string{
		"release planned in namespace " + ns,
		"current: revision 1 (deployed, chart demo 0.1.0)",
		"target: chart demo 0.2.0 from " + f.repo.URL(),
		"chart demo 0.1.0 → demo 0.2.0",
		"values change",
	}
	if p.Action.Word != "upgrade" || !reflect.DeepEqual(p.Details, want) {
		t.Errorf("upgrade plan: %+v", p)
	}
	if got := f.revisions(ns, "planned"); !reflect.DeepEqual(got, []string{"1:deployed"}) {
		t.Errorf("plan changed the release: %v", got)
	}
	if d := f.configMap(ns, "planned"); d["color"] != "red" {
		t.Errorf("plan changed the objects: %v", d)
	}
}

// TestStepDependencies: a local chart whose dependency is not vendored gets it
// from its repository, like helm dependency build, without writing to the
// chart directory; a dependency that cannot be found is a clear error.
func TestStepDependencies(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-deps")
	dir := writeFiles(t, map[string]string{
		"parent/Chart.yaml":        fmt.Sprintf("apiVersion: v2\nname: parent\nversion: 1.0.0\ndependencies:\n  - name: demo\n    version: \"~0.2\"\n    repository: %s\n", f.repo.URL()),
		"parent/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-parent\ndata:\n  sub: {{ .Values.demo.color | quote }}\n",
		"parent/values.yaml":       "demo:\n  color: from-parent\n",
		"broken/Chart.yaml":        "apiVersion: v2\nname: broken\nversion: 1.0.0\ndependencies:\n  - name: demo\n    version: 9.9.9\n    repository: " + f.repo.URL() + "\n",
	})
	f.apply(f.request(fmt.Sprintf("name: deps\nhelm:\n  chart: ./parent\n  namespace: %s", ns), steptest.Options{BaseDir: dir}))
	if d := f.configMap(ns, "deps"); d["chartVersion"] != "0.2.0" || d["color"] != "from-parent" {
		t.Errorf("the dependency: %v", d)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "parent", "charts", "*")); len(files) != 0 {
		t.Errorf("the chart directory was written to: %v", files)
	}
	err := f.applyErr(f.request(fmt.Sprintf("name: broken\nhelm:\n  chart: ./broken\n  namespace: %s", ns), steptest.Options{BaseDir: dir}))
	if !strings.Contains(err.Error(), "chart ./broken: dependency demo: demo 9.9.9 from "+f.repo.URL()+`: chart "demo" has no version 9.9.9; nearest available versions: 0.1.0, 0.2.0, 1.0.0`) {
		t.Errorf("missing dependency version: %v", err)
	}
}

// TestLeastPrivilege: a user with rights in one namespace only (nothing
// cluster-scoped: it may not read or create namespaces) installs,
// upgrades, re-runs and uninstalls a release there, createNamespace
// included.
func TestLeastPrivilege(t *testing.T) {
	f := newFixture(t)
	f.clients = steptest.Clients(t, f.cluster.LimitedRESTConfig(t))
	ns := f.cluster.LimitedNamespace
	name := fmt.Sprintf("limited-%d", time.Now().UnixNano()%1_000_000)
	stepOf := func(color string) *run {
		return f.request(fmt.Sprintf("name: %s\nhelm:\n  chart: %s\n  namespace: %s\n  createNamespace: true\n  values: {color: %s}", name, chartrepo.ChartDir("demo"), ns, color), steptest.Options{})
	}
	if p := f.plan(stepOf("red")); p.Action.Word != "install" {
		t.Errorf("plan: %+v", p)
	}
	f.apply(stepOf("red"))
	if out := f.apply(stepOf("blue")); !strings.Contains(out.Message, "to revision 2") {
		t.Errorf("upgrade: %s", out.Message)
	}
	if out := f.apply(stepOf("blue")); !strings.Contains(out.Message, "unchanged at revision 2") {
		t.Errorf("re-run: %s", out.Message)
	}
	r := stepOf("blue")
	ctx, cancel := f.ctx(r)
	defer cancel()
	out, err := step.DestroyStep(ctx, f.exec, r.req)
	if err != nil || !strings.HasPrefix(out.Message, "uninstalled release "+name) {
		t.Fatalf("destroy: %q, %v", out.Message, err)
	}
	if !f.gone(ns, "ConfigMap", name+"-demo") {
		t.Error("the ConfigMap is still there")
	}
}

// TestCRDs: a chart with a CustomResourceDefinition in crds/ and a custom
// resource of it in templates: Helm creates the definition first, and the
// run's shared discovery and RESTMapper (reset by Helm) find the new kind.
// The plan of the install cannot map the custom resource yet, and still
// predicts install.
func TestCRDs(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-crds")
	group := fmt.Sprintf("t%d.khook.io", time.Now().UnixNano()%1_000_000_000)
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
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
`, group)
	t.Cleanup(func() {
		_ = f.clients.Dynamic.Resource(crdGVR).Delete(context.Background(), "widgets."+group, metav1.DeleteOptions{})
	})
	dir := writeFiles(t, map[string]string{
		"widgets/Chart.yaml":          "apiVersion: v2\nname: widgets\nversion: 1.0.0\n",
		"widgets/crds/widget.yaml":    crd,
		"widgets/templates/cr.yaml":   fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  size: {{ .Values.size | default 1 }}\n", group),
		"widgets/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n",
		"widgets/values.yaml":         "size: 1\n",
		"widgets/templates/NOTES.txt": "widgets!\n",
	})
	r := f.request(fmt.Sprintf("name: widgets\nhelm:\n  chart: ./widgets\n  namespace: %s", ns), steptest.Options{BaseDir: dir})
	if p := f.plan(r); p.Action.Word != "install" {
		t.Errorf("plan: %+v", p)
	}
	f.apply(r)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	if _, err := f.clients.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), "widgets", metav1.GetOptions{}); err != nil {
		t.Fatalf("the custom resource: %v", err)
	}
	if out := f.apply(r); !strings.Contains(out.Message, "unchanged at revision 1") {
		t.Errorf("re-run: %s", out.Message)
	}
	r2 := f.request(fmt.Sprintf("name: widgets\nhelm:\n  chart: ./widgets\n  namespace: %s\n  values: {size: 2}", ns), steptest.Options{BaseDir: dir})
	if out := f.apply(r2); !strings.Contains(out.Message, "to revision 2") {
		t.Errorf("upgrade: %s", out.Message)
	}
	ctx, cancel := f.ctx(r)
	defer cancel()
	if _, err := step.DestroyStep(ctx, f.exec, r.req); err != nil {
		t.Fatal(err)
	}
	if _, err := f.clients.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), "widgets", metav1.GetOptions{}); err == nil {
		t.Error("the custom resource survived the uninstall")
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func podMapping(t *testing.T, f *fixture) *meta.RESTMapping {
	t.Helper()
	m, err := f.clients.MappingForType(context.Background(), "pods")
	if err != nil {
		t.Fatal(err)
	}
	return m
}
