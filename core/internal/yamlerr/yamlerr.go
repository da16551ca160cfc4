// Package yamlerr locates YAML syntax errors. khook reads its spec and var
// files with go.yaml.in/yaml/v3, whose errors carry a line only, counted
// from 0 for parser errors and from 1 for scanner errors, taken from the
// start of the enclosing construct when there is one, and no line at all on
// the first line or for reader and alias errors. Its successor,
// go.yaml.in/yaml/v4, runs the same libyaml parser and returns the marks
// themselves (1-based line and column, the column counting characters), so
// a text v3 refused is parsed again with v4 to say exactly where.
package yamlerr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml4 "go.yaml.in/yaml/v4"
)

// Error is a located YAML syntax error. Line and Col are 1-based (the
// column counts characters, a leading byte order mark is not one); Line is
// 0 when the position is unknown.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg)
}

// Mapper maps a position of the parsed text to the file as written; nil
// means identity.
type Mapper func(line, col int) (int, int)

// Locate explains err, the error go.yaml.in/yaml/v3 returned for text
// (Unmarshal, or a Decoder reading text from its start), as a positioned
// Error. Positions, those in the message included, go through mapPos. It
// returns nil for an error that is not about the text (io.EOF).
func Locate(text []byte, err error, mapPos Mapper) *Error {
	e, _ := locate(text, err, mapPos)
	return e
}

// locate is Locate, and how it located the error: by v4's marks (or a
// character check), or, falling back (v4 reads the text differently, or
// words its problem differently from v3), at v3's line.
func locate(text []byte, err error, mapPos Mapper) (e *Error, byMarks bool) {
	if err == nil || errors.Is(err, io.EOF) {
		return nil, false
	}
	if mapPos == nil {
		mapPos = func(l, c int) (int, int) { return l, c }
	}
	if e := BadChar(text); e != nil {
		e.Line, e.Col = mapPos(e.Line, e.Col)
		return e, true
	}
	v3msg, v3line := splitV3(err)
	if le := parseV4(text); le != nil && sameProblem(le, v3msg) {
		return explain(text, le, mapPos), true
	}
	// v4 reads it differently (they differ on a few rules): v3's own line,
	// which is 0-based for parser errors, at its first character.
	e = &Error{Line: v3line, Msg: v3msg}
	if v3line > 0 && parserProblems[v3msg] {
		e.Line++
	}
	if e.Line == 0 {
		e.Line = 1
	}
	e.Col = firstColumn(text, e.Line)
	switch v3msg {
	case "could not find expected ':'":
		e.Msg += " after the key that starts here"
	case "found a tab character that violates indentation":
		e.Line, e.Col = indentTab(text, e.Line)
		e.Msg += ": YAML indents with spaces"
	}
	e.Line, e.Col = mapPos(e.Line, e.Col)
	return e, false
}

// indentTab returns the position of the first tab in the indentation of
// a line from line on (line and its first column when there is none).
func indentTab(text []byte, line int) (int, int) {
	lines := bytes.Split(bytes.TrimPrefix(text, []byte("\uFEFF")), []byte("\n"))
	for l := line; l <= len(lines); l++ {
		for i, c := range lines[l-1] {
			if c == '\t' {
				return l, i + 1
			}
			if c != ' ' {
				break
			}
		}
	}
	return line, firstColumn(text, line)
}

// firstColumn returns the column of the first character of line that is
// not a space or a tab (1 for a blank line).
func firstColumn(text []byte, line int) int {
	text = bytes.TrimPrefix(text, []byte("\uFEFF"))
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(text, '\n')
		if i < 0 {
			return 1
		}
		text = text[i+1:]
	}
	col := 1
	for _, c := range text {
		if c != ' ' && c != '\t' {
			break
		}
		col++
	}
	return col
}

// splitV3 parses "yaml: line N: msg" or "yaml: msg".
func splitV3(err error) (string, int) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if n, cerr := strconv.Atoi(rest[:i]); cerr == nil {
				return rest[i+2:], n
			}
		}
	}
	return msg, 0
}

// parserProblems are the problems libyaml's parser (not its scanner)
// reports: for these, v3's line counts from 0.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found incompatible YAML document":       true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"did not find expected node content":     true,
	"found undefined tag handle":             true,
	"did not find expected key":              true,
	"did not find expected '-' indicator":    true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
}

// parseV4 parses every document of text with v4 and returns its first
// load error.
func parseV4(text []byte) *yaml4.LoadError {
	l, err := yaml4.NewLoader(bytes.NewReader(text), yaml4.WithV3Defaults())
	if err != nil {
		return nil
	}
	for {
		var n yaml4.Node
		err := l.Load(&n)
		if err == nil {
			continue
		}
		var le *yaml4.LoadError
		if errors.As(err, &le) {
			return le
		}
		return nil
	}
}

// sameProblem reports whether v4 found the problem v3 reported.
func sameProblem(le *yaml4.LoadError, v3msg string) bool {
	v3msg = strings.ReplaceAll(v3msg, "hexdecimal", "hexadecimal") // a typo v4 fixed
	return le.Message == v3msg || strings.HasPrefix(le.Message, v3msg+" ")
}

