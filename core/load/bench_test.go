package load

import (
	"path/filepath"
	"strings"
	"testing"

	"khook.io/core/internal/specgen"
	"khook.io/core/redact"
	"khook.io/core/vars"
)

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
// (a fresh loader each time): the cost one CLI invocation pays.
func BenchmarkValidatePlan500WhenCold(b *testing.B) {
	src := specgen.Spec(500, true)
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
		doc, err := parseSpec(t, specgen.Spec(500, when), "KHOOK_VAR_ENV=prod")
		if err != nil {
			t.Fatal(err)
		}
		if len(doc.Spec.Steps) != 500 || len(doc.Graph.Levels()) < 2 {
			t.Fatalf("unexpected document: %d steps, %d levels", len(doc.Spec.Steps), len(doc.Graph.Levels()))
		}
	}
}
