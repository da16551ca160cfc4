//go:build integration

package helm_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	khelm "khook.io/core/helm"
	"khook.io/core/kube"
	"khook.io/core/redact"
	"khook.io/core/step"
	"khook.io/core/steps/delete"
	helmstep "khook.io/core/steps/helm"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

var _ delete.ReleaseDeleter = (*helmstep.Executor)(nil)
var _ delete.ReleaseChecker = (*helmstep.Executor)(nil)

// The credentials of the fixtures behind auth: URL-special characters, so
// that the userinfo form must be URL-encoded (and decoded) right.
const (
	user     = "khook-user"
	password = "pa:ss@w/rd%-Q9x7"
)

// fixture is the chart sources of a test: HTTP repositories (open and
// behind basic auth) and OCI registries (open and behind htpasswd), all
// over TLS on loopback, serving the demo chart at 0.1.0, 0.2.0 and 1.0.0,
// and the deploy chart at 0.1.0.
type fixture struct {
	t        *testing.T
	cluster  *testcluster.Cluster
	clients  *kube.Clients
	exec     *helmstep.Executor
	repo     *chartrepo.HTTPRepo
	authRepo *chartrepo.HTTPRepo
	reg      *chartrepo.Registry
	authReg  *chartrepo.Registry
	http     *http.Client
	// digests of demo in reg, by version.
	digests map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := testcluster.Get(t)
	f := &fixture{t: t, cluster: c, clients: steptest.Clients(t, c.RESTConfig(t)), exec: helmstep.New(helmstep.Options{}), digests: map[string]string{}}
	var demo []chartrepo.Archive
	for _, v := range []string{"0.1.0", "0.2.0", "1.0.0"} {
		demo = append(demo, chartrepo.Package(t, chartrepo.ChartDir("demo"), v))
	}
	deploy := chartrepo.Package(t, chartrepo.ChartDir("deploy"), "")
	f.repo = chartrepo.NewHTTPRepo(t, chartrepo.Options{}, append(demo, deploy)...)
	f.authRepo = chartrepo.NewHTTPRepo(t, chartrepo.Options{Username: user, Password: password}, demo...)
	f.reg = chartrepo.NewRegistry(t, chartrepo.Options{})
	f.authReg = chartrepo.NewRegistry(t, chartrepo.Options{Username: user, Password: password})
	for _, a := range demo {
		f.digests[a.Version] = f.reg.Push(t, "charts", a)
		f.authReg.Push(t, "charts", a)
	}
	f.http = chartrepo.Client(f.repo.Certificate(), f.authRepo.Certificate(), f.reg.Certificate(), f.authReg.Certificate())
	return f
}

// run is one step request with its log captured.
type run struct {
	req *step.Request
	mu  sync.Mutex
	log []string
}

func (r *run) logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.log, "\n")
}

// request builds a request for stepYAML ("name: x\nhelm: {...}").
func (f *fixture) request(stepYAML string, opts steptest.Options) *run {
	f.t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 90 * time.Second
	}
	r := &run{req: steptest.Request(f.t, f.clients, stepYAML, opts)}
	r.req.HTTP = f.http
	t := f.t
	r.req.Log = func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		r.mu.Lock()
		r.log = append(r.log, line)
		r.mu.Unlock()
		t.Logf("progress: %s", line)
	}
	return r
}

func (f *fixture) ctx(r *run) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.req.Timeout)
}

// apply runs the step and fails the test on an error.
func (f *fixture) apply(r *run) step.Outcome {
	f.t.Helper()
	ctx, cancel := f.ctx(r)
	defer cancel()
	out, err := step.RunStep(ctx, f.exec, r.req)
	if err != nil {
		f.t.Fatalf("run %s: %v", r.req.Step.Name, err)
	}
	f.t.Logf("outcome: %s", out.Message)
	return out
}

// applyErr runs the step and returns its error, failing the test when
// there is none.
func (f *fixture) applyErr(r *run) error {
	f.t.Helper()
	ctx, cancel := f.ctx(r)
	defer cancel()
	out, err := step.RunStep(ctx, f.exec, r.req)
	if err == nil {
		f.t.Fatalf("run %s: no error (outcome %q)", r.req.Step.Name, out.Message)
	}
	f.t.Logf("error: %v", err)
	return err
}

func (f *fixture) plan(r *run) step.Prediction {
	f.t.Helper()
	ctx, cancel := f.ctx(r)
	defer cancel()
	p, err := step.PlanStep(ctx, f.exec, r.req)
	if err != nil {
		f.t.Fatalf("plan %s: %v", r.req.Step.Name, err)
	}
	f.t.Logf("plan: %s %s %v", p.Action, p.Reason, p.Details)
	return p
}

// configMap returns the data of the demo chart's ConfigMap of release.
func (f *fixture) configMap(ns, release string) map[string]string {
	f.t.Helper()
	cm, err := f.clients.Typed.CoreV1().ConfigMaps(ns).Get(context.Background(), release+"-demo", metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("ConfigMap %s/%s-demo: %v", ns, release, err)
	}
	return cm.Data
}

func (f *fixture) gone(ns, kind, name string) bool {
	f.t.Helper()
	var err error
	switch kind {
	case "ConfigMap":
		_, err = f.clients.Typed.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	case "Deployment":
		_, err = f.clients.Typed.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	default:
		f.t.Fatalf("gone: kind %s", kind)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// revisions lists the release's stored revisions, as "number:status".
func (f *fixture) revisions(ns, release string) []string {
	f.t.Helper()
	list, err := f.clients.Typed.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
	if err != nil {
		f.t.Fatal(err)
	}
	out := make([]string, len(list.Items))
	for i, s := range list.Items {
		out[i] = s.Labels["version"] + ":" + s.Labels["status"]
	}
	sortRevisions(out)
	return out
}

func sortRevisions(rs []string) {
	num := func(s string) int {
		var n int
		fmt.Sscanf(s, "%d:", &n)
		return n
	}
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && num(rs[j]) < num(rs[j-1]); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

func (f *fixture) status(ns, release string) *khelm.Status {
	f.t.Helper()
	c := khelm.NewClient(khelm.Env{Kube: f.clients, Redactor: redact.New()})
	st, err := c.Get(context.Background(), release, ns)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func (f *fixture) namespaceLabels(ns string) map[string]string {
	f.t.Helper()
	n, err := f.clients.Typed.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return n.Labels
}

func (f *fixture) deleteNamespaceLater(ns string) {
	f.t.Cleanup(func() {
		bg := metav1.DeletePropagationBackground
		err := f.clients.Typed.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			f.t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
}

func (f *fixture) labelNamespace(ns string, labels map[string]string) {
	f.t.Helper()
	n, err := f.clients.Typed.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if _, err := f.clients.Typed.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) pods(ns, selector string) []corev1.Pod {
	f.t.Helper()
	list, err := f.clients.Typed.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

// writeFiles writes files (name → content) under a new directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
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

// assertAbsent fails when any text holds secret or its URL-encoded forms.
func assertAbsent(t *testing.T, secret string, texts map[string]string) {
	t.Helper()
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret), url.UserPassword("x", secret).String()[2:]}
	for what, text := range texts {
		for _, form := range forms {
			if form != "" && strings.Contains(text, form) {
				t.Errorf("%s holds the secret (%q):\n%s", what, form, text)
			}
		}
	}
}

// on is the fixture for subtest t: its helpers fail t, not the test that
// made the fixture (a parent's FailNow from a subtest panics and hides
// the subtest's own failure).
func (f *fixture) on(t *testing.T) *fixture {
	g := *f
	g.t = t
	return &g
}
