package step_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestNoActionWordsOutsideKinds: no package outside the step kinds
// (core/steps/...) and their contract (core/step) decides anything on an
// action's word or a skip's message (docs/spec.md 285, 288): what a
// prediction or a destroy item does is read from its typed step.Action or
// step.DestroyAction, why a step was skipped from its event.SkipCause.
// The test reads every non-test Go file of the workspace's modules and
// fails on
//   - a comparison (==, !=) or a switch case of an action word with
//     something named action (x.Action, action), or of a constant of
//     package plan's Action... with anything;
//   - a composite literal (a map, a table) keyed or listing two action
//     words, or one of package plan's Action... constants;
//   - a comparison of a skip's text (x.Skip, x.SkipReason,
//     x.NotTriggered, the skip reasons of package run) with anything but
//     "".
//
// The action words are those the kinds and the contract declare (the Word
// of every step.Action and step.DestroyAction literal under core/step and
// core/steps, resolved through the constants it names), and package
// plan's Action... constants.
func TestNoActionWordsOutsideKinds(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	consts := constants(t, root)
	words := map[string]bool{}
	for k, v := range consts {
		if strings.HasPrefix(k, "core/plan.Action") {
			words[v] = true
		}
	}
	declared := 0
	for _, f := range goFiles(t, root, func(rel string) bool { return inKinds(rel) }) {
		ast.Inspect(f.file, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || !isActionType(cl.Type) {
				return true
			}
			for _, el := range cl.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if id, _ := kv.Key.(*ast.Ident); ok && id != nil && id.Name == "Word" {
					w, ok := f.eval(kv.Value, consts)
					if !ok {
						continue // a word the kind passes on (another engine's, not constant)
					}
					words[w] = true
					declared++
				}
			}
			return true
		})
	}
	for _, w := range []string{"create", "restart", "install", "repair", "uninstall", "refuse"} {
		if !words[w] {
			t.Fatalf("the action words read %v lack %q: the test reads them wrong", slices.Sorted(maps.Keys(words)), w)
		}
	}
	t.Logf("%d declared actions, words %v", declared, slices.Sorted(maps.Keys(words)))

	var problems []string
	for _, f := range goFiles(t, root, func(rel string) bool { return !inKinds(rel) }) {
		problems = append(problems, f.check(words)...)
	}
	if len(problems) > 0 {
		t.Errorf("decisions on action words or skip messages outside the kinds:\n%s", strings.Join(problems, "\n"))
	}
}

