//go:build integration

package diagnose_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"khook.io/core/step"
	"khook.io/core/steps/apply"
	helmstep "khook.io/core/steps/helm"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
	"khook.io/core/waiter"
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

// BenchmarkTenCharts installs ten charts (a ConfigMap and a Deployment
// each) as parallel steps in a fresh namespace, without and with wait:
// true (bench/charts.sh's "10 charts", in one process), and, to compare,
// applies the same objects with waitFor on the Deployments. It reports
// the requests made, those of the diagnosis (0: nothing ever stopped
// progressing), and, seen by a watch of the Deployments outside khook,
// the cluster's pace (from the last Deployment created to the last
// Current by kstatus: the Deployments are created at once, each release
// after its own reads and renders) and the lag (the last Current to the
// steps' end):
//
//	go test -tags integration -run '^$' -bench TenCharts -benchtime 10x ./core/diagnose/
func BenchmarkTenCharts(b *testing.B) {
	cl := testcluster.Get(b)
	for _, mode := range []string{"helm-nowait", "helm-wait", "apply-nowait", "apply-waitFor"} {
		b.Run(mode, func(b *testing.B) {
			var requests, diagnosis int
			var pace, lag time.Duration
			for b.Loop() {
				b.StopTimer()
				c := &counter{}
				clients := steptest.Clients(b, c.config(cl.RESTConfig(b)))
				ns := cl.NewNamespace(b, "charts")
				h, a := helmstep.New(helmstep.Options{}), apply.New(apply.Options{})
				var execs []step.Executor
				var reqs []*step.Request
				for i := range 10 {
					switch mode {
					case "apply-nowait", "apply-waitFor":
						d := cause{}.deployment()
						d = strings.Replace(d, "name: web", fmt.Sprintf("name: web-%d", i), 1)
						d = strings.Replace(strings.ReplaceAll(d, "app: web", fmt.Sprintf("app: web-%d", i)), "replicas: 2", "replicas: 1", 1)
						execs = append(execs, a, a)
						reqs = append(reqs,
							steptest.Request(b, clients, fmt.Sprintf("name: config-%d\napply:\n  namespace: %s\n  manifests:\n  - inline: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: web-%d-config}\n      data: {color: c%d}\n", i, ns, i, i), steptest.Options{}),
							steptest.Request(b, clients, fmt.Sprintf("name: web-%d\napply:\n  namespace: %s\n%s  manifests:\n  - inline: |\n%s", i, ns, waitFor(mode), indent(d, "      ")), steptest.Options{}))
					default:
						execs = append(execs, h)
						reqs = append(reqs, steptest.Request(b, clients, fmt.Sprintf("name: chart-%d\nhelm:\n  chart: %s\n  namespace: %s\n  wait: %v\n  values: {color: c%d}", i, chartrepo.ChartDir("cmdeploy"), ns, mode == "helm-wait", i), steptest.Options{}))
					}
				}
				watch := watchCurrent(b, cl, ns, 10)
				before, _ := c.counts()
				b.StartTimer()
				for i, o := range run(execs, reqs) {
					if o.err != nil {
						b.Fatalf("%s: %v", reqs[i].Step.Name, o.err)
					}
				}
				b.StopTimer()
				end := time.Now()
				all, diag := c.counts()
				requests += all - before
				diagnosis += len(diag)
				first, last := watch()
				pace += last.Sub(first)
				lag += end.Sub(last)
				b.StartTimer()
			}
			b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
			b.ReportMetric(float64(diagnosis)/float64(b.N), "diagnosis-requests/op")
			b.ReportMetric(float64(pace.Milliseconds())/float64(b.N), "pace-ms/op")
			b.ReportMetric(float64(lag.Milliseconds())/float64(b.N), "lag-ms/op")
		})
	}
}

func waitFor(mode string) string {
	if mode == "apply-waitFor" {
		return "  waitFor: condition=Available\n"
	}
	return ""
}

// watchCurrent watches the Deployments of ns from outside khook; the
// function it returns waits until n are Current by kstatus and says when
// the last was first seen (created) and when the last became Current.
func watchCurrent(b *testing.B, cl *testcluster.Cluster, ns string, n int) func() (time.Time, time.Time) {
	dyn, err := dynamic.NewForConfig(cl.RESTConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	w, err := dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var first, last time.Time
	done := make(chan bool, 1)
	go func() {
		defer w.Stop()
		current, seen := map[string]bool{}, map[string]bool{}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if !seen[u.GetName()] {
				seen[u.GetName()], first = true, time.Now()
			}
			if ready, _, _ := waiter.KStatus(u); ready && !current[u.GetName()] {
				current[u.GetName()], last = true, time.Now()
				if len(current) == n {
					done <- true
					return
				}
			}
		}
		done <- false
	}()
	return func() (time.Time, time.Time) {
		defer cancel()
		if !<-done {
			b.Fatalf("the Deployments of %s were not all Current", ns)
		}
		return first, last
	}
}
