package vars

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	"khook.io/core/redact"
)

// files is a fake ReadFile.
func files(m map[string]string) func(string) ([]byte, error) {
	return func(path string) ([]byte, error) {
		s, ok := m[path]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		}
		return []byte(s), nil
	}
}

// sourceNames in precedence order, highest first; "default" is the
// ${X:-default} written in the spec.
var sourceNames = []string{"set", "file", "secret", "var", "default"}

// optionsWith returns options where X is set, to "from-<source>", in each
// of the given sources (except "default", which lives in the spec).
func optionsWith(sources ...string) Options {
	opts := Options{ReadFile: files(map[string]string{"vars.yaml": "X: from-file\n"})}
	for _, s := range sources {
		switch s {
		case "set":
			opts.Set = append(opts.Set, "X=from-set")
		case "file":
			opts.VarFiles = append(opts.VarFiles, "vars.yaml")
		case "secret":
			opts.Environ = append(opts.Environ, "KHOOK_SECRET_X=from-secret")
		case "var":
			opts.Environ = append(opts.Environ, "KHOOK_VAR_X=from-var")
		}
	}
	return opts
}

func TestPrecedenceEveryPair(t *testing.T) {
	for i, hi := range sourceNames {
		for _, lo := range sourceNames[i+1:] {
			for _, order := range [][]string{{hi, lo}, {lo, hi}} {
				t.Run(strings.Join(order, ">"), func(t *testing.T) {
					set, err := Resolve(optionsWith(order...), redact.New())
					if err != nil {
						t.Fatal(err)
					}
					res := Substitute([]byte("${X:-from-default}"), set, nil)
					if len(res.Problems) > 0 {
						t.Fatal(res.Problems)
					}
					if got, want := string(res.Text), "from-"+hi; got != want {
						t.Errorf("got %q, want %q", got, want)
					}
				})
			}
		}
	}
}

func TestPrecedenceAllAndSources(t *testing.T) {
	wantSource := map[string]Source{"set": SourceSet, "file": SourceVarFile, "secret": SourceSecretEnv, "var": SourceVarEnv}
	for i, s := range sourceNames[:4] {
		set, err := Resolve(optionsWith(sourceNames[i:]...), nil)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := set.Lookup("X")
		if !ok || v.Value != "from-"+s || v.Source != wantSource[s] || v.Secret != (s == "secret") {
			t.Errorf("sources %v: got %+v", sourceNames[i:], v)
		}
	}
}

func TestLaterWins(t *testing.T) {
	set, err := Resolve(Options{
		Set:      []string{"A=1", "A=2", "B=x=y", "C="},
		VarFiles: []string{"one.yaml", "two.yaml"},
		Environ:  []string{"KHOOK_VAR_E=1", "KHOOK_VAR_E=2", "PATH=/bin", "KHOOK_VAR_F=a=b"},
		ReadFile: files(map[string]string{"one.yaml": "D: one\nG: one\n", "two.yaml": "D: two\n"}),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "2", "B": "x=y", "C": "", "D": "two", "G": "one", "E": "2", "F": "a=b"}
	if got := set.Map(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Map = %v, want %v", got, want)
	}
	if got := set.Names(); !slices.Equal(got, []string{"A", "B", "C", "D", "E", "F", "G"}) {
		t.Fatalf("Names = %v", got)
	}
	// Map is a fresh copy.
	m := set.Map()
	m["A"] = "changed"
	if v, _ := set.Lookup("A"); v.Value != "2" {
		t.Fatal("Map aliases the set")
	}
	if _, ok := set.Lookup("PATH"); ok {
		t.Fatal("unprefixed environment consumed")
	}
}

func TestCustomPrefixes(t *testing.T) {
	red := redact.New()
	set, err := Resolve(Options{
		Environ:      []string{"MY_A=plain", "SEC_B=hidden", "KHOOK_VAR_C=ignored", "KHOOK_SECRET_D=ignored-too"},
		VarPrefix:    "MY_",
		SecretPrefix: "SEC_",
	}, red)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("Names = %v", got)
	}
	if v, _ := set.Lookup("B"); !v.Secret || v.Source != SourceSecretEnv {
		t.Fatalf("B = %+v", v)
	}
	if red.Len() != 1 || red.String("hidden ignored-too") != "*** ignored-too" {
		t.Fatalf("redactor: %d, %q", red.Len(), red.String("hidden ignored-too"))
	}
	res := Substitute([]byte("${MISSING}"), set, nil)
	want := "variable MISSING is not set (no --set, --var-file, MY_MISSING or SEC_MISSING, and no :-default)"
	if len(res.Problems) != 1 || res.Problems[0].Msg != want {
		t.Fatalf("problems = %v", res.Problems)
	}
}

