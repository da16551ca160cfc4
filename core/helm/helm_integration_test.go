//go:build integration

package helm

import (
	"context"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/internal/chartrepo"
	"khook.io/core/internal/steptest"
	"khook.io/core/internal/testcluster"
	"khook.io/core/kube"
	"khook.io/core/redact"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

type cluster struct {
	t       *testing.T
	clients *kube.Clients
	client  *Client
	ns      string
}

func newCluster(t *testing.T, prefix string) *cluster {
	t.Helper()
	c := testcluster.Get(t)
	clients := steptest.Clients(t, c.RESTConfig(t))
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

func (c *cluster) config() *configuration {
	c.t.Helper()
	cfg, err := c.client.configuration(c.ns)
	if err != nil {
		c.t.Fatal(err)
	}
	return cfg
}

// setLatest rewrites the latest revision's status, as an interrupted run
// would have left it.
func (c *cluster) setLatest(name string, status rcommon.Status) {
	c.t.Helper()
	cfg := c.config()
	hist, err := history(cfg, name)
	if err != nil {
		c.t.Fatal(err)
	}
	rel := latest(hist)
	rel.Info.Status = status
	if err := cfg.Releases.Update(rel); err != nil {
		c.t.Fatal(err)
	}
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

	p := c.plan(c.release("pend", "two"))
	if p.Action != PlanUpgrade || p.Reason != "revision 2 was left pending-upgrade by an interrupted run: apply will mark it failed, roll back to revision 1, then upgrade" {
		t.Errorf("plan: %+v", p)
	}
	res := c.apply(c.release("pend", "two"))
	if res.Action != Upgraded || res.Revision != 4 ||
		res.Recovered != "revision 2 was left pending-upgrade by an interrupted run: marked it failed and rolled back to revision 1" {
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
	if res.Action != Upgraded || res.Recovered != "revision 2 was left pending-rollback by an interrupted run: marked it failed and rolled back to revision 1" {
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
		p := c.plan(c.release(name, "two"))
		if p.Action != PlanUpgrade || p.Reason != "revision 1 was left "+string(status)+" by an interrupted run: apply will uninstall it and install again" {
			t.Errorf("%s: plan: %+v", status, p)
		}
		res := c.apply(c.release(name, "two"))
		if res.Action != Installed || res.Revision != 1 ||
			res.Recovered != "revision 1 was left "+string(status)+" by an interrupted run: uninstalled it and installed again" {
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
