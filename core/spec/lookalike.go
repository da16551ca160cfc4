package spec

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// lookalikes maps letters of other scripts, and other characters, that
// look like an ASCII character to that character: a key or a name typed
// with a Cyrillic "е" reads as "e" in every editor and font.
var lookalikes = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'е': 'e', 'і': 'i', 'ј': 'j', 'к': 'k', 'о': 'o', 'р': 'p', 'с': 'c',
	'у': 'y', 'х': 'x', 'ѕ': 's', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'һ': 'h', 'ӏ': 'l',
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'С': 'C',
	'Т': 'T', 'Х': 'X', 'У': 'Y', 'І': 'I', 'Ј': 'J', 'Ѕ': 'S', 'Ԛ': 'Q', 'Ԝ': 'W',
	// Greek
	'α': 'a', 'ο': 'o', 'ν': 'v', 'ι': 'i', 'κ': 'k', 'ρ': 'p', 'υ': 'u', 'χ': 'x', 'ε': 'e',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N',
	'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
	// Latin
	'ı': 'i', 'ɡ': 'g', 'ℓ': 'l', 'ɑ': 'a',
	// Dashes and spaces
	'‐': '-', '‑': '-', '‒': '-', '–': '-', '—': '-', '−': '-', '\u00A0': ' ',
}

// invisible characters, which show as nothing at all.
func invisible(r rune) bool {
	switch r {
	case '\u200B', '\u200C', '\u200D', '\u2060', '\uFEFF', '\u00AD':
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// asciiLookalike returns the ASCII character r looks like, or 0.
func asciiLookalike(r rune) rune {
	if a, ok := lookalikes[r]; ok {
		return a
	}
	if r >= 0xFF01 && r <= 0xFF5E { // fullwidth forms
		return r - 0xFEE0
	}
	return 0
}

// foldLookalikes returns s with every look-alike character replaced by
// the ASCII one it looks like and invisible characters removed.
func foldLookalikes(s string) string {
	return strings.Map(func(r rune) rune {
		if a := asciiLookalike(r); a != 0 {
			return a
		}
		if invisible(r) {
			return -1
		}
		return r
	}, s)
}

// nonASCIINote points out the characters of s that are not ASCII, which
// in a key or a name are a mistake nobody sees: `"hеlm" contains U+0435,
// not "e"`. It returns "" when s is ASCII.
func nonASCIINote(s string) string {
	var parts []string
	seen := map[rune]bool{}
	for _, r := range s {
		if r < 0x80 || seen[r] {
			continue
		}
		seen[r] = true
		switch a := asciiLookalike(r); {
		case a != 0:
			parts = append(parts, fmt.Sprintf("%U, not %q", r, string(a)))
		case invisible(r):
			parts = append(parts, fmt.Sprintf("%U, an invisible character", r))
		default:
			parts = append(parts, fmt.Sprintf("%U", r))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strconv.Quote(s) + " contains " + strings.Join(parts, ", and ")
}

// withNote appends the non-ASCII note of s to msg, in parentheses.
func withNote(msg, s string) string {
	if n := nonASCIINote(s); n != "" {
		return msg + " (" + n + ")"
	}
	return msg
}