func TestOverlappingPrefixes(t *testing.T) {
	red := redact.New()
	// The secret prefix extends the plain one: KHOOK_SECRET_X is secret X,
	// not plain SECRET_X.
	set, err := Resolve(Options{
		Environ:   []string{"KHOOK_SECRET_X=sec1", "KHOOK_Y=p"},
		VarPrefix: "KHOOK_",
	}, red)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !slices.Equal(got, []string{"X", "Y"}) {
		t.Fatalf("Names = %v", got)
	}
	if v, _ := set.Lookup("X"); !v.Secret {
		t.Fatal("X not secret")
	}
	// The plain prefix extends the secret one: KHOOK_VAR_X is plain X, but
	// its value is still registered as a secret.
	red = redact.New()
	set, err = Resolve(Options{
		Environ:      []string{"KHOOK_VAR_X=val", "KHOOK_Z=sec2"},
		SecretPrefix: "KHOOK_",
	}, red)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !slices.Equal(got, []string{"X", "Z"}) {
		t.Fatalf("Names = %v", got)
	}
	if v, _ := set.Lookup("X"); v.Secret {
		t.Fatal("X secret")
	}
	if red.Len() != 2 {
		t.Fatalf("registered %d values, want 2", red.Len())
	}
}

func TestSecretEnvAlwaysRegistered(t *testing.T) {
	red := redact.New()
	_, err := Resolve(Options{
		Set:     []string{"TOKEN=from-set"},
		Environ: []string{"KHOOK_SECRET_TOKEN=overridden-secret", "KHOOK_SECRET_UNUSED=never-referenced", "KHOOK_SECRET_EMPTY=", "KHOOK_SECRET_bad-name=bad-name-secret"},
	}, red)
	if err == nil || strings.Contains(err.Error(), "bad-name-secret") {
		t.Fatalf("err = %v", err)
	}
	for _, s := range []string{"overridden-secret", "never-referenced", "bad-name-secret"} {
		if got := red.String(s); got != redact.Mask {
			t.Errorf("%q not registered: %q", s, got)
		}
	}
	if red.String("from-set") != "from-set" {
		t.Error("--set value registered as a secret")
	}
}

