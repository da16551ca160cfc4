package load

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"khook.io/core/redact"
	"khook.io/core/steps/builtin"
	"khook.io/core/testing/specgen"
	"khook.io/core/vars"
)

func benchLoad(b *testing.B, src string) { benchLoadWith(b, src, false) }

// benchLoadWith is validate+plan of src. Without fresh, one loader serves
// every iteration, as one process keeps it: its CEL environment is built
// and each when: compiled in the first iteration. With fresh, every
// iteration has a new loader and compiles everything again: the cost one
// CLI invocation pays.
func benchLoadWith(b *testing.B, src string, fresh bool) {
	base, err := filepath.Abs("testdata")
	if err != nil {
		b.Fatal(err)
	}
	env := []string{"KHOOK_VAR_ENV=prod", "KHOOK_SECRET_TOKEN=hunter2-secret"}
	l := Loader{Steps: builtin.Registry}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if fresh {
			l = Loader{Steps: builtin.Registry}
		}
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
func BenchmarkValidatePlan500(b *testing.B) { benchLoad(b, specgen.Spec(500, false)) }

// BenchmarkValidatePlan500Secrets is the same with a secret variable in
// every step: checking that no identifier holds one costs no second parse.
func BenchmarkValidatePlan500Secrets(b *testing.B) {
	benchLoad(b, strings.ReplaceAll(specgen.Spec(500, false), "${TAG:-1.0}", "${TOKEN}"))
}

// BenchmarkValidatePlan500When is the same with a distinct when: on every
// step (target: under 30 ms). The loader compiles each expression once and
// keeps it, as a process does; the first iteration pays for compiling.
func BenchmarkValidatePlan500When(b *testing.B) { benchLoad(b, specgen.Spec(500, true)) }

// BenchmarkValidatePlan500WhenCold compiles every when: in every iteration
// (a fresh loader each time): the cost one CLI invocation pays. The 500
// expressions are distinct, all of one form (a feature flag per step):
// compiled as written, each is a cel-go compile of about 150 µs, 65 ms in
// all, over the 30 ms goal; their one shape (core/cel/shape.go) is
// compiled once, which keeps this case near the usual spec's
// (WhenFewCold).
func BenchmarkValidatePlan500WhenCold(b *testing.B) {
	benchLoadWith(b, specgen.Spec(500, true), true)
}

// fewConditions are the conditions of a real spec: a few feature flags and
// environment checks, each repeated on many steps.
var fewConditions = []string{
	`vars.get("ENABLE_ARGOCD", "false") == "true"`,
	`vars.ENV == "prod"`,
	`vars.ENV != "dev" && !has(vars.SKIP_MONITORING)`,
	`vars.get("INGRESS", "nginx") in ["nginx", "traefik"]`,
	`vars.get("REGION", "eu-west-1").startsWith("eu-")`,
}

// BenchmarkValidatePlan500WhenFewCold is the usual case: 500 steps sharing
// five distinct conditions, compiled in every iteration.
func BenchmarkValidatePlan500WhenFewCold(b *testing.B) {
	benchLoadWith(b, specgen.SpecWhen(500, func(i int) string { return fewConditions[i%len(fewConditions)] }), true)
}

// BenchmarkValidatePlan500WhenDistinctCold is the worst case: every
// condition distinct, in its literals and in its form (an integer literal
// differs in each), compiled in every iteration.
func BenchmarkValidatePlan500WhenDistinctCold(b *testing.B) {
	benchLoadWith(b, specgen.SpecWhen(500, func(i int) string {
		return fmt.Sprintf(`vars.get("ENABLE_STEP_%d", "true") == "true" && vars.ENV.size() != %d`, i, i)
	}), true)
}

func TestBigSpecIsValid(t *testing.T) {
	for _, when := range []bool{false, true} {
		doc, err := parseSpec(t, specgen.Spec(500, when), "KHOOK_VAR_ENV=prod")
		if err != nil {
			t.Fatal(err)
		}
		if len(doc.Spec.Steps) != 500 || len(doc.Graph.Levels()) < 2 {
			t.Fatalf("unexpected document: %d steps, %d levels", len(doc.Spec.Steps), len(doc.Graph.Levels()))
		}
	}
}
