package vars

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"khook.io/core/redact"
)

// Problem is a substitution error at a position of the source text.
type Problem struct {
	Line, Col int // 1-based; Col counts runes, in the source as written
	Msg       string
	// Offset is the byte offset in the source of the "${" the problem is
	// about.
	Offset int
}

// Ref is a variable reference that was substituted (with or without a
// problem; "$${" escapes are not references).
type Ref struct {
	Name string
	// Secret reports that the value came from a secret variable.
	Secret bool
	// Offset is the byte offset of its "${" in the source.
	Offset int

	out, outEnd int // what it became: Text[out:outEnd]
}

// Output returns the text ref was replaced with (see Ref).
func (r *Result) Output(ref Ref) []byte { return r.Text[ref.out:ref.outEnd] }

// String returns "line:col: msg".
func (p Problem) String() string {
	return strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Col) + ": " + p.Msg
}

// Result is the outcome of Substitute.
type Result struct {
	// Text is the substituted text. It may share memory with the source
	// (when the source contains no "$"); do not modify it.
	Text []byte
	// Problems are all substitution problems, in source order. Text is
	// still complete when there are problems (a missing or failing reference
	// substitutes "", a malformed one is kept verbatim), so the caller can
	// parse it and report other problems as well.
	Problems []Problem
	// Refs are the references substituted, in source order.
	Refs []Ref

	src   []byte
	spans []span // replacements, in order

	idxOnce  sync.Once
	srcLines []int // line start offsets of src
	outLines []int // line start offsets of Text
}

// span records that Text[out:outEnd] replaced src[src:srcEnd].
type span struct {
	out, outEnd int
	src, srcEnd int
}

// problemAt is a problem located by source byte offset until positions are
// computed.
type problemAt struct {
	off int
	msg string
}

// Substitute replaces every variable reference in src (see the package
// comment for the grammar) with its value from set (which may be nil) or its
// default, and registers the substituted text of every secret variable with
// red (which may be nil). The Result keeps a reference to src; do not modify
// src afterwards.
func Substitute(src []byte, set *Set, red *redact.Redactor) *Result {
	res := &Result{src: src}
	first := bytes.IndexByte(src, '$')
	if first < 0 {
		res.Text = src
		return res
	}
	s := substituter{src: src, set: set, red: red}
	s.out = make([]byte, 0, len(src)+len(src)/16+64)
	s.spans = make([]span, 0, bytes.Count(src[first:], []byte("${")))
	s.run(first)
	res.Text = s.out
	res.spans = s.spans
	res.Refs = s.refs
	if len(s.problems) > 0 {
		res.buildIndex()
		res.Problems = make([]Problem, len(s.problems))
		for i, p := range s.problems {
			line, col := res.srcLineCol(p.off)
			res.Problems[i] = Problem{Line: line, Col: col, Msg: p.msg, Offset: p.off}
		}
	}
	return res
}

// Position returns the 1-based line and rune column of byte offset off of
// the source.
func (r *Result) Position(off int) (int, int) {
	r.buildIndex()
	return r.srcLineCol(min(max(off, 0), len(r.src)))
}

// Source returns the source text as written.
func (r *Result) Source() []byte { return r.src }

// Insert returns Text with at[off] inserted where source byte offset off
// lands: before the text substituted for a reference whose "${" is at off,
// or before the source byte at off when it was copied unchanged. Text is
// left as it is. The returned mapper is SourcePos for the new text: a
// position inside an inserted string maps to the source offset it was
// inserted at.
func (r *Result) Insert(at map[int]string) ([]byte, func(line, col int) (int, int)) {
	offs := make([]int, 0, len(at))
	for off := range at {
		offs = append(offs, off)
	}
	sort.Ints(offs)
	out := make([]byte, 0, len(r.Text)+16*len(at))
	type ins struct{ start, end, text int } // in out; offset in Text
	inserted := make([]ins, 0, len(offs))
	last := 0 // r.Text[last:] is not copied yet
	for _, off := range offs {
		o := r.outputOffset(off)
		out = append(out, r.Text[last:o]...)
		start := len(out)
		out = append(out, at[off]...)
		inserted = append(inserted, ins{start, len(out), o})
		last = o
	}
	out = append(out, r.Text[last:]...)
	var lines []int
	mapper := func(line, col int) (int, int) {
		r.idxOnce.Do(r.buildIndexes)
		if lines == nil {
			lines = lineStarts(out)
		}
		off := offsetOf(out, lines, line, col)
		// The first insertion that ends after off.
		i := sort.Search(len(inserted), func(i int) bool { return inserted[i].end > off })
		var textOff int
		switch {
		case i < len(inserted) && inserted[i].start <= off:
			textOff = inserted[i].text
		case i == 0:
			textOff = off
		default:
			p := inserted[i-1]
			textOff = p.text + (off - p.end)
		}
		return r.srcLineCol(r.sourceOffset(min(textOff, len(r.Text))))
	}
	return out, mapper
}

