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
	"strconv"
	"strings"
	"sync"

	gocel "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
)

// CostLimit bounds the evaluation cost of one condition (cel-go's abstract
// cost units). Real conditions cost tens of units, a comprehension over a
// thousand variables a few thousand; a pathological one is stopped quickly.
const CostLimit = 100_000

// Env compiles conditions. It is safe for concurrent use; the zero value is
// ready to use. Each distinct expression is compiled once, and expressions
// of the same shape share one compiled program (see shape.go).
type Env struct {
	once   sync.Once
	env    *gocel.Env
	envErr error

	mu      sync.Mutex
	results map[string]compiled // by expression
	shapes  map[string]compiled // by shape text
	params  map[int]*gocel.Env  // the environment with n parameters
	names   []string            // parameter names: khp0, khp1, ...
}

type compiled struct {
	prog *Program
	err  error
}

// Program is one compiled condition.
type Program struct {
	expr   string
	prg    gocel.Program
	params []string // the values of the shape's parameters
	names  []string
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
		e.shapes = map[string]compiled{}
		e.params = map[int]*gocel.Env{0: e.env}
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
	defer e.mu.Unlock()
	if c, ok := e.results[expr]; ok {
		return c.prog, c.err
	}
	c := e.compile(expr)
	e.results[expr] = c
	return c.prog, c.err
}

// compile compiles expr through its shape, or as written when it has no
// parameters or its shape does not compile (the error then comes from the
// expression as the user wrote it). Called with e.mu held.
func (e *Env) compile(expr string) compiled {
	if strings.TrimSpace(expr) == "" {
		return compiled{err: errors.New("empty condition")}
	}
	if strings.Contains(expr, "${") {
		// ${NAME} was substituted textually already, so this is a literal
		// left by an escape; say what to write instead.
		return compiled{err: errors.New("write vars.NAME (or vars.get(\"NAME\", \"default\")) in when:, not ${NAME}")}
	}
	sh, ok := normalize(expr)
	if !ok || len(sh.params) == 0 {
		return e.compileText(expr, 0)
	}
	c, seen := e.shapes[sh.text]
	if !seen {
		c = e.compileText(sh.text, len(sh.params))
		e.shapes[sh.text] = c
	}
	if c.err != nil {
		return e.compileText(expr, 0)
	}
	return compiled{prog: &Program{expr: expr, prg: c.prog.prg, params: sh.params, names: e.names[:len(sh.params)]}}
}

// compileText compiles text in the environment with n string parameters.
func (e *Env) compileText(text string, n int) compiled {
	env, err := e.paramEnv(n)
	if err != nil {
		return compiled{err: fmt.Errorf("cel environment: %w", err)}
	}
	ast, iss := env.Compile(text)
	if iss != nil && iss.Err() != nil {
		return compiled{err: errors.New(oneLine(iss.Err().Error()))}
	}
	if ast.OutputType() != gocel.BoolType {
		return compiled{err: fmt.Errorf("must evaluate to a bool, not %s (compare strings: vars.ENV == \"prod\")", ast.OutputType())}
	}
	prg, err := env.Program(ast, gocel.CostLimit(CostLimit))
	if err != nil {
		return compiled{err: fmt.Errorf("cannot plan condition: %w", err)}
	}
	return compiled{prog: &Program{expr: text, prg: prg}}
}

// paramEnv returns the environment declaring n string parameters.
func (e *Env) paramEnv(n int) (*gocel.Env, error) {
	if env, ok := e.params[n]; ok {
		return env, nil
	}
	for len(e.names) < n {
		e.names = append(e.names, paramPrefix+strconv.Itoa(len(e.names)))
	}
	opts := make([]gocel.EnvOption, n)
	for i := range n {
		opts[i] = gocel.Variable(e.names[i], gocel.StringType)
	}
	env, err := e.env.Extend(opts...)
	if err != nil {
		return nil, err
	}
	e.params[n] = env
	return env, nil
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
	act := make(map[string]any, len(p.params)+1)
	act["vars"] = vars
	for i, v := range p.params {
		act[p.names[i]] = v
	}
	out, _, err := p.prg.Eval(act)
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
