package spec

import (
	"fmt"
	"sort"
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
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Pos.String() + ": " + e.Path + ": " + e.Msg
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
