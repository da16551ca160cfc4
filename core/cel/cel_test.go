package cel

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestCostLimitLeavesRoomForRealConditions(t *testing.T) {
	vars := map[string]string{}
	for i := range 1000 {
		vars[fmt.Sprintf("V%d", i)] = "x"
	}
	var env Env
	p, err := env.Compile(`vars.exists(k, k.startsWith("V99") && vars[k] == "x") && vars.all(k, vars[k].size() > 0)`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := p.Eval(vars); err != nil || !ok {
		t.Fatalf("a comprehension over 1000 variables: %v %v", ok, err)
	}
}

func TestCompileAndEval(t *testing.T) {
	vars := map[string]string{"ENV": "prod", "ENABLE_ARGOCD": "true", "REGION": "eu-west-1", "EMPTY": ""}
	tests := []struct {
		expr    string
		want    bool
		wantErr string // compile or eval error substring
	}{
		{expr: `vars.ENV == "prod"`, want: true},
		{expr: `vars.ENV == "dev"`, want: false},
		{expr: `vars.get("ENABLE_ARGOCD", "false") == "true"`, want: true},
		{expr: `vars.get("MISSING", "fallback") == "fallback"`, want: true},
		{expr: `has(vars.ENV)`, want: true},
		{expr: `has(vars.MISSING)`, want: false},
		{expr: `!has(vars.MISSING) || vars.MISSING == "x"`, want: true},
		{expr: `vars.REGION.startsWith("eu-")`, want: true},
		{expr: `vars.REGION.endsWith("-1") && vars.REGION.contains("west")`, want: true},
		{expr: `vars.REGION.matches("^eu-[a-z]+-[0-9]$")`, want: true},
		{expr: `vars.ENV in ["prod", "staging"]`, want: true},
		{expr: `"ENV" in vars`, want: true},
		{expr: `vars.ENV == "prod" ? true : false`, want: true},
		{expr: `vars.EMPTY == ""`, want: true},
		{expr: `vars.ENV.upperAscii() == "PROD"`, want: true},
		{expr: `vars.MISSING == "x"`, wantErr: "variable MISSING is not set"},
		{expr: `vars.ENV`, wantErr: "must evaluate to a bool, not string"},
		{expr: `vars.ENABLE_ARGOCD == true`, wantErr: "no matching overload"},
		{expr: `vars.ENV ==`, wantErr: "Syntax error"},
		{expr: `vars.get("A")`, wantErr: "found no matching overload"},
		{expr: `unknown == "x"`, wantErr: "undeclared reference to 'unknown'"},
		{expr: `  `, wantErr: "empty condition"},
		{expr: `"${ENV}" == "prod"`, wantErr: "write vars.NAME"},
	}
	var env Env
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			p, err := env.Compile(tt.expr)
			if err == nil {
				var got bool
				got, err = p.Eval(vars)
				if err == nil && tt.wantErr == "" && got != tt.want {
					t.Fatalf("Eval = %v, want %v", got, tt.want)
				}
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("want error containing %q, got none", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans several lines: %q", err)
			}
		})
	}
}

func TestCompileCachesPrograms(t *testing.T) {
	var env Env
	a, err := env.Compile(`vars.A == "1"`)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Compile(`vars.A == "1"`)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("the same expression was compiled twice")
	}
}

func TestCostLimitStopsPathologicalExpressions(t *testing.T) {
	var env Env
	// comprehensions nested three deep over 200-element lists: 8e6 steps
	list := `[` + strings.Repeat("1,", 199) + `1]`
	expr := list + `.all(a, ` + list + `.all(b, ` + list + `.all(c, a == b)))`
	p, err := env.Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Eval(nil); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("want a cost limit error, got %v", err)
	}
}

func TestConcurrentCompile(t *testing.T) {
	var env Env
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := env.Compile(fmt.Sprintf(`vars.get("N", "0") == "%d"`, i%4))
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := p.Eval(map[string]string{"N": "1"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkCompile measures compiling one new expression in a warm
// environment (the per-step cost of a when: on every step).
func BenchmarkCompile(b *testing.B) {
	var env Env
	if _, err := env.Compile(`true`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := env.Compile(fmt.Sprintf(`vars.get("ENV", "dev") == "prod-%d" && has(vars.X%d)`, i, i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewEnv measures building the CEL environment (once per process).
func BenchmarkNewEnv(b *testing.B) {
	for i := 0; i < b.N; i++ {
		var env Env
		if _, err := env.Compile(`true`); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCompileErrorMessages: the exact message of each usual mistake, with
// the column in the expression and no token list from the parser.
func TestCompileErrorMessages(t *testing.T) {
	tests := []struct{ expr, want string }{
		{`vars.ENV ==`, `Syntax error: mismatched input '<EOF>': the condition ends before it is complete (at column 12)`},
		{`{`, `Syntax error: mismatched input '<EOF>': the condition ends before it is complete (at column 2)`},
		{`vars.ENV in ["a", "b"`, `Syntax error: mismatched input '<EOF>' (expected ']' or ','): the condition ends before it is complete (at column 22)`},
		{`vars.ENV = "prod"`, `Syntax error: token recognition error at: '= ': compare with ==, not = (at column 10)`},
		{`vars.ENV == 'prod`, `Syntax error: token recognition error at: ''prod': a string is not closed (at column 13)`},
		{`vars.ENV == "a")`, `Syntax error: extraneous input ')' (at column 16)`},
		{`(vars.ENV == "a"`, `Syntax error: missing ')' at '<EOF>' (at column 17)`},
		{`prod == "prod"`, `undeclared reference to 'prod': variables are read as vars.NAME, and a string needs quotes ("prod") (at column 1)`},
		{`lower(vars.ENV) == "a"`, `unknown function 'lower' (at column 6)`},
		{`vars.N == 3`, `found no matching overload for '==' applied to '(string, int)': every variable is a string, so compare with a string (vars.N == "3", vars.FLAG == "true") (at column 8)`},
		{`vars.N > 3`, `found no matching overload for '>' applied to '(string, int)': every variable is a string, so compare with a string (vars.N == "3", vars.FLAG == "true") (at column 8)`},
		{"vars.A == \"x\" &&\n  vars.B ==", `Syntax error: mismatched input '<EOF>': the condition ends before it is complete (at line 2, column 12)`},
	}
	var env Env
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := env.Compile(tt.expr)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got  %v\nwant %s", err, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || strings.Contains(ce.Cause, "expecting") || ce.Cause == "" {
				t.Fatalf("want an *Error with the compiler's cause without a token list, got %#v", err)
			}
		})
	}
}