// explain words a v4 load error. The position is the problem's, except for
// constructs that were never closed (a flow collection, a quoted string, a
// key without ':'): there it is where the construct starts, which is what
// needs fixing, and the message says where the parser stopped.
func explain(text []byte, le *yaml4.LoadError, mapPos Mapper) *Error {
	pl, pc := mapPos(le.Mark.Line, le.Mark.Column)
	if le.Mark.Line == 0 {
		pl, pc = 1, 1
	}
	cl, cc := 0, 0
	if le.ContextMark.Line > 0 {
		cl, cc = mapPos(le.ContextMark.Line, le.ContextMark.Column)
	}
	at := func(l, c int) string { return fmt.Sprintf("line %d, column %d", l, c) }
	problem := le.Message
	switch {
	case problem == "mapping values are not allowed in this context":
		problem += ": a value with \": \" in it needs quotes, or this line is indented too far"
	case problem == "found character that cannot start any token" && charAt(text, le.Mark) == '\t':
		problem = "found a tab character that cannot start any token: YAML indents with spaces"
	case strings.Contains(problem, "tab character"):
		problem += ": YAML indents with spaces"
	case problem == "found incompatible YAML document":
		problem += ": the %YAML directive names a version other than 1.1 or 1.2"
	}
	if cl == 0 || (cl == pl && cc == pc) {
		return &Error{Line: pl, Col: pc, Msg: problem}
	}
	endOfFile := strings.Contains(problem, "end of stream")
	switch {
	case le.ContextMsg == "while parsing a flow mapping" && le.Mark.Line != le.ContextMark.Line,
		le.ContextMsg == "while parsing a flow sequence" && le.Mark.Line != le.ContextMark.Line:
		open := "{"
		if strings.HasSuffix(le.ContextMsg, "sequence") {
			open = "["
		}
		return &Error{Line: cl, Col: cc, Msg: fmt.Sprintf("'%s' is not closed: %s at %s", open, problem, at(pl, pc))}
	case strings.HasPrefix(le.ContextMsg, "while scanning a quoted scalar") && (endOfFile || strings.Contains(problem, "document indicator")):
		found := "the end of the file"
		if !endOfFile {
			found = "a document marker at " + at(pl, pc)
		}
		return &Error{Line: cl, Col: cc, Msg: "the quoted string that starts here is not closed: found " + found}
	case le.ContextMsg == "while scanning a simple key":
		return &Error{Line: cl, Col: cc, Msg: fmt.Sprintf("%s after the key that starts here (stopped at %s)", problem, at(pl, pc))}
	case problem == "did not find expected key" && le.ContextMsg == "while parsing a block mapping" && firstColumn(text, le.Mark.Line) == le.Mark.Column:
		return &Error{Line: pl, Col: pc, Msg: fmt.Sprintf("%s: this line is indented differently from the keys of the mapping that starts at %s", problem, at(cl, cc))}
	}
	ctx := strings.TrimPrefix(strings.TrimPrefix(le.ContextMsg, "while parsing "), "while scanning ")
	msg := fmt.Sprintf("%s (in %s that starts at %s)", problem, ctx, at(cl, cc))
	if q := charBefore(text, le.Mark); problem == "did not find expected key" && (q == '\'' || q == '"') {
		msg += fmt.Sprintf(": text after a closing %c; inside '...' write '' for a ', inside \"...\" write \\\" for a \"", q)
	}
	return &Error{Line: pl, Col: pc, Msg: msg}
}

// charAt returns the character at m, or -1.
func charAt(text []byte, m yaml4.Mark) rune {
	line, col := 1, 1
	text = bytes.TrimPrefix(text, []byte("\uFEFF"))
	for i := 0; i < len(text); {
		r, w := utf8.DecodeRune(text[i:])
		if line == m.Line && col == m.Column {
			return r
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += w
	}
	return -1
}

// charBefore returns the last character before m on its line that is not
// a space or a tab, or -1.
func charBefore(text []byte, m yaml4.Mark) rune {
	text = bytes.TrimPrefix(text, []byte("\uFEFF"))
	for l := 1; l < m.Line; l++ {
		i := bytes.IndexByte(text, '\n')
		if i < 0 {
			return -1
		}
		text = text[i+1:]
	}
	line := []rune(string(text[:max(bytes.IndexByte(text, '\n'), 0)]))
	for i := min(m.Column-1, len(line)) - 1; i >= 0; i-- {
		if line[i] != ' ' && line[i] != '\t' {
			return line[i]
		}
	}
	return -1
}

// BadChar returns the first character YAML does not allow in text (an
// invalid UTF-8 sequence, or a control character libyaml's reader
// refuses), located, or nil. A text starting with a UTF-16 byte order mark
// is left to the parser.
func BadChar(text []byte) *Error {
	if bytes.HasPrefix(text, []byte{0xFE, 0xFF}) || bytes.HasPrefix(text, []byte{0xFF, 0xFE}) {
		return nil
	}
	line, lineStart := 1, 0
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n':
				line, lineStart = line+1, i+1
			case c == '\r':
				if i+1 >= len(text) || text[i+1] != '\n' {
					line, lineStart = line+1, i+1
				}
			case c == '\t' || (c >= 0x20 && c <= 0x7E):
			default:
				return badAt(text, line, lineStart, i, fmt.Sprintf("control character %U is not allowed in YAML", rune(c)))
			}
			i++
			continue
		}
		r, w := utf8.DecodeRune(text[i:])
		if r == utf8.RuneError && w <= 1 {
			return badAt(text, line, lineStart, i, fmt.Sprintf("invalid UTF-8 (byte 0x%02X): YAML files are UTF-8 text", c))
		}
		switch {
		case r == 0x85 || r == 0x2028 || r == 0x2029:
			line, lineStart = line+1, i+w
		case r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000:
		default:
			return badAt(text, line, lineStart, i, fmt.Sprintf("control character %U is not allowed in YAML", r))
		}
		i += w
	}
	return nil
}

func badAt(text []byte, line, lineStart, off int, msg string) *Error {
	start := lineStart
	if line == 1 && bytes.HasPrefix(text, []byte("\uFEFF")) {
		start = min(3, off)
	}
	return &Error{Line: line, Col: utf8.RuneCount(text[start:off]) + 1, Msg: msg}
}
