//go:build integration

package apply_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"khook.io/core/kube"
	"khook.io/core/spec"
	"khook.io/core/step"
	"khook.io/core/steps/apply"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

const (
	benchSteps    = 20
	benchPerStep  = 10
	benchParallel = 20
)

// benchRequests builds 20 independent apply steps of 10 ConfigMaps each
// in ns; value goes into every ConfigMap's data.
func benchRequests(b *testing.B, clients *kube.Clients, ns, value string) []*step.Request {
	b.Helper()
	reqs := make([]*step.Request, benchSteps)
	for s := range benchSteps {
		var docs []string
		for i := range benchPerStep {
			docs = append(docs, configMap(fmt.Sprintf("cm-%02d-%02d", s, i), map[string]string{"value": value}))
		}
		reqs[s] = steptest.Request(b, clients, stepYAML(fmt.Sprintf("s%02d", s), "namespace: "+ns, inline(strings.Join(docs, "---\n"))), steptest.Options{})
		reqs[s].Log = nil
	}
	return reqs
}

// runParallel runs the steps on benchParallel goroutines, as the
// scheduler runs independent steps.
func runParallel(b *testing.B, ex *apply.Executor, reqs []*step.Request, want string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, benchParallel)
	for _, r := range reqs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out, err := ex.Run(b.Context(), r)
			if err != nil {
				b.Error(err)
				return
			}
			if !strings.HasSuffix(out.Message, want) {
				b.Errorf("outcome %q, want %q", out.Message, want)
			}
		})
	}
	wg.Wait()
}

// BenchmarkApply200ConfigMaps applies 200 ConfigMaps in 20 independent
// steps of 10, 20 at a time, through one executor and one set of clients:
// create (a fresh namespace per iteration), configure (every ConfigMap
// changes) and unchanged (a re-run).
//
// qps=200 uses the run's clients (kube.DefaultQPS/DefaultBurst), so it
// includes client-go's rate limiter; qps=unlimited shows what the
// executor and the API server do without it.
func BenchmarkApply200ConfigMaps(b *testing.B) {
	c := testcluster.Get(b)
	for _, limited := range []bool{true, false} {
		cfg := c.RESTConfig(b)
		name := fmt.Sprintf("qps=%d", kube.DefaultQPS)
		clients := steptest.Clients(b, cfg)
		if !limited {
			name = "qps=unlimited"
			clients.Config.QPS = -1
			var err error
			if clients, err = kube.NewForConfig(clients.Config, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name, func(b *testing.B) { benchApply(b, c, clients) })
	}
}

func benchApply(b *testing.B, c *testcluster.Cluster, clients *kube.Clients) {
	ex := apply.New(apply.Options{})
	objects := float64(benchSteps * benchPerStep)

	b.Run("create", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			reqs := benchRequests(b, clients, c.NewNamespace(b, "bench"), "v0")
			b.StartTimer()
			runParallel(b, ex, reqs, "10 created")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/objects, "ns/object")
	})

	ns := c.NewNamespace(b, "bench")
	runParallel(b, ex, benchRequests(b, clients, ns, "v0"), "10 created")

	b.Run("configure", func(b *testing.B) {
		n := 0
		for b.Loop() {
			b.StopTimer()
			n++
			reqs := benchRequests(b, clients, ns, fmt.Sprintf("v%d", n))
			b.StartTimer()
			runParallel(b, ex, reqs, "10 configured")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/objects, "ns/object")
	})

	b.Run("unchanged", func(b *testing.B) {
		reqs := benchRequests(b, clients, ns, "final")
		runParallel(b, ex, reqs, "")
		for b.Loop() {
			runParallel(b, ex, reqs, "10 unchanged")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/objects, "ns/object")
	})

	b.Run("serverSide", func(b *testing.B) {
		ssa := c.NewNamespace(b, "bench")
		n := 0
		for b.Loop() {
			b.StopTimer()
			n++
			reqs := benchRequests(b, clients, ssa, fmt.Sprintf("v%d", n))
			for _, r := range reqs {
				spec.BlockOf[apply.Apply](r.Step).ServerSide = true
			}
			b.StartTimer()
			want := "10 configured"
			if n == 1 {
				want = "10 created"
			}
			runParallel(b, ex, reqs, want)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/objects, "ns/object")
	})
}
