package cel

import (
	"fmt"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		in, text string
		params   []string
		ok       bool
	}{
		{`vars.ENV == "prod"`, `vars[khp0] == khp1`, []string{"ENV", "prod"}, true},
		{`vars.get("A", 'x') == "true"`, `vars.get(khp0, khp1) == khp2`, []string{"A", "x", "true"}, true},
		{`has(vars.TOKEN) && has ( vars . B )`, `(khp0 in vars) && (khp1 in vars)`, []string{"TOKEN", "B"}, true},
		{`vars.A.startsWith("eu-")`, `vars[khp0].startsWith(khp1)`, []string{"A", "eu-"}, true},
		{`"a\nb" == vars.X`, `"a\nb" == vars[khp0]`, []string{"X"}, true},
		{`r"raw\d" == vars.X || b"x" == b"y" || br"z" == b"z"`, `r"raw\d" == vars[khp0] || b"x" == b"y" || br"z" == b"z"`, []string{"X"}, true},
		{`"""tri"ple""" == vars.X`, `"""tri"ple""" == vars[khp0]`, []string{"X"}, true},
		{`vars.in == "x"`, `vars.in == khp0`, []string{"x"}, true},
		{`x.vars.A == "b"`, `x.vars.A == khp0`, []string{"b"}, true},
		{`vars.ENV == "prod" // comment`, ``, nil, false},
		{`khp0 == "x"`, ``, nil, false},
		{`"unterminated`, ``, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, ok := normalize(tt.in)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if s.text != tt.text || fmt.Sprint(s.params) != fmt.Sprint(tt.params) {
				t.Fatalf("got %q %q, want %q %q", s.text, s.params, tt.text, tt.params)
			}
		})
	}
}

var equivalenceVars = []map[string]string{
	{},
	{"ENV": "prod", "A": "eu-west-1", "X": "a\nb", "TOKEN": "t", "B": ""},
	{"ENV": "dev", "A": "true", "X": "raw\\d", "in": "x"},
}

// checkEquivalent compiles expr through its shape (Env.Compile) and as
// written (compileText), and requires the same verdict everywhere.
func checkEquivalent(t *testing.T, env *Env, expr string) {
	t.Helper()
	viaShape, shapeErr := env.Compile(expr)
	env.mu.Lock()
	direct := env.compileText(expr, 0)
	env.mu.Unlock()
	if (shapeErr == nil) != (direct.err == nil) {
		t.Fatalf("%q: compile via shape: %v; as written: %v", expr, shapeErr, direct.err)
	}
	if shapeErr != nil {
		if shapeErr.Error() != direct.err.Error() {
			t.Fatalf("%q: errors differ: %q vs %q", expr, shapeErr, direct.err)
		}
		return
	}
	for _, vars := range equivalenceVars {
		a, aerr := viaShape.Eval(vars)
		b, berr := direct.prog.Eval(vars)
		if a != b || (aerr == nil) != (berr == nil) {
			t.Fatalf("%q with %v: via shape %v %v; as written %v %v", expr, vars, a, aerr, b, berr)
		}
		if aerr != nil && !strings.Contains(aerr.Error(), strings.TrimPrefix(berr.Error(), "evaluating ")) && aerr.Error() != berr.Error() {
			t.Fatalf("%q: eval errors differ: %q vs %q", expr, aerr, berr)
		}
	}
}

func TestShapeEquivalence(t *testing.T) {
	var env Env
	for _, expr := range []string{
		`vars.ENV == "prod"`, `vars.ENV != "prod" && vars.A.startsWith("eu-")`, `has(vars.TOKEN)`, `!has(vars.NOPE)`,
		`vars.get("NOPE", "d") == "d"`, `vars.NOPE == "x"`, `"ENV" in vars`, `vars.A in ["true", "false"]`,
		`vars.X == "a\nb"`, `vars.X == r"raw\d"`, `vars.A.matches("^eu-[a-z]+-[0-9]$")`, `vars.ENV == 'prod' ? true : false`,
		`vars.ENV.size() > 2`, `vars.ENV == 1`, `vars.ENV`, `vars.in == "x"`, `has(vars.ENV.x)`, `{"a": vars.ENV}["a"] == "prod"`,
		`vars.A.split("-").size() == 3`, `vars.get("ENV", "")`, `"x".matches("[")`, `vars.ENV + "" == "prod"`,
	} {
		checkEquivalent(t, &env, expr)
	}
}

func FuzzShapeEquivalence(f *testing.F) {
	for _, s := range []string{`vars.ENV == "prod"`, `has(vars.A) || vars.get("B", "x") != 'y'`, `"a" + "b" == vars.X`, `vars.A.startsWith(r"eu")`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		if len(expr) > 200 || strings.TrimSpace(expr) == "" || strings.Contains(expr, "${") {
			return // rejected before shaping, the same way on both paths
		}
		var env Env
		checkEquivalent(t, &env, expr)
	})
}
