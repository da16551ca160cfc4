package spec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Pos is a position in the spec file as written (1-based; the column counts
// characters).
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	file := p.File
	if file == "" || file == "-" {
		file = "<stdin>"
	}
	if p.Line == 0 {
		return file
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Col)
}

// FieldError is one problem of a spec, located by position and field path.
type FieldError struct {
	Pos  Pos
	Path string // e.g. steps[3].helm.chart; "" for document-level problems
	Msg  string
	// Step is the name of the step Path is in, when it has one: with forty
	// steps nobody counts to the index.
	Step string
	// Syntax marks a problem that kept the document from being read.
	Syntax bool
}

func (e *FieldError) Error() string {
	path := e.DisplayPath()
	if path == "" {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Pos.String() + ": " + path + ": " + e.Msg
}

// DisplayPath is Path with the step's name after its index:
// steps[3] (cilium).helm.repo.
func (e *FieldError) DisplayPath() string {
	if e.Step == "" || !strings.HasPrefix(e.Path, "steps[") {
		return e.Path
	}
	i := strings.IndexByte(e.Path, ']')
	if i < 0 {
		return e.Path
	}
	name := e.Step
	if q := strconv.Quote(name); q[1:len(q)-1] != name || strings.ContainsAny(name, " ()") {
		name = q
	}
	return e.Path[:i+1] + " (" + name + ")" + e.Path[i+1:]
}

// StepIndex returns the index of the step a field path is in, or -1.
func StepIndex(path string) int {
	rest, ok := strings.CutPrefix(path, "steps[")
	if !ok {
		return -1
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// ErrorList is every problem found in a spec. It is an error when non-empty;
// errors.Is/As see each FieldError.
type ErrorList []*FieldError

// Error prints one problem per line, in file order.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap exposes the individual problems.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Sort orders the problems by position, then path, then message, and drops
// exact duplicates.
func (l ErrorList) Sort() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.Pos.File != b.Pos.File {
			return a.Pos.File < b.Pos.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Msg < b.Msg
	})
	out := l[:0]
	for i, e := range l {
		if i > 0 && *e == *l[i-1] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Err returns the list as an error, or nil when it is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
