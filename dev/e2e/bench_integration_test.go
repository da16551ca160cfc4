//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/testing/testcluster"
)

// manySteps is a spec of n apply steps, each with per ConfigMaps, in a
// few chains of needs (or all independent when chains is 0).
func manySteps(ns string, n, per int, withState bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: %s}\n", ns)
	if withState {
		fmt.Fprintf(&b, "state: {namespace: %s}\n", ns)
	}
	b.WriteString("steps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - name: s%d\n    apply:\n      namespace: %s\n      manifests:\n        - inline: |\n", i, ns)
		for j := 0; j < per; j++ {
			if j > 0 {
				b.WriteString("            ---\n")
			}
			fmt.Fprintf(&b, "            apiVersion: v1\n            kind: ConfigMap\n            metadata: {name: cm-%d-%d}\n            data: {step: \"%d\"}\n", i, j, i)
		}
	}
	return b.String()
}

// BenchmarkApply200ConfigMapsIn20Steps: the engine applying 200 objects in
// 20 independent steps (first run creates, later runs find them unchanged).
func BenchmarkApply200ConfigMapsIn20Steps(b *testing.B) {
	ns := testcluster.Get(b).NewNamespace(b, "bench200")
	spec := writeSpecB(b, manySteps(ns, 20, 10, false))
	env := []string{"KUBECONFIG=" + testcluster.Get(b).Kubeconfig}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := runB(b, bins.Kubectl, env, "apply", "-f", spec)
		if res.Code != 0 {
			b.Fatalf("exit %d: %s", res.Code, res.Stderr)
		}
		b.ReportMetric(float64(res.Elapsed.Milliseconds()), "ms/run")
	}
}

// BenchmarkNoopRerun50: a no-op re-run of a 50-step spec, with the state
// record (every step resumes) and without (every step re-applies).
func BenchmarkNoopRerun50(b *testing.B) {
	for _, withState := range []bool{true, false} {
		name := "without-state"
		if withState {
			name = "with-state"
		}
		b.Run(name, func(b *testing.B) {
			ns := testcluster.Get(b).NewNamespace(b, "noop")
			spec := writeSpecB(b, manySteps(ns, 50, 1, withState))
			env := []string{"KUBECONFIG=" + testcluster.Get(b).Kubeconfig}
			if res := runB(b, bins.Kubectl, env, "apply", "-f", spec); res.Code != 0 {
				b.Fatalf("first apply: %s", res.Stderr)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res := runB(b, bins.Kubectl, env, "apply", "-f", spec)
				if res.Code != 0 {
					b.Fatalf("exit %d: %s", res.Code, res.Stderr)
				}
				if withState && strings.Count(res.Stdout, "unchanged since it succeeded") != 50 {
					b.Fatalf("every step must resume:\n%s", res.Stdout)
				}
			}
		})
	}
}

// countWrites counts the writes of the record Secret ns/name while it
// runs: one watch event per create, update or delete.
func countWrites(b *testing.B, ns, name string) (stop func() int) {
	b.Helper()
	c, err := kubernetes.NewForConfig(testcluster.Get(b).RESTConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	// watch from the list's resourceVersion: no synthetic event for the
	// Secret as it is, only the writes that follow
	sel := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	list, err := c.CoreV1().Secrets(ns).List(context.Background(), sel)
	if err != nil {
		b.Fatal(err)
	}
	sel.ResourceVersion = list.ResourceVersion
	w, err := c.CoreV1().Secrets(ns).Watch(context.Background(), sel)
	if err != nil {
		b.Fatal(err)
	}
	n := make(chan int, 1)
	go func() {
		seen := map[string]bool{}
		for e := range w.ResultChan() {
			if o, ok := e.Object.(metav1.Object); ok && e.Type != watch.Bookmark && e.Type != watch.Error {
				seen[o.GetResourceVersion()] = true
			}
		}
		n <- len(seen)
	}()
	return func() int {
		// the last write's event may still be on its way
		time.Sleep(200 * time.Millisecond)
		w.Stop()
		return <-n
	}
}

// BenchmarkStateRecord200Steps: a 200-step spec with state, one ConfigMap
// per step: the first apply, a no-op re-run (every step resumes) and a
// destroy, with the number of writes of the record each makes.
func BenchmarkStateRecord200Steps(b *testing.B) {
	env := []string{"KUBECONFIG=" + testcluster.Get(b).Kubeconfig}
	for _, name := range []string{"apply", "noop", "destroy"} {
		b.Run(name, func(b *testing.B) {
			ns := testcluster.Get(b).NewNamespace(b, "rec200")
			spec := writeSpecB(b, manySteps(ns, 200, 1, true))
			mustRun := func(cmd string) {
				if res := runB(b, bins.Kubectl, env, append([]string{cmd, "-f", spec}, yes(cmd)...)...); res.Code != 0 {
					b.Fatalf("%s: exit %d: %s", cmd, res.Code, res.Stderr)
				}
			}
			cmd := "apply"
			if name == "destroy" {
				cmd = "destroy"
			}
			if name != "apply" {
				mustRun("apply")
			}
			var ms, writes float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if name == "destroy" && i > 0 {
					mustRun("apply")
				}
				count := countWrites(b, ns, "khook-state-"+ns)
				b.StartTimer()
				res := runB(b, bins.Kubectl, env, append([]string{cmd, "-f", spec}, yes(cmd)...)...)
				b.StopTimer()
				if res.Code != 0 {
					b.Fatalf("exit %d: %s", res.Code, res.Stderr)
				}
				ms += float64(res.Elapsed.Milliseconds())
				writes += float64(count())
				if name == "apply" {
					mustRun("destroy")
				}
				b.StartTimer()
			}
			b.ReportMetric(ms/float64(b.N), "ms/run")
			b.ReportMetric(writes/float64(b.N), "writes/run")
		})
	}
}
