package render

import (
	"strings"
	"unicode"

	"github.com/mattn/go-runewidth"
)

// DisplayWidth is how many terminal cells s takes: a CJK character or an
// emoji takes two, a combining mark none (go-runewidth's tables, in the
// locale's East Asian width). A character followed by the emoji variation
// selector (U+FE0F) counts two, as terminals draw it; a zero-width-joiner
// sequence counts each of its emoji, which can only overestimate.
func DisplayWidth(s string) int {
	w, prev := 0, 0
	for _, r := range s {
		rw := runeWidth(r, prev)
		w += rw
		prev = rw
	}
	return w
}

// runeWidth is r's width after a character of width prev.
func runeWidth(r rune, prev int) int {
	if r == 0xFE0F && prev == 1 {
		return 1 // the character before it is drawn two cells wide
	}
	return runewidth.RuneWidth(r)
}

// CutWidth cuts s to at most width cells, ending in "…" when cut; it never
// splits a character, and a wide one that would straddle the limit is
// left out.
func CutWidth(s string, width int) string {
	if DisplayWidth(s) <= width {
		return s
	}
	if width <= 0 {
		return ""
	}
	limit := width - 1 // room for the ellipsis
	var b strings.Builder
	w, prev := 0, 0
	for _, r := range s {
		rw := runeWidth(r, prev)
		if w+rw > limit {
			break
		}
		b.WriteRune(r)
		w += rw
		prev = rw
	}
	b.WriteString("…")
	return b.String()
}

// Printable makes s safe to draw on one terminal line: tabs become spaces,
// other control characters (escape sequences' ESC among them, carriage
// returns, line breaks) are dropped.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