// outputOffset maps a byte offset of the source to one of Text: the start
// of the replacement of the span holding it, or the same byte copied.
func (r *Result) outputOffset(off int) int {
	sp := r.spans
	i := sort.Search(len(sp), func(i int) bool { return sp[i].srcEnd > off })
	if i < len(sp) && sp[i].src <= off {
		return sp[i].out
	}
	if i == 0 {
		return min(off, len(r.Text))
	}
	p := sp[i-1]
	return min(p.outEnd+(off-p.srcEnd), len(r.Text))
}

type substituter struct {
	src      []byte
	set      *Set
	red      *redact.Redactor
	out      []byte
	spans    []span
	problems []problemAt
	refs     []Ref
	scratch  bytes.Buffer
	memo     map[memoKey][]byte // pipeline outputs of this call
}

type memoKey struct {
	p  *pipeline
	in string
}

// run substitutes src; src[first] is its first '$'.
func (s *substituter) run(first int) {
	src := s.src
	n := len(src)
	last := 0 // src[last:] is not emitted yet
	for i := first; ; {
		next := i + 1
		switch {
		case i+2 < n && src[i+1] == '$' && src[i+2] == '{':
			// "$${" -> "${"
			s.out = append(s.out, src[last:i]...)
			start := len(s.out)
			s.out = append(s.out, '$', '{')
			s.spans = append(s.spans, span{start, len(s.out), i, i + 3})
			last, next = i+3, i+3
		case i+1 < n && src[i+1] == '{':
			r, ok := s.parseRef(i)
			if !ok {
				next = i + 2 // keep the text verbatim, look for references inside it
				break
			}
			s.out = append(s.out, src[last:i]...)
			start := len(s.out)
			s.emit(i, &r)
			s.refs[len(s.refs)-1].out, s.refs[len(s.refs)-1].outEnd = start, len(s.out)
			s.spans = append(s.spans, span{start, len(s.out), i, r.end})
			last, next = r.end, r.end
		}
		k := bytes.IndexByte(src[next:], '$')
		if k < 0 {
			break
		}
		i = next + k
	}
	s.out = append(s.out, src[last:]...)
}

// ref is a parsed reference: src[name], optional default, optional
// pipeline, ending before src[end].
type ref struct {
	nameStart, nameEnd int
	hasDefault         bool
	defStart, defEnd   int
	pipeStart, pipeEnd int // equal when there is no pipeline
	end                int // just past the closing '}'
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }
func isEOL(c byte) bool   { return c == '\n' || c == '\r' }

// parseRef parses the reference whose "${" is at src[i:]. On a syntax error
// it records a problem and returns false.
func (s *substituter) parseRef(i int) (ref, bool) {
	src := s.src
	n := len(src)
	var r ref
	j := i + 2
	for j < n && isBlank(src[j]) {
		j++
	}
	r.nameStart = j
	if j < n && nameByte(src[j], true) {
		j++
		for j < n && nameByte(src[j], false) {
			j++
		}
	}
	r.nameEnd = j
	for j < n && isBlank(src[j]) {
		j++
	}
	if r.nameStart == r.nameEnd {
		return r, s.malformed(i, j)
	}
	if j >= n || isEOL(src[j]) {
		return r, s.unterminated(i, j)
	}
	switch {
	case src[j] == '}':
		r.end = j + 1
		return r, true
	case src[j] == ':' && j+1 < n && src[j+1] == '-':
		r.hasDefault = true
		j += 2
		r.defStart = j
		for j < n && src[j] != '|' && src[j] != '}' && !isEOL(src[j]) {
			j++
		}
		if j >= n || isEOL(src[j]) {
			return r, s.unterminated(i, j)
		}
		r.defEnd = j
		if k := bytes.Index(src[r.defStart:r.defEnd], []byte("${")); k >= 0 {
			s.problem(i, fmt.Sprintf("default of ${%s} contains %q: nested references are not supported (write $${ for a literal ${)", src[r.nameStart:r.nameEnd], "${"))
			return r, false
		}
		if src[j] == '}' {
			r.end = j + 1
			return r, true
		}
		for r.defEnd > r.defStart && isBlank(src[r.defEnd-1]) {
			r.defEnd-- // whitespace before '|' is not part of the default
		}
	case src[j] == '|':
	default:
		return r, s.malformed(i, j)
	}
	// src[j] == '|': the pipeline runs to the first '}'.
	j++
	for j < n && isBlank(src[j]) {
		j++
	}
	r.pipeStart = j
	for j < n && src[j] != '}' && !isEOL(src[j]) {
		j++
	}
	if j >= n || isEOL(src[j]) {
		return r, s.unterminated(i, j)
	}
	r.end = j + 1
	for j > r.pipeStart && isBlank(src[j-1]) {
		j--
	}
	r.pipeEnd = j
	if r.pipeStart == r.pipeEnd {
		s.problem(i, fmt.Sprintf("empty pipeline in %q: write ${%s} or add sprig functions after '|'", src[i:r.end], src[r.nameStart:r.nameEnd]))
		return r, false
	}
	return r, true
}

