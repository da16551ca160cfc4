package diff

import (
	"fmt"
	"io"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// Context is how many unchanged lines surround a change, as diff -u.
const Context = 3

// ANSI colours of a coloured diff.
const (
	colorBold  = "\x1b[1m"
	colorRed   = "\x1b[31m"
	colorGreen = "\x1b[32m"
	colorCyan  = "\x1b[36m"
	colorReset = "\x1b[0m"
)

// Unified writes the unified diff of a and b (Context lines of context),
// headed "--- from" and "+++ to"; nothing when a and b are equal. An empty
// text is an absent file, as diff -N treats it. With color, headers are
// bold, hunk ranges cyan, removed lines red and added lines green.
//
// Lines are matched with difflib's SequenceMatcher (Python's difflib),
// without its "popular line" heuristic, which on long YAML documents
// treats frequent lines such as "  - name: x" as junk and makes hunks
// larger than they need to be.
func Unified(w io.Writer, from, to, a, b string, color bool) error {
	if a == b {
		return nil
	}
	al, bl := splitLines(a), splitLines(b)
	m := difflib.NewMatcherWithJunk(al, bl, false, nil)
	var sb strings.Builder
	line := func(c, prefix, text string) {
		if color && c != "" {
			sb.WriteString(c + prefix + strings.TrimSuffix(text, "\n") + colorReset + "\n")
			return
		}
		sb.WriteString(prefix + text)
	}
	line(colorBold, "--- ", from+"\n")
	line(colorBold, "+++ ", to+"\n")
	for _, g := range m.GetGroupedOpCodes(Context) {
		first, last := g[0], g[len(g)-1]
		line(colorCyan, "", fmt.Sprintf("@@ -%s +%s @@\n", unifiedRange(first.I1, last.I2), unifiedRange(first.J1, last.J2)))
		for _, c := range g {
			if c.Tag == 'e' {
				for _, l := range al[c.I1:c.I2] {
					line("", " ", l)
				}
				continue
			}
			if c.Tag == 'r' || c.Tag == 'd' {
				for _, l := range al[c.I1:c.I2] {
					line(colorRed, "-", l)
				}
			}
			if c.Tag == 'r' || c.Tag == 'i' {
				for _, l := range bl[c.J1:c.J2] {
					line(colorGreen, "+", l)
				}
			}
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// splitLines splits s into lines that each end in a newline (one is added
// to a last line without); none for "".
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}

// unifiedRange is a hunk range as diff -u writes it: "start,length", just
// "start" for one line, and for no lines the line before the range.
func unifiedRange(start, stop int) string {
	begin, length := start+1, stop-start
	switch length {
	case 1:
		return fmt.Sprintf("%d", begin)
	case 0:
		begin--
	}
	return fmt.Sprintf("%d,%d", begin, length)
}

// Paint colours a line of diff's own text (a step's heading) bold, when
// color is set.
func Paint(s string, color bool) string {
	if !color {
		return s
	}
	return colorBold + s + colorReset
}
