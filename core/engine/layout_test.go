package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayout: no package under the engine imports cobra (only core/cli
// does) or a step package (the executors are the caller's registry), and
// none prints: nothing writes to the process's standard streams or calls
// fmt's printers to a writer; what the engine says goes out as events and
// notes, which its caller renders.
func TestLayout(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case strings.HasPrefix(p, "github.com/spf13/cobra"), strings.HasPrefix(p, "github.com/spf13/pflag"):
				t.Errorf("%s imports %s: only core/cli takes flags", path, p)
			case strings.HasPrefix(p, "khook.io/core/steps/"), p == "khook.io/core/render", p == "khook.io/core/cli":
				t.Errorf("%s imports %s: the engine runs the caller's executors and renders nothing", path, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				// fmt.Fprint* into a builder of its own (&b) makes text
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && len(call.Args) > 0 {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "fmt" && strings.HasPrefix(sel.Sel.Name, "Fprint") {
						if u, ok := call.Args[0].(*ast.UnaryExpr); ok && u.Op == token.AND {
							return false
						}
					}
				}
				return true
			}
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			switch name := pkg.Name + "." + sel.Sel.Name; {
			case pkg.Name == "fmt" && (strings.HasPrefix(sel.Sel.Name, "Print") || strings.HasPrefix(sel.Sel.Name, "Fprint")),
				name == "os.Stdout", name == "os.Stderr", pkg.Name == "log":
				t.Errorf("%s: %s prints: the engine's callers render what it says", fset.Position(sel.Pos()), name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
