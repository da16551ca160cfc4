package load

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"khook.io/core/redact"
	"khook.io/core/vars"
)

// bigSpec generates an n-step spec that uses every step type, variables
// with defaults and pipelines, and needs chains; with when, every step has
// its own when: expression.
func bigSpec(n int, when bool) string {
	var b strings.Builder
	b.WriteString("apiVersion: khook.io/v1\nkind: Khook\nmetadata:\n  name: big\ndefaults:\n  timeout: 5m\n  retries: 1\nsteps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - name: step-%d\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    needs: [step-%d]\n", i-1-(i%7)%i)
		}
		if when {
			fmt.Fprintf(&b, "    when: vars.get(\"ENABLE_STEP_%d\", \"true\") == \"true\" && vars.ENV != \"off\"\n", i)
		}
		switch i % 7 {
		case 0:
			fmt.Fprintf(&b, `    helm:
      chart: app-%d
      repo: https://charts.example.com/${CHANNEL:-stable}
      version: 1.%d.0
      namespace: ns-%d
      createNamespace: true
      values:
        replicaCount: ${REPLICAS:-2}
        image: { repository: example/app, tag: "${TAG:-1.0}" }
        name: ${APP_%d:-app|lower|trunc 63}
`, i, i, i%20, i)
		case 1:
			fmt.Fprintf(&b, `    apply:
      namespace: ns-%d
      waitFor: condition=Available
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: cm-%d
            data:
              env: ${ENV:-dev}
`, i%20, i)
		case 2:
			fmt.Fprintf(&b, "    delete:\n      resource: daemonset/legacy-%d\n      namespace: kube-system\n", i)
		case 3:
			fmt.Fprintf(&b, "    patch:\n      target: deployment/app-%d\n      namespace: ns-%d\n      patch:\n        spec:\n          replicas: ${REPLICAS:-2}\n", i, i%20)
		case 4:
			fmt.Fprintf(&b, "    wait:\n      for: jsonpath={.status.readyReplicas}=2\n      on: deployment/app-%d\n      namespace: ns-%d\n", i, i%20)
		case 5:
			fmt.Fprintf(&b, "    rollout:\n      restart: deployment/app-%d\n      namespace: ns-%d\n", i, i%20)
		case 6:
			fmt.Fprintf(&b, "    job:\n      image: busybox:1.36\n      namespace: ns-%d\n      command: [sh, -c]\n      args: [\"echo ${ENV:-dev|upper} %d\"]\n", i%20, i)
		}
	}
	return b.String()
}

func benchLoad(b *testing.B, src string) {
	base, err := filepath.Abs("testdata")
	if err != nil {
		b.Fatal(err)
	}
	env := []string{"KHOOK_VAR_ENV=prod", "KHOOK_SECRET_TOKEN=hunter2-secret"}
	// one loader per process, as the CLI has; its CEL environment is built
	// on first use, which the first iteration pays.
	var l Loader
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		red := redact.New()
		set, err := vars.Resolve(vars.Options{Environ: env}, red)
		if err != nil {
			b.Fatal(err)
		}
		doc, err := l.Parse([]byte(src), "big.yaml", base, set, red)
		if err != nil {
			b.Fatal(err)
		}
		if p := doc.OfflinePlan(); len(p.Steps) != len(doc.Spec.Steps) {
			b.Fatal("plan lost steps")
		}
	}
}

// BenchmarkValidatePlan500 is validate+plan of a 500-step spec in-process
// (target: under 20 ms).
func BenchmarkValidatePlan500(b *testing.B) { benchLoad(b, bigSpec(500, false)) }

// BenchmarkValidatePlan500When is the same with a distinct when: on every
// step (target: under 30 ms). The loader compiles each expression once and
// keeps it, as a process does; the first iteration pays for compiling.
func BenchmarkValidatePlan500When(b *testing.B) { benchLoad(b, bigSpec(500, true)) }

// BenchmarkValidatePlan500WhenCold compiles every when: in every iteration
// (a fresh loader each time): the cost one CLI invocation pays.
func BenchmarkValidatePlan500WhenCold(b *testing.B) {
	src := bigSpec(500, true)
	base, _ := filepath.Abs("testdata")
	env := []string{"KHOOK_VAR_ENV=prod"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var l Loader
		red := redact.New()
		set, err := vars.Resolve(vars.Options{Environ: env}, red)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Parse([]byte(src), "big.yaml", base, set, red); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBigSpecIsValid(t *testing.T) {
	for _, when := range []bool{false, true} {
		doc, err := parseSpec(t, bigSpec(500, when), "KHOOK_VAR_ENV=prod")
		if err != nil {
			t.Fatal(err)
		}
		if len(doc.Spec.Steps) != 500 || len(doc.Graph.Levels()) < 2 {
			t.Fatalf("unexpected document: %d steps, %d levels", len(doc.Spec.Steps), len(doc.Graph.Levels()))
		}
	}
}
