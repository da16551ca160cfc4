//go:build integration

package helm_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"khook.io/core/step"
	helmstep "khook.io/core/steps/helm"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

// BenchmarkTenChartsParallel measures the wall time of installing 10 small
// local charts in parallel steps (10 goroutines, one executor, one set of
// clients), then of the no-op re-run of the same 10 steps. Run it with
//
//	go test -tags integration -run '^$' -bench TenCharts -benchtime 3x ./steps/helm/
func BenchmarkTenChartsParallel(b *testing.B) {
	c := testcluster.Get(b)
	clients := steptest.Clients(b, c.RESTConfig(b))
	exec := helmstep.New(helmstep.Options{})
	const n = 10
	var install, noop time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := c.NewNamespace(b, "helm-bench")
		reqs := make([]*step.Request, n)
		for j := range reqs {
			reqs[j] = steptest.Request(b, clients, fmt.Sprintf("name: chart-%d\nhelm:\n  chart: %s\n  namespace: %s\n  values: {color: c%d}", j, chartrepo.ChartDir("demo"), ns, j), steptest.Options{})
			reqs[j].Log = nil
		}
		b.StartTimer()
		begin := time.Now()
		runAll(b, exec, reqs)
		install += time.Since(begin)
		begin = time.Now()
		runAll(b, exec, reqs)
		noop += time.Since(begin)
	}
	b.ReportMetric(install.Seconds()/float64(b.N), "install-s/op")
	b.ReportMetric(noop.Seconds()/float64(b.N), "noop-s/op")
}

func runAll(b *testing.B, exec *helmstep.Executor, reqs []*step.Request) {
	var wg sync.WaitGroup
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, errs[i] = step.RunStep(ctx, exec, r)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("chart-%d: %v", i, err)
		}
	}
}
