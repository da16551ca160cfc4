package vars

import (
	"bytes"
	"sort"
	"unicode/utf8"
)

// Positions follow go.yaml.in/yaml/v3: lines and columns are 1-based, a
// column counts characters (runes, not bytes), a leading byte order mark is
// not counted, and a line ends at LF, CR, CRLF, NEL (U+0085), LS (U+2028) or
// PS (U+2029).

var (
	bom = []byte("\uFEFF")
	nel = []byte("\u0085")
	ls  = []byte("\u2028")
	ps  = []byte("\u2029")
)

// SourcePos maps a 1-based line and column of r.Text, as reported by
// go.yaml.in/yaml/v3's yaml.Node.Line and Column (a column counts runes), to
// the line and column of the source as written. A position inside a
// substituted value maps to the "${" of its reference; positions after a
// value spanning several lines map to where the text is in the source.
// Out-of-range input is clamped to the text; the result is always a valid
// position of the source (at most one past the end of a line).
func (r *Result) SourcePos(line, col int) (int, int) {
	r.idxOnce.Do(r.buildIndexes)
	off := offsetOf(r.Text, r.outLines, line, col)
	return r.srcLineCol(r.sourceOffset(off))
}

func (r *Result) buildIndex() { r.idxOnce.Do(r.buildIndexes) }

func (r *Result) buildIndexes() {
	r.srcLines = lineStarts(r.src)
	if len(r.spans) == 0 && len(r.Text) == len(r.src) {
		r.outLines = r.srcLines // identity: Text is src, or a copy of it
	} else {
		r.outLines = lineStarts(r.Text)
	}
}

// sourceOffset maps a byte offset of Text to a byte offset of src.
func (r *Result) sourceOffset(off int) int {
	sp := r.spans
	// The first span that ends after off, or is empty and at off.
	i := sort.Search(len(sp), func(i int) bool {
		return sp[i].outEnd > off || sp[i].outEnd == off && sp[i].out == off
	})
	if i < len(sp) && sp[i].out <= off {
		return sp[i].src // inside a replacement: its "${"
	}
	if i == 0 {
		return min(off, len(r.src))
	}
	p := sp[i-1]
	return min(p.srcEnd+(off-p.outEnd), len(r.src))
}

// srcLineCol returns the 1-based line and rune column of byte offset off of
// the source.
func (r *Result) srcLineCol(off int) (int, int) {
	lines := r.srcLines
	l := sort.Search(len(lines), func(i int) bool { return lines[i] > off }) - 1
	l = max(l, 0)
	start := lines[l]
	if l == 0 && bytes.HasPrefix(r.src, bom) {
		start = min(len(bom), off) // the byte order mark is not a column
	}
	return l + 1, utf8.RuneCount(r.src[start:off]) + 1
}

// offsetOf returns the byte offset of the 1-based line and rune column of
// b, whose line starts are lines. Out-of-range values are clamped: a column
// past the end of its line gives the line's end.
func offsetOf(b []byte, lines []int, line, col int) int {
	line = min(max(line, 1), len(lines))
	i := lines[line-1]
	if line == 1 && bytes.HasPrefix(b, bom) {
		i = len(bom)
	}
	for c := 1; c < col && i < len(b) && breakLen(b, i) == 0; c++ {
		if b[i] < utf8.RuneSelf {
			i++
		} else {
			_, w := utf8.DecodeRune(b[i:])
			i += w
		}
	}
	return i
}

// breakLen returns the length of the line break at b[i:], or 0.
func breakLen(b []byte, i int) int {
	switch c := b[i]; {
	case c == '\n':
		return 1
	case c == '\r':
		if i+1 < len(b) && b[i+1] == '\n' {
			return 2
		}
		return 1
	case c == 0xC2:
		if i+1 < len(b) && b[i+1] == 0x85 {
			return 2
		}
	case c == 0xE2:
		if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
			return 3
		}
	}
	return 0
}

// lineStarts returns the byte offset of the start of every line of b.
func lineStarts(b []byte) []int {
	starts := make([]int, 1, bytes.Count(b, []byte{'\n'})+2)
	if bytes.IndexByte(b, '\r') < 0 && !bytes.Contains(b, nel) && !bytes.Contains(b, ls) && !bytes.Contains(b, ps) {
		// Fast path: LF only.
		for i := 0; ; {
			k := bytes.IndexByte(b[i:], '\n')
			if k < 0 {
				return starts
			}
			i += k + 1
			starts = append(starts, i)
		}
	}
	for i := 0; i < len(b); {
		if w := breakLen(b, i); w > 0 {
			i += w
			starts = append(starts, i)
		} else {
			i++
		}
	}
	return starts
}