const grammarHint = `want ${NAME}, ${NAME:-default}, ${NAME|pipeline} or ${NAME:-default|pipeline} with NAME matching ` + nameSyntax + `; write $${ for a literal ${`

// malformed records a malformed reference at i; the parser stopped at j.
func (s *substituter) malformed(i, j int) bool {
	s.problem(i, fmt.Sprintf("malformed variable reference %q: %s", excerpt(s.src, i, j), grammarHint))
	return false
}

func (s *substituter) unterminated(i, j int) bool {
	s.problem(i, fmt.Sprintf(`unterminated variable reference %q: missing "}" before the end of the line; write $${ for a literal ${`, excerpt(s.src, i, j)))
	return false
}

// excerpt returns the reference text starting at i for a message: up to and
// including the first '}' at or after stop on the same line, else to the end
// of the line, at most 60 bytes (cut at a rune boundary).
func excerpt(src []byte, i, stop int) string {
	end := i
	for end < len(src) && !isEOL(src[end]) {
		end++
		if src[end-1] == '}' && end > stop {
			break
		}
	}
	const maxLen = 60
	if end-i > maxLen {
		end = i + maxLen
		for end > i && !utf8.RuneStart(src[end]) {
			end--
		}
		return string(src[i:end]) + "..."
	}
	return string(src[i:end])
}

// braceFollows reports whether a "}" follows src[i:] on its line: a
// pipeline left with an unterminated string or an unclosed parenthesis was
// likely cut at a "}" it meant to hold.
func braceFollows(src []byte, i int) bool {
	for ; i < len(src) && !isEOL(src[i]); i++ {
		if src[i] == '}' {
			return true
		}
	}
	return false
}

func (s *substituter) problem(off int, msg string) {
	s.problems = append(s.problems, problemAt{off, msg})
}

// emit appends the substitution of r (whose "${" is at src[i:]) to s.out.
func (s *substituter) emit(i int, r *ref) {
	src := s.src
	name := src[r.nameStart:r.nameEnd]
	v, set := s.set.Lookup(string(name))
	s.refs = append(s.refs, Ref{Name: string(name), Secret: set && v.Secret, Offset: i})
	if !set && !r.hasDefault {
		s.problem(i, fmt.Sprintf("variable %s is not set (no --set, --var-file, %s%s or %s%s, and no :-default)",
			name, s.set.VarPrefix(), name, s.set.SecretPrefix(), name))
	}
	if r.pipeStart == r.pipeEnd {
		switch {
		case set:
			s.out = append(s.out, v.Value...)
			if v.Secret {
				s.red.Add(v.Value)
			}
		case r.hasDefault:
			s.out = append(s.out, src[r.defStart:r.defEnd]...)
		}
		return
	}
	p := getPipeline(src[r.pipeStart:r.pipeEnd])
	if p.problem != "" {
		msg := p.problem
		if (strings.Contains(msg, "unterminated") || strings.Contains(msg, "unclosed")) && braceFollows(src, r.end) {
			msg += `: a pipeline cannot contain "}" (the reference ends at the first one); for a literal "}" write printf "%c" 125`
		}
		s.problem(i, msg)
		return
	}
	if !set && !r.hasDefault {
		return
	}
	in := v.Value
	if !set {
		in = string(src[r.defStart:r.defEnd])
	}
	// The same reference often repeats (${NS|lower} in every step): run
	// each pipeline once per distinct input.
	key := memoKey{p, in}
	out, done := s.memo[key]
	if !done {
		s.scratch.Reset()
		if err := p.tmpl.Execute(&s.scratch, in); err != nil {
			msg := stripTemplatePrefix(err.Error(), tmplName)
			s.problem(i, s.red.String(fmt.Sprintf("pipeline %q failed for ${%s}: %s", p.text, name, msg)))
			return
		}
		out = bytes.Clone(s.scratch.Bytes())
		if s.memo == nil {
			s.memo = make(map[memoKey][]byte)
		}
		s.memo[key] = out
		if set && v.Secret {
			s.red.Add(string(out))
		}
	}
	s.out = append(s.out, out...)
}
