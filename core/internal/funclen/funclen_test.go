// Package funclen holds the test that keeps the functions of the engine's
// working rooms short: no function of core/run, core/steps, core/cli,
// core/objects, core/lock, core/diagnose or core/waiter over MaxLines
// lines, counted from its func keyword to its closing brace. It is test
// files alone: no entrypoint links it (dev's TestLayout).
package funclen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// MaxLines is the most lines a function of those packages may span.
const MaxLines = 80

// roots are the trees the rule holds in, relative to core/.
var roots = []string{"run", "steps", "cli", "objects", "lock", "diagnose", "waiter"}

// allowed are the functions over MaxLines at 8ffcfe8 that belong to work
// under way elsewhere (issue 39: steps/helm to one change, steps/apply's
// preview to the kinds' change), with their length then. An entry may
// only shrink: the test fails when the function grows, and when it is
// MaxLines or shorter (or gone), so that its entry is removed. The list
// is to be emptied, not extended.
var allowed = map[string]int{}

// long is a function over MaxLines.
type long struct {
	key   string // "path: Name" (Recv.Name for a method)
	pos   token.Position
	lines int
}

// longFuncs lists the functions of one file's source longer than max lines
// (from func to the closing brace, both counted); name is the file's path
// in messages and keys.
func longFuncs(fset *token.FileSet, name string, src any, max int) ([]long, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []long
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Type.Func), fset.Position(fd.Body.Rbrace)
		if n := end.Line - start.Line + 1; n > max {
			out = append(out, long{key: name + ": " + funcName(fd), pos: start, lines: n})
		}
	}
	return out, nil
}

// funcName is a function's name, Recv.Name for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr: // a generic receiver
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// TestFunctionLength: no non-test function of the roots is over
// MaxLines lines, but those allowed (which may only shrink).
func TestFunctionLength(t *testing.T) {
	core, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := map[string]long{}
	for _, root := range roots {
		err := filepath.WalkDir(filepath.Join(core, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, err := filepath.Rel(core, path)
			if err != nil {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			ls, err := longFuncs(fset, filepath.ToSlash(rel), src, MaxLines)
			for _, l := range ls {
				found[l.key] = l
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		l := found[k]
		switch was, ok := allowed[k]; {
		case !ok:
			t.Errorf("core/%s:%d: %s is %d lines long: at most %d (split it by what its parts do)", l.pos.Filename, l.pos.Line, funcName0(k), l.lines, MaxLines)
		case l.lines > was:
			t.Errorf("core/%s:%d: %s is %d lines long, %d when it was allowed: an allowed function may only shrink (at most %d)", l.pos.Filename, l.pos.Line, funcName0(k), l.lines, was, MaxLines)
		}
	}
	for k := range allowed {
		if _, ok := found[k]; !ok {
			t.Errorf("core/%s is gone or at most %d lines long now: remove it from the allowed list", k, MaxLines)
		}
	}
}

// funcName0 is the function's name in a key.
func funcName0(key string) string {
	_, name, _ := strings.Cut(key, ": ")
	return name
}

// TestLongFuncs: the count runs from func to the closing brace, both
// counted, for functions and methods; MaxLines lines pass, one more does
// not.
func TestLongFuncs(t *testing.T) {
	body := func(name string, lines int) string {
		// the func line, lines-2 statements, the closing brace
		return name + " {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := "package p\n\ntype T[E any] struct{}\n\n" +
		body("func ok()", MaxLines) +
		body("func over()", MaxLines+1) +
		body("func (t *T[E]) method()", MaxLines+5) +
		body("func (T[E]) fine()", 3) +
		"func decl()\n"
	got, err := longFuncs(token.NewFileSet(), "x/p.go", src, MaxLines)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, l := range got {
		s = append(s, fmt.Sprintf("%s:%d %s %d", l.pos.Filename, l.pos.Line, l.key, l.lines))
	}
	want := []string{
		fmt.Sprintf("x/p.go:%d x/p.go: over %d", 5+MaxLines, MaxLines+1),
		fmt.Sprintf("x/p.go:%d x/p.go: T.method %d", 5+2*MaxLines+1, MaxLines+5),
	}
	if strings.Join(s, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(s, "\n"), strings.Join(want, "\n"))
	}
}
