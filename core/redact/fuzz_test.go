package redact

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzRedact checks that a registered secret never survives String, Bytes
// or the Writer (for a single-line secret), whatever surrounds it.
func FuzzRedact(f *testing.F) {
	f.Add("s3cr3t", "a ", " b", "tok")
	f.Add("abc", "xab", "cabc", "bcd")
	f.Add("p@ss", "https://u:", "@host/x", "")
	f.Add("ünï", "\xff", "ü", "nï")
	f.Fuzz(func(t *testing.T, secret, before, after, other string) {
		if secret == "" || strings.ContainsAny(secret, "*\n\r") {
			return // not a secret the redactor accepts: nothing to check
		}
		r := New()
		r.Add(secret)
		r.Add(other)
		in := before + secret + after + secret
		out := r.String(in)
		if strings.Contains(out, secret) {
			t.Fatalf("String(%q) = %q leaks %q", in, out, secret)
		}
		if got := string(r.Bytes([]byte(in))); got != out {
			t.Fatalf("Bytes = %q, String = %q", got, out)
		}
		var buf bytes.Buffer
		w := r.Writer(&buf)
		for i := 0; i < len(in); i += 3 {
			_, _ = w.Write([]byte(in[i:min(i+3, len(in))]))
		}
		_ = w.Flush()
		if strings.Contains(buf.String(), secret) {
			t.Fatalf("Writer leaks %q: %q", secret, buf.String())
		}
	})
}
