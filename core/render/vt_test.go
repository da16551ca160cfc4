package render

import (
	"strconv"
	"strings"
	"testing"
)

// vt is a small terminal for the tests: a screen of width x height cells
// over a scrollback, interpreting what Progress writes: printable
// characters (wide ones take two cells), automatic wrapping at the right
// edge, \r, \n, and the CSI sequences cursor up (A, clamped to the
// screen's top row, as terminals do), erase in line (K), erase below (J)
// and colors (m, ignored). Anything else fails the test.
type vt struct {
	t             *testing.T
	width, height int
	rows          [][]rune // scrollback then screen; a wide rune's second cell is 0
	row, col      int      // the cursor, row indexing rows
	wrapped       int      // how many times a line wrapped
}

func newVT(t *testing.T, width, height int) *vt {
	return &vt{t: t, width: width, height: height, rows: [][]rune{nil}}
}

// top is the index of the screen's first row.
func (v *vt) top() int { return max(len(v.rows)-v.height, 0) }

func (v *vt) Write(p []byte) (int, error) {
	s := []rune(string(p))
	prev := 0
	for i := 0; i < len(s); i++ {
		r := s[i]
		switch {
		case r == '\r':
			v.col = 0
		case r == '\n':
			v.newline()
		case r == 0x1b:
			if i+1 >= len(s) || s[i+1] != '[' {
				v.t.Fatalf("vt: lone ESC in %q", p)
			}
			j := i + 2
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ';') {
				j++
			}
			if j >= len(s) {
				v.t.Fatalf("vt: unterminated CSI in %q", p)
			}
			n := 1
			if arg := string(s[i+2 : j]); arg != "" && !strings.Contains(arg, ";") {
				n, _ = strconv.Atoi(arg)
			}
			switch s[j] {
			case 'A':
				v.row = max(v.row-n, v.top())
			case 'K':
				v.clearLine()
			case 'J':
				v.clearLine()
				v.rows = v.rows[:v.row+1]
			case 'm':
			default:
				v.t.Fatalf("vt: unexpected CSI %q", string(s[i:j+1]))
			}
			i = j
		case r < 0x20 || r == 0x7f:
			v.t.Fatalf("vt: control character %U written", r)
		default:
			w := runeWidth(r, prev)
			prev = w
			if w == 0 {
				continue // combining: drawn on the previous cell
			}
			if v.col+w > v.width {
				v.wrapped++
				v.newline()
				v.col = 0
			}
			v.put(r)
			if w == 2 {
				v.put(0)
			}
		}
	}
	return len(p), nil
}

func (v *vt) newline() {
	v.row++
	v.col = 0
	if v.row == len(v.rows) {
		v.rows = append(v.rows, nil)
	}
}

func (v *vt) put(r rune) {
	line := v.rows[v.row]
	for len(line) <= v.col {
		line = append(line, ' ')
	}
	line[v.col] = r
	v.rows[v.row] = line
	v.col++
}

func (v *vt) clearLine() {
	if line := v.rows[v.row]; len(line) > v.col {
		v.rows[v.row] = line[:v.col]
	}
}

// lines is the whole buffer as text, trailing blanks trimmed, the last
// (cursor) line dropped when empty.
func (v *vt) lines() []string {
	var out []string
	for _, r := range v.rows {
		var b strings.Builder
		for _, c := range r {
			if c != 0 {
				b.WriteRune(c)
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	if len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

func (v *vt) String() string { return strings.Join(v.lines(), "\n") + "\n" }
