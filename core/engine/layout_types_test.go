package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestLayoutTypes reads the engine's packages as the compiler does (their
// types and the objects every call and name resolves to, through the
// export data go list builds) rather than their import lines: an aliased
// or dot-imported printer, a logger, a write to a writer handed in, a
// method value of os.Stdout all show. The engine says what it has to say
// as events and notes; it makes text only into a builder of its own.
func TestLayoutTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the engine against its dependencies' export data")
	}
	pkgs := typedEngine(t)
	if len(pkgs) < 2 {
		t.Fatalf("type-checked %d packages, want the engine and its fleet", len(pkgs))
	}
	for _, p := range pkgs {
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if why := printingCall(p.info, n); why != "" {
						t.Errorf("%s: %s: the engine's callers render what it says", p.fset.Position(n.Pos()), why)
					}
				case *ast.AssignStmt:
					for _, lhs := range n.Lhs {
						if why := writesSession(p.info, lhs); why != "" {
							t.Errorf("%s: %s", p.fset.Position(lhs.Pos()), why)
						}
					}
				case *ast.IncDecStmt:
					if why := writesSession(p.info, n.X); why != "" {
						t.Errorf("%s: %s", p.fset.Position(n.Pos()), why)
					}
				case *ast.Ident:
					if v, ok := p.info.Uses[n].(*types.Var); ok && v.Pkg() != nil && v.Pkg().Path() == "os" && (v.Name() == "Stdout" || v.Name() == "Stderr") {
						t.Errorf("%s: uses os.%s: the engine's callers render what it says", p.fset.Position(n.Pos()), v.Name())
					}
				}
				return true
			})
		}
	}
}

// TestSessionAndCommands: the Cluster is the session of one spec on one
// cluster (its connection, registry, redactor, options); the commands are
// values made from it, in helm's action style: Plan, Diff and Status each
// with a Run, and apply's or destroy's Run from Begin. A command added as
// a method of the session, or a session method that runs one besides
// Begin and Execute (Begin, Execute and Release in one) and the destroy
// preview, fails here.
func TestSessionAndCommands(t *testing.T) {
	var engine *typedPackage
	for _, p := range typedEngine(t) {
		if p.path == "khook.io/core/engine" {
			engine = p
		}
	}
	if engine == nil {
		t.Fatal("khook.io/core/engine was not type-checked")
	}
	scope := engine.pkg.Scope()
	methods := func(name string) []string {
		obj := scope.Lookup(name)
		if obj == nil {
			t.Fatalf("engine.%s is gone", name)
		}
		set := types.NewMethodSet(types.NewPointer(obj.Type()))
		var out []string
		for i := range set.Len() {
			if m := set.At(i).Obj(); m.Exported() {
				out = append(out, m.Name())
			}
		}
		return out
	}
	session := []string{"Begin", "Clients", "Doc", "Execute", "ID", "Name", "PreviewDestroy"}
	if got := methods("Cluster"); fmt.Sprint(got) != fmt.Sprint(session) {
		t.Errorf("the session's methods are %v, want %v: a command is a value made from the session (NewPlan(c).Run), not a method of it", got, session)
	}
	for _, command := range []string{"Plan", "Diff", "Status"} {
		if got := methods(command); !slices.Contains(got, "Run") {
			t.Errorf("engine.%s has methods %v: a command value runs with Run", command, got)
		}
		if scope.Lookup("New"+command) == nil {
			t.Errorf("engine.New%s is gone: a command value is made from the session", command)
		}
	}
	if got := methods("Run"); !slices.Contains(got, "Execute") || !slices.Contains(got, "Release") {
		t.Errorf("engine.Run has methods %v: apply's and destroy's run executes and releases its lock", got)
	}
}

var (
	typedOnce sync.Once
	typed     []*typedPackage
	typedErr  string
)

