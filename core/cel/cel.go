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
	"regexp"
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
		return compiled{err: compileError(iss.Err().Error(), text)}
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

// Error is a condition that does not compile: what is wrong, in words a
// user acts on, and where in the expression (1-based; Line is 0 when
// unknown).
type Error struct {
	Msg string
	// Cause is the compiler's own message, without khook's hints.
	Cause     string
	Line, Col int
}

func (e *Error) Error() string {
	switch e.Line {
	case 0:
		return e.Msg
	case 1:
		return fmt.Sprintf("%s (at column %d)", e.Msg, e.Col)
	}
	return fmt.Sprintf("%s (at line %d, column %d)", e.Msg, e.Line, e.Col)
}

// compileError turns cel-go's issues about expr (one error per line, each
// with its source line and a caret picture) into an *Error about the first
// one.
func compileError(s, expr string) *Error {
	s = strings.TrimPrefix(s, "ERROR: <input>:")
	first, _, _ := strings.Cut(s, "\n")
	e := &Error{Msg: strings.TrimSpace(first)}
	// "1:12: Syntax error: ..."
	if loc, msg, ok := strings.Cut(first, ": "); ok {
		if line, col, ok := strings.Cut(loc, ":"); ok && isDigits(line) && isDigits(col) {
			e.Line, _ = strconv.Atoi(line)
			e.Col, _ = strconv.Atoi(col)
			e.Msg = strings.TrimSpace(msg)
		}
	}
	e.Msg = strings.TrimSuffix(e.Msg, " (in container '')")
	e.Cause = e.Msg
	if m := expectingRe.FindStringSubmatch(e.Cause); m != nil {
		e.Cause = e.Cause[:len(e.Cause)-len(m[0])]
	}
	e.Msg = explainIssue(e.Msg, charAt(expr, e.Line, e.Col))
	return e
}

// charAt returns the character at the 1-based line and column of expr, or
// 0.
func charAt(expr string, line, col int) rune {
	lines := strings.Split(expr, "\n")
	if line < 1 || line > len(lines) {
		return 0
	}
	r := []rune(lines[line-1])
	if col < 1 || col > len(r) {
		return 0
	}
	return r[col-1]
}

var (
	// expectingRe matches the parser's list of the tokens it would have
	// accepted.
	expectingRe  = regexp.MustCompile(` expecting (\{.*\}|\S+)$`)
	overloadRe   = regexp.MustCompile(`'(!?_?[^']*?_?)'`)
	undeclaredRe = regexp.MustCompile(`^undeclared reference to '([^']*)'`)
	comparisonRe = regexp.MustCompile(`^found no matching overload for '(==|!=|<|<=|>|>=)' applied to '\((string, \w+|\w+, string)\)'`)
)

// explainIssue rewrites one cel-go message: no token lists, operators as
// written, and a hint for the usual mistakes. at is the character the
// message points at.
func explainIssue(msg string, at rune) string {
	if m := expectingRe.FindStringSubmatch(msg); m != nil {
		msg = msg[:len(msg)-len(m[0])]
		if want := smallSet(m[1]); want != "" {
			msg += " (expected " + want + ")"
		}
	}
	rest, syntax := strings.CutPrefix(msg, "Syntax error: ")
	switch {
	case syntax && strings.HasPrefix(rest, "mismatched input '<EOF>'"):
		msg += ": the condition ends before it is complete"
	case syntax && strings.HasPrefix(rest, "token recognition error at: '="):
		msg += ": compare with ==, not ="
	case syntax && (strings.HasPrefix(rest, "token recognition error at: ''") || strings.HasPrefix(rest, `token recognition error at: '"`)):
		msg += ": a string is not closed"
	case strings.HasPrefix(msg, "found no matching overload for "):
		msg = overloadRe.ReplaceAllStringFunc(msg, func(op string) string {
			if o, ok := operators[strings.Trim(op, "'")]; ok {
				return "'" + o + "'"
			}
			return op
		})
		if comparisonRe.MatchString(msg) {
			msg += ": every variable is a string, so compare with a string (vars.N == \"3\", vars.FLAG == \"true\")"
		}
	}
	if m := undeclaredRe.FindStringSubmatch(msg); m != nil && m[1] != "vars" {
		if at == '(' {
			msg = fmt.Sprintf("unknown function '%s'", m[1])
		} else {
			msg += fmt.Sprintf(": variables are read as vars.NAME, and a string needs quotes (\"%s\")", m[1])
		}
	}
	return msg
}

// operators names CEL's operator functions as they are written.
var operators = map[string]string{
	"_==_": "==", "_!=_": "!=", "_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">=",
	"_&&_": "&&", "_||_": "||", "!_": "!", "-_": "-", "_+_": "+", "_-_": "-",
	"_*_": "*", "_/_": "/", "_%_": "%", "@in": "in", "_?_:_": "?:", "_[_]": "[]",
}

// smallSet words a token set of at most three punctuation tokens
// ({']', ','} -> ']' or ','); it returns "" for larger or other sets.
func smallSet(set string) string {
	if !strings.HasPrefix(set, "{") {
		if strings.HasPrefix(set, "'") {
			return set
		}
		return ""
	}
	items := strings.Split(strings.Trim(set, "{}"), ", ")
	if len(items) > 3 {
		return ""
	}
	for _, it := range items {
		if len(it) < 3 || it[0] != '\'' || it[len(it)-1] != '\'' {
			return ""
		}
	}
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
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
