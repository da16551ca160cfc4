//go:build integration

package diagnose_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"khook.io/core/internal/dev/chartrepo"
	"khook.io/core/internal/dev/steptest"
	"khook.io/core/internal/dev/testcluster"
	"khook.io/core/step"
	"khook.io/core/steps/apply"
	helmstep "khook.io/core/steps/helm"
)

// counter counts a run's requests, and those only a diagnosis makes:
// events, Pod and ReplicaSet lists, logs, claims, metadata-only reads of
// what a Pod references.
type counter struct {
	mu        sync.Mutex
	all       int
	diagnosis []string
}

func (c *counter) config(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			c.mu.Lock()
			c.all++
			if diagnosisRequest(r) {
				c.diagnosis = append(c.diagnosis, r.Method+" "+r.URL.RequestURI())
			}
			c.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

func diagnosisRequest(r *http.Request) bool {
	p, q := r.URL.Path, r.URL.Query()
	list := r.Method == http.MethodGet && q.Get("watch") != "true"
	switch {
	case strings.Contains(r.Header.Get("Accept"), "PartialObjectMetadata"):
		return true
	case list && (strings.HasSuffix(p, "/events") || strings.HasSuffix(p, "/pods") || strings.HasSuffix(p, "/replicasets")):
		return true
	case strings.HasSuffix(p, "/log"), strings.Contains(p, "/persistentvolumeclaims/"):
		return true
	}
	return false
}

func (c *counter) counts() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all, append([]string(nil), c.diagnosis...)
}

// readySteps are ten helm steps with wait: true and ten apply steps with
// waitFor, in ns, whose objects all become ready at once.
func readySteps(t testing.TB, cfg *rest.Config, ns string) ([]step.Executor, []*step.Request) {
	clients := steptest.Clients(t, cfg)
	var execs []step.Executor
	var reqs []*step.Request
	h, a := helmstep.New(helmstep.Options{}), apply.New(apply.Options{})
	for i := range 10 {
		execs = append(execs, h)
		reqs = append(reqs, steptest.Request(t, clients, fmt.Sprintf("name: chart-%d\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true\n  values: {color: c%d}", i, chartrepo.ChartDir("cmdeploy"), ns, i), steptest.Options{}))
		d := cause{}.deployment()
		d = strings.Replace(d, "name: web", fmt.Sprintf("name: web-%d", i), 1)
		d = strings.ReplaceAll(d, "app: web", fmt.Sprintf("app: web-%d", i))
		execs = append(execs, a)
		reqs = append(reqs, steptest.Request(t, clients, fmt.Sprintf("name: web-%d\napply:\n  namespace: %s\n  waitFor: condition=Available\n  manifests:\n  - inline: |\n%s", i, ns, indent(d, "      ")), steptest.Options{}))
	}
	for _, r := range reqs {
		r.Log = nil
	}
	return execs, reqs
}

// TestReadyWaitsMakeNoDiagnosisRequests: ten charts with wait: true and
// ten Deployments with waitFor, all becoming ready: not one request of
// the diagnosis is made (it runs only once a wait stops progressing).
func TestReadyWaitsMakeNoDiagnosisRequests(t *testing.T) {
	cl := testcluster.Get(t)
	c := &counter{}
	execs, reqs := readySteps(t, c.config(cl.RESTConfig(t)), cl.NewNamespace(t, "cost"))
	began := time.Now()
	for i, o := range run(execs, reqs) {
		if o.err != nil {
			t.Fatalf("%s: %v", reqs[i].Step.Name, o.err)
		}
	}
	all, diag := c.counts()
	t.Logf("20 steps ready in %s: %d requests", time.Since(began).Round(time.Millisecond), all)
	if len(diag) > 0 {
		t.Errorf("%d requests of the diagnosis while everything became ready: %q", len(diag), diag)
	}
}

// BenchmarkReadyWaits installs ten charts with wait: true and applies ten
// Deployments with waitFor (parallel steps, a fresh namespace each time)
// and reports the requests made and those of the diagnosis (0):
//
//	go test -tags integration -run '^$' -bench ReadyWaits -benchtime 5x ./core/diagnose/
func BenchmarkReadyWaits(b *testing.B) {
	cl := testcluster.Get(b)
	var requests, diagnosis int
	for b.Loop() {
		b.StopTimer()
		c := &counter{}
		execs, reqs := readySteps(b, c.config(cl.RESTConfig(b)), cl.NewNamespace(b, "cost"))
		b.StartTimer()
		for i, o := range run(execs, reqs) {
			if o.err != nil {
				b.Fatalf("%s: %v", reqs[i].Step.Name, o.err)
			}
		}
		all, diag := c.counts()
		requests += all
		diagnosis += len(diag)
	}
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	b.ReportMetric(float64(diagnosis)/float64(b.N), "diagnosis-requests/op")
}