// typedEngine type-checks the engine's packages once for the tests that
// read them.
func typedEngine(t *testing.T) []*typedPackage {
	t.Helper()
	typedOnce.Do(func() {
		// in a goroutine of its own: a fatal ends it, not the test
		ft := &fatalRecorder{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			typed = typeCheck(ft, "./...")
		}()
		<-done
		typedErr = ft.msg
	})
	if typedErr != "" {
		t.Fatal(typedErr)
	}
	return typed
}

// writesSession says why assigning to x writes what a connected Cluster
// keeps for every command it serves (its connection, registry, redactor,
// options), or "": a Cluster is made whole by Connect or Attach and never
// written after; what one command needs (its sink, its run's identity)
// lives in that command's value (Run, call).
func writesSession(info *types.Info, x ast.Expr) string {
	sel, ok := ast.Unparen(x).(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	t := info.TypeOf(sel.X)
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if named, ok := t.(*types.Named); ok && named.Obj().Name() == "Cluster" && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == "khook.io/core/engine" {
		return "writes Cluster." + sel.Sel.Name + ": a Cluster is not written after Connect; per-command state belongs to the command's value (Run, call)"
	}
	return ""
}

// TestPrintingCall: what the typed layout check calls printing, on source
// written for it, so that the check cannot pass by seeing nothing.
func TestPrintingCall(t *testing.T) {
	const src = `package p

import (
	f "fmt"
	"io"
	"log/slog"
	. "os"
	"strings"
	"crypto/sha256"
)

func all(w io.Writer) string {
	var b strings.Builder
	f.Fprintf(&b, "made")           // text of its own: fine
	b.WriteString("made")           // fine
	h := sha256.New()
	h.Write([]byte("x"))            // a hash: fine
	_ = f.Sprintf("x")              // fine
	f.Println("printed")            // prints
	f.Fprintln(w, "to a writer")    // prints
	w.Write([]byte("x"))            // prints
	io.WriteString(w, "x")          // prints
	slog.Info("logged")             // prints
	Stdout.WriteString("x")         // prints
	pr := f.Printf
	pr("x")                         // prints (a func value of fmt)
	return b.String()
}
`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := newInfo()
	if _, err := (&types.Config{Importer: importer.ForCompiler(fset, "source", nil)}).Check("p", fset, []*ast.File{file}, info); err != nil {
		t.Fatal(err)
	}
	var got []int
	ast.Inspect(file, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok && printingCall(info, call) != "" {
			got = append(got, fset.Position(call.Pos()).Line)
		}
		return true
	})
	want := []int{19, 20, 21, 22, 23, 24, 26}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("printing calls on lines %v, want %v", got, want)
	}
}

// printingCall says why call prints (to the process's streams, a writer
// it was handed, a logger), or "" when it does not.
func printingCall(info *types.Info, call *ast.CallExpr) string {
	fn := callee(info, call)
	if fn == nil {
		return ""
	}
	pkg := ""
	if fn.Pkg() != nil {
		pkg = fn.Pkg().Path()
	}
	name := fn.Name()
	sig, _ := fn.Type().(*types.Signature)
	switch {
	case pkg == "log", pkg == "log/slog", strings.HasPrefix(pkg, "k8s.io/klog"), strings.HasPrefix(pkg, "github.com/go-logr/"):
		return "logs through " + pkg + "." + name
	case pkg == "fmt" && strings.HasPrefix(name, "Print"):
		return "calls fmt." + name
	case pkg == "fmt" && strings.HasPrefix(name, "Fprint"), pkg == "io" && (name == "WriteString" || name == "Copy" || name == "CopyN"):
		if len(call.Args) > 0 && !madeHere(info.TypeOf(call.Args[0])) {
			return fmt.Sprintf("calls %s.%s on a %s", pkg, name, info.TypeOf(call.Args[0]))
		}
	case sig != nil && sig.Recv() != nil && strings.HasPrefix(name, "Write"):
		// the value the method is called on (a hash.Hash's Write is
		// io.Writer's, embedded)
		recv := sig.Recv().Type()
		if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
			recv = info.TypeOf(sel.X)
		}
		if !madeHere(recv) {
			return fmt.Sprintf("writes to a %s", recv)
		}
	}
	return ""
}

