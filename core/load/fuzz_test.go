package load

import (
	"errors"
	"testing"

	"khook.io/core/redact"
	"khook.io/core/steps/builtin"
	"khook.io/core/vars"
)

// FuzzLoad feeds arbitrary text through substitution, parsing, validation,
// conditions and the DAG. Nothing may panic; an invalid spec must be an
// *InvalidError whose every problem has a position and a message; a valid
// one must plan every step. Seeds live in testdata/fuzz/FuzzLoad and run
// with plain go test.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(envelope + "  - name: a\n    wait: {for: delete, on: pods/x}\n"))
	f.Add([]byte(envelope + "  - name: a\n    when: vars.get(\"X\", \"1\") == \"1\"\n    job: {image: \"busybox:${TAG:-1.36|upper}\"}\n"))
	f.Add([]byte(envelope + "  - name: a\n    needs: [b]\n    wait: {for: delete, on: pods/x}\n  - name: b\n    needs: [a]\n    wait: {for: delete, on: pods/x}\n"))
	f.Add([]byte("${"))
	f.Add([]byte("a: ${X:-|b64enc}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		red := redact.New()
		set, err := vars.Resolve(vars.Options{Environ: []string{"KHOOK_VAR_X=1", "KHOOK_SECRET_S=secret-value"}}, red)
		if err != nil {
			t.Fatal(err)
		}
		l := Loader{Steps: builtin.Registry}
		doc, err := l.Parse(src, "fuzz.yaml", "testdata", set, red)
		if err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("want *InvalidError, got %T: %v", err, err)
			}
			if len(inv.Problems) == 0 {
				t.Fatal("an invalid spec without problems")
			}
			for _, p := range inv.Problems {
				if p.Msg == "" || p.Pos.Line < 0 || p.Pos.Col < 0 {
					t.Fatalf("bad problem %+v", p)
				}
			}
			return
		}
		if p := doc.OfflinePlan(); len(p.Steps) != len(doc.Spec.Steps) || len(p.Steps) == 0 {
			t.Fatalf("plan has %d steps for %d", len(p.Steps), len(doc.Spec.Steps))
		}
	})
}
