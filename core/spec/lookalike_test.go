package spec

import "testing"

func TestNonASCIINote(t *testing.T) {
	tests := map[string]string{
		"helm":        "",
		"hеlm":        `"hеlm" contains U+0435, not "e"`,
		"сiliumа":     `"сiliumа" contains U+0441, not "c", and U+0430, not "a"`,
		"ｊｏｂ":         `"ｊｏｂ" contains U+FF4A, not "j", and U+FF4F, not "o", and U+FF42, not "b"`,
		"wait\u200b":  `"wait\u200b" contains U+200B, an invisible character`,
		"ciliüm":      `"ciliüm" contains U+00FC`,
		"kube‑system": `"kube‑system" contains U+2011, not "-"`,
	}
	for in, want := range tests {
		if got := nonASCIINote(in); got != want {
			t.Errorf("nonASCIINote(%q) = %s, want %s", in, got, want)
		}
	}
}