// callee is the function call calls: a function, a method, or a variable
// holding a function of a printing package (pr := fmt.Printf) resolved to
// what it was assigned where that is plain to see.
func callee(info *types.Info, call *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fun
	case *ast.SelectorExpr:
		id = fun.Sel
	default:
		return nil
	}
	switch obj := info.Uses[id].(type) {
	case *types.Func:
		return obj
	case *types.Var:
		return assignedFunc(info, obj)
	}
	return nil
}

// assignedFunc: the function a local variable was given where it was
// declared (v := fmt.Printf), if any.
func assignedFunc(info *types.Info, v *types.Var) *types.Func {
	for id, obj := range info.Defs {
		if obj != v || id.Obj == nil {
			continue
		}
		as, ok := id.Obj.Decl.(*ast.AssignStmt)
		if !ok {
			continue
		}
		for i, lhs := range as.Lhs {
			if l, ok := lhs.(*ast.Ident); ok && l == id && i < len(as.Rhs) {
				var rid *ast.Ident
				switch r := ast.Unparen(as.Rhs[i]).(type) {
				case *ast.Ident:
					rid = r
				case *ast.SelectorExpr:
					rid = r.Sel
				}
				if fn, ok := info.Uses[rid].(*types.Func); ok {
					return fn
				}
			}
		}
	}
	return nil
}

// madeHere: t is a buffer the code makes text or a digest in (a
// strings.Builder, a bytes.Buffer, a hash), not a stream someone else
// reads.
func madeHere(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return false
	}
	switch named.Obj().Pkg().Path() + "." + named.Obj().Name() {
	case "strings.Builder", "bytes.Buffer", "hash.Hash", "hash.Hash32", "hash.Hash64":
		return true
	}
	return false
}

// typedPackage is one package of the engine, parsed and type-checked.
type typedPackage struct {
	path  string
	pkg   *types.Package
	fset  *token.FileSet
	files []*ast.File
	info  *types.Info
}

func newInfo() *types.Info {
	return &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
}

// typeCheck type-checks the packages pattern names (their non-test
// files), their imports read from the export data `go list -export`
// builds, as gopls and go vet read them.
func typeCheck(t fatalf, pattern string) []*typedPackage {
	t.Helper()
	args := []string{"list", "-e", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,DepOnly,ImportMap,Error"}
	if raceEnabled {
		args = append(args, "-race") // the export data the race-enabled test build made already
	}
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.Command(goCmd, append(args, pattern)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	type listed struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
		DepOnly                 bool
		ImportMap               map[string]string
		Error                   *struct{ Err string }
	}
	exports := map[string]string{}
	var targets []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			targets = append(targets, p)
		}
	}
	var pkgs []*typedPackage
	for _, p := range targets {
		fset := token.NewFileSet()
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		lookup := func(path string) (io.ReadCloser, error) {
			if m, ok := p.ImportMap[path]; ok {
				path = m
			}
			file := exports[path]
			if file == "" {
				return nil, fmt.Errorf("no export data for %s", path)
			}
			return os.Open(file)
		}
		info := newInfo()
		conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
		pkg, err := conf.Check(p.ImportPath, fset, files, info)
		if err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		pkgs = append(pkgs, &typedPackage{path: p.ImportPath, pkg: pkg, fset: fset, files: files, info: info})
	}
	return pkgs
}

// fatalf is what typeCheck needs of a test: a *testing.T, or a
// fatalRecorder when it runs once for several tests.
type fatalf interface {
	Helper()
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

// fatalRecorder keeps the first fatal message and stops the goroutine, as
// testing.T does.
type fatalRecorder struct{ msg string }

func (*fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *fatalRecorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }
