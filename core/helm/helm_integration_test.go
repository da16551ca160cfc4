//go:build integration

package helm

import (
	"context"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"khook.io/core/kube"
	"khook.io/core/redact"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

type cluster struct {
	t       *testing.T
	clients *kube.Clients
	client  *Client
	ns      string
}

// clientsFor returns clients for cfg, as one run has: steptest.Clients,
// which this package's tests cannot import (steptest loads steps of every
// built-in kind, and the helm: kind imports this package).
func clientsFor(t testing.TB, cfg *rest.Config) *kube.Clients {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = kube.DefaultQPS, kube.DefaultBurst
	c, err := kube.NewForConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newCluster(t *testing.T, prefix string) *cluster {
	t.Helper()
	c := testcluster.Get(t)
	clients := clientsFor(t, c.RESTConfig(t))
	return &cluster{
		t:       t,
		clients: clients,
		client:  NewClient(Env{Kube: clients, Redactor: redact.New(), Log: func(f string, a ...any) { t.Logf("progress: "+f, a...) }}),
		ns:      c.NewNamespace(t, prefix),
	}
}

func (c *cluster) release(name, color string) Release {
	return Release{Name: name, Namespace: c.ns, Source: Source{Chart: chartrepo.ChartDir("demo")},
		Values: map[string]any{"color": color}, Timeout: time.Minute}
}

func (c *cluster) apply(r Release) Result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.client.Apply(ctx, r)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("%s revision %d; recovered: %q", res.Action, res.Revision, res.Recovered)
	return res
}

func (c *cluster) applyErr(r Release) error {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.client.Apply(ctx, r)
	if err == nil {
		c.t.Fatalf("apply: %s revision %d, want an error", res.Action, res.Revision)
	}
	c.t.Logf("apply: %v", err)
	return err
}

func (c *cluster) config() *configuration {
	c.t.Helper()
	cfg, err := c.client.configuration(context.Background(), c.ns)
	if err != nil {
		c.t.Fatal(err)
	}
	return cfg
}

// setLatest rewrites the latest revision's status, as an interrupted run
// would have left it an hour ago (older than any step timeout here).
func (c *cluster) setLatest(name string, status rcommon.Status) {
	c.t.Helper()
	c.pend(name, status, time.Hour, nil)
}

// pend rewrites the latest revision's status, as a writer that began its
// operation age ago would have left it, with labels added to the
// revision's own (a nil value removes one).
func (c *cluster) pend(name string, status rcommon.Status, age time.Duration, labels map[string]*string) {
	c.t.Helper()
	cfg := c.config()
	hist, err := history(cfg, name)
	if err != nil {
		c.t.Fatal(err)
	}
	rel := latest(hist)
	rel.Info.Status = status
	rel.Info.LastDeployed = time.Now().Add(-age)
	if status == rcommon.StatusUninstalling {
		rel.Info.Deleted = rel.Info.LastDeployed
	}
	if rel.Labels == nil {
		rel.Labels = map[string]string{}
	}
	for k, v := range labels {
		if v == nil {
			delete(rel.Labels, k)
		} else {
			rel.Labels[k] = *v
		}
	}
	if err := cfg.Releases.Update(rel); err != nil {
		c.t.Fatal(err)
	}
}

// labels are the labels of a revision's storage Secret that are not
// helm's own.
func (c *cluster) labels(name string, revision int) map[string]string {
	c.t.Helper()
	s, err := c.clients.Typed.CoreV1().Secrets(c.ns).Get(context.Background(),
		"sh.helm.release.v1."+name+".v"+strconv.Itoa(revision), metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range s.Labels {
		if strings.HasPrefix(k, "khook.io/") {
			out[k] = v
		}
	}
	return out
}

func (c *cluster) revisions(name string) []string {
	c.t.Helper()
	hist, err := history(c.config(), name)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, h := range hist {
		out = append(out, strconv.Itoa(h.Version)+":"+string(h.Info.Status))
	}
	return out
}

func (c *cluster) color(name string) string {
	c.t.Helper()
	cm, err := c.clients.Typed.CoreV1().ConfigMaps(c.ns).Get(context.Background(), name+"-demo", metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return cm.Data["color"]
}

func (c *cluster) plan(r Release) Plan {
	c.t.Helper()
	p, err := c.client.Plan(context.Background(), r)
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// TestRecoverPendingUpgrade: an upgrade interrupted mid-way (its revision
// left pending-upgrade, which Helm itself refuses to touch: "another
// operation is in progress") is marked failed, rolled back to the last
// deployed revision, then upgraded.
func TestRecoverPendingUpgrade(t *testing.T) {
	c := newCluster(t, "helm-pending-upgrade")
	c.apply(c.release("pend", "one"))

	// An interrupted upgrade: revision 2 stored pending-upgrade.
	cfg := c.config()
	hist, err := history(cfg, "pend")
	if err != nil {
		t.Fatal(err)
	}
	rel2 := *latest(hist)
	info := *rel2.Info
	rel2.Info = &info
	rel2.Version = 2
	rel2.Config = map[string]any{"color": "half-way"}
	rel2.Info.Status = rcommon.StatusPendingUpgrade
	if err := cfg.Releases.Create(&rel2); err != nil {
		t.Fatal(err)
	}
	chrt, err := mustChart(t, c).load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := action.NewUpgrade(cfg.Configuration).Run("pend", chrt, nil); err == nil ||
		!strings.Contains(err.Error(), "another operation (install/upgrade/rollback) is in progress") {
		t.Fatalf("helm's own upgrade of the pending release: %v", err)
	}

	// fresh: another operation may be on it, and nothing is touched
	fresh := c.release("pend", "two")
	if err := c.applyErr(fresh); !errors.As(err, new(*PendingError)) ||
		!strings.Contains(err.Error(), "release pend ("+c.ns+"): another operation (install/upgrade/rollback) is in progress: revision 2 has been pending-upgrade for ") {
		t.Fatalf("apply of a fresh pending upgrade: %v", err)
	}
	if got := c.revisions("pend"); !reflect.DeepEqual(got, []string{"1:deployed", "2:pending-upgrade"}) {
		t.Errorf("revisions after the refusal = %v", got)
	}

	// an hour old: abandoned
	c.pend("pend", rcommon.StatusPendingUpgrade, time.Hour, nil)
	p := c.plan(c.release("pend", "two"))
	if p.Action != PlanUpgrade || !regexp.MustCompile(`^revision 2 was left pending-upgrade 1h0m\d+s ago, longer than the step's timeout \(1m0s\): apply will mark it failed, roll back to revision 1, then upgrade$`).MatchString(p.Reason) {
		t.Errorf("plan: %+v", p)
	}
	res := c.apply(c.release("pend", "two"))
	if res.Action != Upgraded || res.Revision != 4 ||
		!regexp.MustCompile(`^revision 2 was left pending-upgrade 1h0m\d+s ago, longer than the step's timeout \(1m0s\): marked it failed and rolled back to revision 1$`).MatchString(res.Recovered) {
		t.Errorf("result: %+v", res)
	}
	if got := c.revisions("pend"); !reflect.DeepEqual(got, []string{"1:superseded", "2:failed", "3:superseded", "4:deployed"}) {
		t.Errorf("revisions = %v", got)
	}
	if got := c.color("pend"); got != "two" {
		t.Errorf("color = %q", got)
	}
}

func mustChart(t *testing.T, c *cluster) *Chart {
	t.Helper()
	ch, err := c.client.LoadChart(context.Background(), Source{Chart: chartrepo.ChartDir("demo")})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestRecoverPendingRollback: a rollback interrupted mid-way is treated
// like an interrupted upgrade.
func TestRecoverPendingRollback(t *testing.T) {
	c := newCluster(t, "helm-pending-rollback")
	c.apply(c.release("rb", "one"))
	c.apply(c.release("rb", "two"))
	c.setLatest("rb", rcommon.StatusPendingRollback)
	res := c.apply(c.release("rb", "three"))
	if res.Action != Upgraded || !regexp.MustCompile(`^revision 2 was left pending-rollback 1h0m\d+s ago, longer than the step's timeout \(1m0s\): marked it failed and rolled back to revision 1$`).MatchString(res.Recovered) {
		t.Errorf("result: %+v", res)
	}
	if got := c.color("rb"); got != "three" {
		t.Errorf("color = %q", got)
	}
}

// TestRecoverPendingInstall: an interrupted first install (nothing ever
// deployed), or an interrupted uninstall, is uninstalled and installed
// again.
func TestRecoverPendingInstall(t *testing.T) {
	c := newCluster(t, "helm-pending-install")
	for _, status := range []rcommon.Status{rcommon.StatusPendingInstall, rcommon.StatusUninstalling} {
		name := "r-" + string(status)
		c.apply(c.release(name, "one"))
		c.setLatest(name, status)
		left := "^revision 1 was left " + string(status) + ` 1h0m\d+s ago, longer than the step's timeout \(1m0s\): `
		p := c.plan(c.release(name, "two"))
		if p.Action != PlanUpgrade || !regexp.MustCompile(left+"apply will uninstall it and install again$").MatchString(p.Reason) {
			t.Errorf("%s: plan: %+v", status, p)
		}
		res := c.apply(c.release(name, "two"))
		if res.Action != Installed || res.Revision != 1 ||
			!regexp.MustCompile(left+"uninstalled it and installed again$").MatchString(res.Recovered) {
			t.Errorf("%s: result: %+v", status, res)
		}
		if got := c.revisions(name); !reflect.DeepEqual(got, []string{"1:deployed"}) {
			t.Errorf("%s: revisions = %v", status, got)
		}
		if got := c.color(name); got != "two" {
			t.Errorf("%s: color = %q", status, got)
		}
	}
}

// TestReplaceUninstalled: a release uninstalled with its history kept is
// installed again.
func TestReplaceUninstalled(t *testing.T) {
	c := newCluster(t, "helm-replace")
	c.apply(c.release("gone", "one"))
	un := action.NewUninstall(c.config().Configuration)
	un.KeepHistory = true
	un.WaitStrategy = helmkube.HookOnlyStrategy
	if _, err := un.Run("gone"); err != nil {
		t.Fatal(err)
	}
	if p := c.plan(c.release("gone", "two")); p.Action != PlanInstall {
		t.Errorf("plan: %+v", p)
	}
	if res := c.apply(c.release("gone", "two")); res.Action != Installed {
		t.Errorf("result: %+v", res)
	}
	if got := c.color("gone"); got != "two" {
		t.Errorf("color = %q", got)
	}
}