func TestResolveErrors(t *testing.T) {
	fsys := files(map[string]string{
		"list.yaml":   "- a\n- b\n",
		"nested.yaml": "A: 1\nB:\n  c: d\nC: [1, 2]\n9X: y\nD: ok\nD: again\n? [k]\n: v\n",
		"multi.yaml":  "A: 1\n---\nB: 2\n",
		"broken.yaml": "A: [1, 2\n",
		"scalar.yaml": "just text\n",
	})
	_, err := Resolve(Options{
		Set:      []string{"FOO", "1BAD=secretish", "OK=1", "=x"},
		VarFiles: []string{"missing.yaml", "list.yaml", "nested.yaml", "multi.yaml", "broken.yaml", "scalar.yaml"},
		Environ:  []string{"KHOOK_VAR_=x", "KHOOK_VAR_a-b=y"},
		ReadFile: fsys,
	}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"--set FOO: want NAME=value",
		"--set 1BAD=...: invalid variable name",
		"--set =...: invalid variable name",
		"--var-file missing.yaml: open missing.yaml: file does not exist",
		"list.yaml:1:1: want a flat map of NAME: value, got a sequence",
		"nested.yaml:3:3: B: want a scalar value (string, number or bool), got a mapping",
		"nested.yaml:4:4: C: want a scalar value (string, number or bool), got a sequence",
		`nested.yaml:5:1: invalid variable name "9X"`,
		"nested.yaml:7:1: duplicate variable D (first at line 6)",
		"nested.yaml:8:3: want a variable name as key, got a sequence",
		"multi.yaml:2:1: want a single YAML document, found another",
		"broken.yaml:1:4: invalid YAML: '[' is not closed: did not find expected ',' or ']' at line 2, column 1",
		"scalar.yaml:1:1: want a flat map of NAME: value, got a scalar",
		`environment variable KHOOK_VAR_: invalid variable name ""`,
		`environment variable KHOOK_VAR_a-b: invalid variable name "a-b"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "secretish") {
		t.Error("error contains a value")
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Error("unreadable var file error does not unwrap to *fs.PathError")
	}
}

func TestResolveErrorKeepsValidVars(t *testing.T) {
	set, err := Resolve(Options{Set: []string{"BAD", "GOOD=1"}}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	if v, ok := set.Lookup("GOOD"); !ok || v.Value != "1" {
		t.Fatal("valid variable lost")
	}
}

func TestVarFileScalarsAsWritten(t *testing.T) {
	set, err := Resolve(Options{
		VarFiles: []string{"v.yaml", "empty.yaml", "comments.yaml"},
		ReadFile: files(map[string]string{
			"v.yaml":        "INT: 5\nBOOL: true\nHEX: 0x1F\nNULL: ~\nEMPTY:\nQUOTED: \"a: b\"\nBLOCK: |\n  l1\n  l2\nANCHOR: &a x\nALIAS: *a\n",
			"empty.yaml":    "",
			"comments.yaml": "# nothing\n",
		}),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"INT": "5", "BOOL": "true", "HEX": "0x1F", "NULL": "~", "EMPTY": "", "QUOTED": "a: b", "BLOCK": "l1\nl2\n", "ANCHOR": "x", "ALIAS": "x"}
	if got := set.Map(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Map = %v, want %v", got, want)
	}
}

func TestNilSet(t *testing.T) {
	var s *Set
	if _, ok := s.Lookup("X"); ok || len(s.Map()) != 0 || len(s.Names()) != 0 || s.Len() != 0 {
		t.Fatal("nil set not empty")
	}
	res := Substitute([]byte("a: ${X:-d}\nb: ${Y}\n"), nil, nil)
	if string(res.Text) != "a: d\nb: \n" || len(res.Problems) != 1 {
		t.Fatalf("%q %v", res.Text, res.Problems)
	}
}

func TestSourceString(t *testing.T) {
	for s, want := range map[Source]string{SourceSet: "--set", SourceVarFile: "--var-file", SourceSecretEnv: "secret environment variable", SourceVarEnv: "environment variable", 0: "Source(0)"} {
		if got := s.String(); got != want {
			t.Errorf("%d: %q", int(s), got)
		}
	}
	if fmt.Sprint(SourceSet) != "--set" {
		t.Error("Stringer not used")
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{"A": true, "_": true, "a_1": true, "Z9": true, "": false, "1A": false, "A-B": false, "A.B": false, "é": false, "A B": false} {
		if ValidName(name) != want {
			t.Errorf("ValidName(%q) != %v", name, want)
		}
	}
}

// TestShortSecretsRefused: a secret too short to be masked is refused,
// named by its environment variable, without its value or its length,
// and not registered for masking; an empty one is nothing to mask.
func TestShortSecretsRefused(t *testing.T) {
	red := redact.New()
	_, err := Resolve(Options{Environ: []string{
		"KHOOK_SECRET_PIN=42", "KHOOK_SECRET_ONE=é", "KHOOK_SECRET_PADDED=  x ", "KHOOK_SECRET_BLANK=   ",
		"KHOOK_SECRET_EMPTY=", "KHOOK_SECRET_OK=abc", "KHOOK_SECRET_WIDE=日本語",
	}}, red)
	if !errors.Is(err, ErrShortSecret) {
		t.Fatalf("want ErrShortSecret, got %v", err)
	}
	msg := err.Error()
	for _, name := range []string{"KHOOK_SECRET_PIN", "KHOOK_SECRET_ONE", "KHOOK_SECRET_PADDED", "KHOOK_SECRET_BLANK"} {
		want := "environment variable " + name + ": a secret must be at least 3 characters long (white space around it not counted): " +
			"khook masks every occurrence of a secret's text in everything it prints, so a shorter one would mask ordinary text everywhere; " +
			"a value that is not secret can be passed as KHOOK_VAR_" + strings.TrimPrefix(name, "KHOOK_SECRET_")
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	for _, name := range []string{"EMPTY", "OK", "WIDE"} {
		if strings.Contains(msg, "KHOOK_SECRET_"+name+":") {
			t.Errorf("%s refused:\n%s", name, msg)
		}
	}
	for _, leak := range []string{"42", "é", " x ", "1 character", "2 characters"} {
		if strings.Contains(msg, leak) {
			t.Errorf("the error shows %q:\n%s", leak, msg)
		}
	}
	if got := red.String("Plain text 42 x é"); got != "Plain text 42 x é" {
		t.Fatalf("a refused secret was registered: %q", got)
	}
	if got := red.String("abc 日本語"); got != "*** ***" {
		t.Fatalf("accepted secrets not masked: %q", got)
	}
}

// TestVarFileEmptyDocuments: empty documents around a var file's map are
// nothing; a second map is a problem where it starts.
func TestVarFileEmptyDocuments(t *testing.T) {
	files := map[string]string{
		"ok.yaml":  "---\nA: 1\n---\n# end\n",
		"two.yaml": "A: 1\n---\nB: 2\n",
	}
	read := func(p string) ([]byte, error) { return []byte(files[p]), nil }
	set, err := Resolve(Options{VarFiles: []string{"ok.yaml"}, ReadFile: read}, nil)
	if err != nil || set.Len() != 1 {
		t.Fatalf("ok.yaml: %v, %d variables", err, set.Len())
	}
	_, err = Resolve(Options{VarFiles: []string{"two.yaml"}, ReadFile: read}, nil)
	if err == nil || err.Error() != "two.yaml:2:1: want a single YAML document, found another" {
		t.Fatalf("two.yaml: %v", err)
	}
}

// TestFixedVariables: a variable khook sets itself (KHOOK_CONTEXT in a
// fleet run) has its value, and every source that sets it too is an error,
// each at once: a var file's at the name's position.
func TestFixedVariables(t *testing.T) {
	fixed := []Fixed{{Name: "KHOOK_CONTEXT", Value: "prod-eu", About: "the context's name"}}
	set, err := Resolve(Options{Fixed: fixed, Set: []string{"A=1"}}, redact.New())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := set.Lookup("KHOOK_CONTEXT"); !ok || v.Value != "prod-eu" || v.Source != SourceFixed || v.Secret {
		t.Errorf("KHOOK_CONTEXT = %+v, %v", v, ok)
	}
	if m := set.Map(); m["KHOOK_CONTEXT"] != "prod-eu" || m["A"] != "1" {
		t.Errorf("Map() = %v", m)
	}

	opts := Options{
		Fixed:    fixed,
		Set:      []string{"KHOOK_CONTEXT=other"},
		VarFiles: []string{"vars.yaml"},
		Environ:  []string{"KHOOK_VAR_KHOOK_CONTEXT=x", "KHOOK_SECRET_KHOOK_CONTEXT=hunter2"},
		ReadFile: files(map[string]string{"vars.yaml": "B: 2\nKHOOK_CONTEXT: y\n"}),
	}
	set, err = Resolve(opts, redact.New())
	if err == nil {
		t.Fatal("no error for sources that set KHOOK_CONTEXT")
	}
	msg := err.Error()
	for _, want := range []string{
		"--set KHOOK_CONTEXT=...: KHOOK_CONTEXT is the context's name, set by khook; it cannot be set",
		"vars.yaml:2:1: KHOOK_CONTEXT is the context's name",
		"environment variable KHOOK_VAR_KHOOK_CONTEXT: KHOOK_CONTEXT is",
		"environment variable KHOOK_SECRET_KHOOK_CONTEXT: KHOOK_CONTEXT is",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "other") || strings.Contains(msg, "hunter2") {
		t.Errorf("the error holds a value:\n%s", msg)
	}
	if v, _ := set.Lookup("KHOOK_CONTEXT"); v.Value != "prod-eu" {
		t.Errorf("KHOOK_CONTEXT = %q after the errors", v.Value)
	}
	if v, _ := set.Lookup("B"); v.Value != "2" {
		t.Errorf("the rest of the var file is lost: B = %q", v.Value)
	}
}