// TestNoActionWordsOutsideKindsFails: the check finds what it is for.
func TestNoActionWordsOutsideKindsFails(t *testing.T) {
	src := `package x
import (
	"khook.io/core/event"
	"khook.io/core/plan"
)
var changes = map[string]bool{"create": true, "restart": true}
var one = map[string]bool{plan.ActionRestart: true}
var counted = []struct{ action, label string }{{"delete", "to delete"}, {"uninstall", "to uninstall"}}
var kinds = []string{"helm", "apply", "delete", "patch", "wait"}
func f(p P, a string, e E, t T) {
	if p.Action == "create" || p.Action != plan.ActionUnknown || a == plan.ActionSkip {}
	switch p.Action {
	case "delete", "uninstall":
	}
	if e.Message == t.Skip || t.SkipReason == interruptedReason || t.Skip != "" || e.Skip == event.SkipResumed {}
	if typ == "delete" || p.Action == "" {}
}
`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &goFile{rel: "x.go", fset: fset, file: file, text: []byte(src), imports: imports(file)}
	words := map[string]bool{"create": true, "restart": true, "delete": true, "uninstall": true, "unknown": true, "skip": true}
	got := f.check(words)
	want := []string{
		`x.go:6:15: a table of action words: map[string]bool{"create": true, "restart": true}`,
		`x.go:7:11: a table of action words: map[string]bool{plan.ActionRestart: true}`,
		`x.go:8:15: a table of action words: []struct{ action, label string }{{"delete", "to delete"}, {"uninstall", "to uninstall"}}`,
		`x.go:11:5: a decision on an action word: p.Action == "create"`,
		`x.go:11:29: a decision on an action word: p.Action != plan.ActionUnknown`,
		`x.go:11:63: a decision on an action word: a == plan.ActionSkip`,
		`x.go:13:2: a decision on an action word: case "delete", "uninstall"`,
		`x.go:15:5: a decision on a skip's message: e.Message == t.Skip`,
		`x.go:15:28: a decision on a skip's message: t.SkipReason == interruptedReason`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// allowed are the places outside the kinds that read a word, each with
// why it cannot read a type.
var allowed = map[string]string{
	// the provider's rows read back from Terraform's state are strings
	// (its schema's): a refreshed row tells a when: skip from a resumed
	// one by what the provider itself wrote
	"terraform-provider-khook/internal/provider/model.go:recordRows": "rows read back from Terraform state",
}

// inKinds reports whether rel (a slash path from the repository's root)
// is the kinds' or their contract's.
func inKinds(rel string) bool {
	return strings.HasPrefix(rel, "core/steps/") || strings.HasPrefix(rel, "core/step/")
}

// isActionType reports whether t names step.Action or step.DestroyAction
// (or, inside package step, Action or DestroyAction).
func isActionType(t ast.Expr) bool {
	switch t := t.(type) {
	case *ast.Ident:
		return t.Name == "Action" || t.Name == "DestroyAction"
	case *ast.SelectorExpr:
		x, _ := t.X.(*ast.Ident)
		return x != nil && x.Name == "step" && (t.Sel.Name == "Action" || t.Sel.Name == "DestroyAction")
	}
	return false
}

type goFile struct {
	rel     string // slash path from the root
	dir     string // the package's slash path from the root
	fset    *token.FileSet
	file    *ast.File
	text    []byte
	imports map[string]string // name → slash path from the root of a khook.io/core import
}

func (f *goFile) pos(n ast.Node) string {
	p := f.fset.Position(n.Pos())
	return fmt.Sprintf("%s:%d:%d", f.rel, p.Line, p.Column)
}

func (f *goFile) src(n ast.Node) string {
	return string(f.text[f.fset.Position(n.Pos()).Offset:f.fset.Position(n.End()).Offset])
}

// eval is the string value of e: a literal, a constant of f's package or
// of a package it imports, a conversion of one.
func (f *goFile) eval(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		v, ok := consts[f.dir+"."+e.Name]
		return v, ok
	case *ast.SelectorExpr:
		x, _ := e.X.(*ast.Ident)
		if x == nil || f.imports[x.Name] == "" {
			return "", false
		}
		v, ok := consts[f.imports[x.Name]+"."+e.Sel.Name]
		return v, ok
	case *ast.CallExpr:
		if len(e.Args) == 1 {
			return f.eval(e.Args[0], consts)
		}
	}
	return "", false
}

// planAction reports whether e is one of package plan's Action...
// constants.
func (f *goFile) planAction(e ast.Expr) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, _ := s.X.(*ast.Ident)
	return x != nil && f.imports[x.Name] == "core/plan" && strings.HasPrefix(s.Sel.Name, "Action")
}

