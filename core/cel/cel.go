// Package cel compiles and evaluates the `when:` conditions of a spec with
// cel-go. An expression sees one variable, vars, a map of strings:
//
//	vars.NAME                   the value; an error when NAME is unset
//	vars.get("NAME", "default") the value, or the default when unset
//	has(vars.NAME)              whether NAME is set
//
// on top of the CEL standard library and cel-go's string extensions. Every
// expression must type-check to bool; evaluation is bounded by a cost limit.
// The environment is built once, on first use; each distinct expression is
// compiled once.
package cel

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	gocel "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
)

// CostLimit bounds the evaluation cost of one condition (cel-go's abstract
// cost units); far above any sensible condition, low enough to stop a
// pathological one quickly.
const CostLimit = 1_000_000

// Env compiles conditions. It is safe for concurrent use; the zero value is
// ready to use.
type Env struct {
	once    sync.Once
	env     *gocel.Env
	envErr  error
	mu      sync.Mutex
	results map[string]compiled
}

type compiled struct {
	prog *Program
	err  error
}

// Program is one compiled condition.
type Program struct {
	expr string
	prg  gocel.Program
}

// Expr returns the source expression.
func (p *Program) Expr() string { return p.expr }

func (e *Env) init() {
	e.once.Do(func() {
		e.env, e.envErr = gocel.NewEnv(
			gocel.Variable("vars", gocel.MapType(gocel.StringType, gocel.StringType)),
			gocel.Function("get",
				gocel.MemberOverload("map_string_string_get_string_string",
					[]*gocel.Type{gocel.MapType(gocel.StringType, gocel.StringType), gocel.StringType, gocel.StringType},
					gocel.StringType,
					gocel.FunctionBinding(getWithDefault),
				),
			),
			ext.Strings(),
		)
		e.results = map[string]compiled{}
	})
}

func getWithDefault(args ...ref.Val) ref.Val {
	m, ok := args[0].(traits.Mapper)
	if !ok {
		return types.NewErr("get: receiver is not a map")
	}
	if v, found := m.Find(args[1]); found {
		return v
	}
	return args[2]
}

// Compile parses and type-checks expr, which must be a bool expression.
// Compiling the same text again returns the cached result.
func (e *Env) Compile(expr string) (*Program, error) {
	e.init()
	if e.envErr != nil {
		return nil, fmt.Errorf("cel environment: %w", e.envErr)
	}
	e.mu.Lock()
	c, ok := e.results[expr]
	e.mu.Unlock()
	if ok {
		return c.prog, c.err
	}
	c.prog, c.err = e.compile(expr)
	e.mu.Lock()
	e.results[expr] = c
	e.mu.Unlock()
	return c.prog, c.err
}

func (e *Env) compile(expr string) (*Program, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("empty condition")
	}
	if strings.Contains(expr, "${") {
		// ${NAME} was substituted textually already, so this is a literal
		// left by an escape; say what to write instead.
		return nil, errors.New("write vars.NAME (or vars.get(\"NAME\", \"default\")) in when:, not ${NAME}")
	}
	ast, iss := e.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, errors.New(oneLine(iss.Err().Error()))
	}
	if ast.OutputType() != gocel.BoolType {
		return nil, fmt.Errorf("must evaluate to a bool, not %s (compare strings: vars.ENV == \"prod\")", ast.OutputType())
	}
	prg, err := e.env.Program(ast, gocel.CostLimit(CostLimit), gocel.EvalOptions(gocel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("cannot plan condition: %w", err)
	}
	return &Program{expr: expr, prg: prg}, nil
}

// oneLine folds cel-go's multi-line error (message, source, caret) into a
// single line: the caret picture is noise once the error is positioned.
func oneLine(s string) string {
	s = strings.TrimPrefix(s, "ERROR: <input>:")
	first, _, _ := strings.Cut(s, "\n")
	// "1:12: Syntax error: ..." -> "Syntax error: ... (at column 12)"
	if loc, msg, ok := strings.Cut(first, ": "); ok {
		if line, col, ok := strings.Cut(loc, ":"); ok && line == "1" && isDigits(col) {
			return strings.TrimSpace(msg) + " (at column " + col + ")"
		}
	}
	return strings.TrimSpace(first)
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// Eval evaluates the condition against vars.
func (p *Program) Eval(vars map[string]string) (bool, error) {
	out, _, err := p.prg.Eval(map[string]any{"vars": vars})
	if err != nil {
		msg := err.Error()
		if key, ok := strings.CutPrefix(msg, "no such key: "); ok {
			return false, fmt.Errorf("variable %s is not set (write vars.get(%q, \"default\") or check has(vars.%s))", key, key, key)
		}
		return false, fmt.Errorf("evaluating %q: %w", p.expr, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("evaluating %q: got %v, want a bool", p.expr, out)
	}
	return b, nil
}