// word reports whether e is an action word: a literal of one, or a
// constant of package plan's.
func (f *goFile) word(e ast.Expr, words map[string]bool) bool {
	if f.planAction(e) {
		return true
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, _ := strconv.Unquote(lit.Value)
	return words[s]
}

// named reports whether e is named like an action (x.Action, action,
// ps.Action...).
func named(e ast.Expr, names ...string) bool {
	var name string
	switch e := e.(type) {
	case *ast.Ident:
		name = e.Name
	case *ast.SelectorExpr:
		name = e.Sel.Name
	case *ast.IndexExpr:
		return named(e.X, names...)
	}
	for _, n := range names {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// skipText reports whether e is a skip's text.
func skipText(e ast.Expr) bool {
	return named(e, "Skip", "SkipReason", "NotTriggered", "interruptedReason")
}

// typedCause reports whether e is one of package event's SkipCause
// constants (a skip's typed cause, which is what to compare).
func (f *goFile) typedCause(e ast.Expr) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, _ := s.X.(*ast.Ident)
	return x != nil && f.imports[x.Name] == "core/event" && strings.HasPrefix(s.Sel.Name, "Skip")
}

func empty(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && (lit.Value == `""` || lit.Value == "``")
}

// check lists f's decisions on action words and skip messages.
func (f *goFile) check(words map[string]bool) []string {
	var out []string
	report := func(n ast.Node, what string) {
		if fn := enclosing(f.file, n); allowed[f.rel+":"+fn] != "" {
			return
		}
		out = append(out, fmt.Sprintf("%s: %s: %s", f.pos(n), what, f.src(n)))
	}
	ast.Inspect(f.file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op != token.EQL && n.Op != token.NEQ {
				return true
			}
			switch {
			case f.planAction(n.X) || f.planAction(n.Y),
				f.word(n.Y, words) && named(n.X, "Action", "action", "act", "a"),
				f.word(n.X, words) && named(n.Y, "Action", "action", "act", "a"):
				report(n, "a decision on an action word")
			case f.typedCause(n.X) || f.typedCause(n.Y):
			case skipText(n.X) && !empty(n.Y), skipText(n.Y) && !empty(n.X):
				report(n, "a decision on a skip's message")
			}
		case *ast.SwitchStmt:
			for _, st := range n.Body.List {
				cc := st.(*ast.CaseClause)
				hit := false
				for _, e := range cc.List {
					hit = hit || f.planAction(e) || (n.Tag != nil && named(n.Tag, "Action", "action") && f.word(e, words))
				}
				if hit {
					out = append(out, fmt.Sprintf("%s: a decision on an action word: case %s", f.pos(cc), caseList(f, cc)))
				}
			}
		case *ast.CompositeLit:
			// a map keyed by words, or a table whose rows begin with
			// one (a plain list of strings is not a table: the words
			// name step kinds and verbs too)
			n2, plans := 0, false
			for _, el := range n.Elts {
				switch e := el.(type) {
				case *ast.KeyValueExpr:
					el = e.Key
				case *ast.CompositeLit:
					if len(e.Elts) > 0 {
						el = e.Elts[0]
					}
				default:
					el = nil
				}
				if el == nil {
					continue
				}
				if f.word(el, words) {
					n2++
				}
				plans = plans || f.planAction(el)
			}
			if n2 >= 2 || plans {
				report(n, "a table of action words")
			}
		}
		return true
	})
	return out
}

func caseList(f *goFile, cc *ast.CaseClause) string {
	parts := make([]string, len(cc.List))
	for i, e := range cc.List {
		parts[i] = f.src(e)
	}
	return strings.Join(parts, ", ")
}

// enclosing names the function of file that holds n ("" at top level).
func enclosing(file *ast.File, n ast.Node) string {
	for _, d := range file.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Pos() <= n.Pos() && n.End() <= fd.End() {
			return fd.Name.Name
		}
	}
	return ""
}

// imports maps the names of file's khook.io/core imports to their slash
// paths from the root.
func imports(file *ast.File) map[string]string {
	out := map[string]string{}
	for _, im := range file.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if !strings.HasPrefix(p, "khook.io/core/") {
			continue
		}
		rel := "core/" + strings.TrimPrefix(p, "khook.io/core/")
		name := filepath.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		out[name] = rel
	}
	return out
}

// goFiles parses the workspace's Go files whose slash path from root
// keep reports, test files (and the tests' own kinds) apart.
func goFiles(t *testing.T, root string, keep func(rel string) bool) []*goFile {
	t.Helper()
	var out []*goFile
	for _, mod := range []string{"core", "kubectl-khook", "helm-khook", "terraform-provider-khook"} {
		err := filepath.WalkDir(filepath.Join(root, mod), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || !keep(rel) {
				return nil
			}
			text, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, path, text, 0)
			if err != nil {
				return err
			}
			out = append(out, &goFile{rel: rel, dir: filepath.ToSlash(filepath.Dir(rel)), fset: fset, file: file, text: text, imports: imports(file)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// constants are the string constants of every core package, by "dir.Name"
// (dir a slash path from the root).
func constants(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range goFiles(t, root, func(rel string) bool { return strings.HasPrefix(rel, "core/") }) {
		for _, d := range f.file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							out[f.dir+"."+name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	return out
}
