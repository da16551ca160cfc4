package vars

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"khook.io/core/redact"
)

func testSet(t testing.TB, red *redact.Redactor, set ...string) *Set {
	t.Helper()
	s, err := Resolve(Options{
		Set:     set,
		Environ: []string{"KHOOK_SECRET_TOKEN=t0k/en+=?&x", "KHOOK_VAR_ENVV=from env"},
	}, red)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGrammar(t *testing.T) {
	set := testSet(t, nil,
		"APP=My-App", "V=val", "EMPTY=", "TPL={{ .Values.x }}", "REF=${V}", "DOLLAR=$${V}",
		"MULTI=a\nb", "PIPE=x|y", "NUM=7", "LONG=abcdefghijklmnopqrstuvwxyz")
	tests := []struct{ in, want string }{
		{"${V}", "val"},
		{"${ V }", "val"},
		{"${\tV\t}", "val"},
		{"a${V}b${V}c", "avalbvalc"},
		{"${V}${V}", "valval"},
		{"${MISSING:-dflt}", "dflt"},
		{"${MISSING:-}", ""},
		{"${MISSING:- spaced }", " spaced "},
		{"${MISSING:-a:b-c{d$e}", "a:b-c{d$e"},
		{"${V:-dflt}", "val"},
		{"${EMPTY:-dflt}", ""}, // set to "" counts as set
		{"${EMPTY}", ""},
		{"${APP|lower}", "my-app"},
		{"${APP | lower | trunc 3}", "my-"},
		{"${ APP |lower|upper }", "MY-APP"},
		{"${LONG|trunc 5}", "abcde"},
		{`${WINDOW:-5|printf "%sm"}`, "5m"},
		{`${WINDOW:-5 | printf "%sm"}`, "5m"},
		{`${NUM:-5|printf "%sm"}`, "7m"},
		{"${MISSING:-dev|upper}", "DEV"},
		{`${V|printf "%s-%s" .}`, "val-val"},
		{`${V|replace "a" "|"}`, "v|l"},
		{`${V|quote}`, `"val"`},
		{"${V|b64enc}", base64.StdEncoding.EncodeToString([]byte("val"))},
		{"${PIPE|upper}", "X|Y"},
		{"${MULTI|nindent 2}", "\n  a\n  b"},
		{"${EMPTY|default \"d\"}", "d"},
		{"${V|sha256sum|trunc 8}", fmt.Sprintf("%x", sha256.Sum256([]byte("val")))[:8]},
		{"${APP|lower|contains \"app\"}", "true"},
		// Escapes and lone dollars.
		{"$${V}", "${V}"},
		{"echo $${HOME} $$ $V $1 $ end$", "echo ${HOME} $$ $V $1 $ end$"},
		{"$$${V}", "$${V}"},
		{"$$$${V}", "$$${V}"},
		{"$$", "$$"},
		{"${V}$", "val$"},
		// Values are data.
		{"${TPL}", "{{ .Values.x }}"},
		{"${REF}", "${V}"},
		{"${DOLLAR}", "$${V}"},
		{"${REF|upper}", "${V}"},
		{"{{ .Values.image }} {{- if x }}${V}{{ end }}", "{{ .Values.image }} {{- if x }}val{{ end }}"},
		// Comments are substituted too.
		{"key: 1 # ${V}", "key: 1 # val"},
		// Environment sources.
		{"${ENVV}", "from env"},
		{"no dollar at all", "no dollar at all"},
		{"", ""},
		{"ünï ${V} ß", "ünï val ß"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			res := Substitute([]byte(tt.in), set, nil)
			if len(res.Problems) > 0 {
				t.Fatalf("problems: %v", res.Problems)
			}
			if got := string(res.Text); got != tt.want {
				t.Errorf("Substitute(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestProblems(t *testing.T) {
	set := testSet(t, nil, "V=val")
	const hint = "write $${ for a literal ${"
	tests := []struct {
		in   string
		want string // Text
		msgs []string
	}{
		{"${FOO#bar}", "${FOO#bar}", []string{`1:1: malformed variable reference "${FOO#bar}"`, hint}},
		{"${}", "${}", []string{`1:1: malformed variable reference "${}"`}},
		{"${ }", "${ }", []string{`1:1: malformed variable reference "${ }"`}},
		{"${1X}", "${1X}", []string{`malformed variable reference "${1X}"`}},
		{"${V:=x}", "${V:=x}", []string{`malformed variable reference "${V:=x}"`}},
		{"${V-x}", "${V-x}", []string{`malformed variable reference "${V-x}"`}},
		{"${V W}", "${V W}", []string{`malformed variable reference "${V W}"`}},
		{"${é}", "${é}", []string{`malformed variable reference "${é}"`}},
		{"a ${V", "a ${V", []string{`1:3: unterminated variable reference "${V": missing "}" before the end of the line`, hint}},
		{"${V\n}", "${V\n}", []string{`1:1: unterminated variable reference "${V"`}},
		{"${V:-abc\n}", "${V:-abc\n}", []string{`unterminated variable reference "${V:-abc"`}},
		{"${V|lower\n}", "${V|lower\n}", []string{`unterminated variable reference "${V|lower"`}},
		{"${V:-a|lower", "${V:-a|lower", []string{`unterminated`}},
		{"${", "${", []string{`1:1: malformed variable reference "${"`}},
		{"$", "$", nil},
		{"${V|}", "${V|}", []string{`1:1: empty pipeline in "${V|}"`}},
		{"${V| }", "${V| }", []string{`empty pipeline`}},
		// The nested reference is still substituted (and reported if unset).
		{"${V:-${W}}", "${V:-}", []string{`1:1: default of ${V} contains "${": nested references are not supported`, "1:6: variable W is not set"}},
		// A malformed reference does not hide a valid one after it.
		{"${A ${V}", "${A val", []string{`1:1: malformed variable reference "${A ${V}"`}},
		{"${V:-x ${V}", "${V:-x val", []string{`1:1: default of ${V} contains "${"`}},
		{"${MISSING}", "", []string{"1:1: variable MISSING is not set (no --set, --var-file, KHOOK_VAR_MISSING or KHOOK_SECRET_MISSING, and no :-default)"}},
		{"${MISSING|b64enc}", "", []string{"1:1: variable MISSING is not set"}},
		{"${V|now}", "", []string{`1:1: function "now" is not available in khook pipelines: it is nondeterministic (it reads the clock); substitution must give the same spec for plan and apply`}},
		{"${V|lower|env}", "", []string{`function "env" is not available in khook pipelines: it reads the process environment`}},
		{"${V|randAlpha}", "", []string{`function "randAlpha" is not available`, "random"}},
		{"${V|uuidv4}", "", []string{`function "uuidv4" is not available`}},
		{"${V|genCA 365}", "", []string{`function "genCA" is not available`, "certificates"}},
		{"${V|osBase}", "", []string{`function "osBase" is not available`, "use base"}},
		{"${V|toDate \"2006\"}", "", []string{`function "toDate" is not available`, "time zone"}},
		{"${V|date \"2006\" (now)}", "", []string{`function "date" is not available`, `function "now" is not available`}},
		{"${V|nosuchfn}", "", []string{`1:1: unknown function "nosuchfn" in pipeline "nosuchfn"`}},
		{"${V|lower (nosuch 1)}", "", []string{`unknown function "nosuch"`}},
		{`${V|printf "%s`, `${V|printf "%s`, []string{"unterminated"}},
		{`${V|printf "unterminated string}`, "", []string{`invalid pipeline "printf \"unterminated string"`}},
		{`${V|fail}`, "", []string{`1:1: pipeline "fail" failed for ${V}: error calling fail: val`}},
		{`${V|fail "boom"}`, "", []string{`pipeline "fail \"boom\"" failed for ${V}: wrong number of args for fail: want 1 got 2`}},
		{`${V|lower )}`, "", []string{`invalid pipeline "lower )"`}},
		{`${MISSING|now}`, "", []string{"variable MISSING is not set", `function "now" is not available`}},
		// A "}" inside a pipeline ends the reference early: the rule is named.
		{`${V|replace "}" ")"}`, `" ")"}`, []string{`1:1: invalid pipeline "replace \"": unterminated quoted string: a pipeline cannot contain "}" (the reference ends at the first one); for a literal "}" write printf "%c" 125`}},
		{`x: "${V|trimSuffix "}"}"`, `x: ""}"`, []string{`a pipeline cannot contain "}"`}},
		{`{a: ${V|replace (printf "%c" 125) "x"}, b: ${V|lower (}}`, `{a: val, b: }`, []string{`1:44: invalid pipeline "lower (": unclosed left paren: a pipeline cannot contain "}"`}},
		// The "}" after it closes the flow mapping: no word of the rule.
		{`{a: ${V|nosuch}}`, `{a: }`, []string{`1:5: unknown function "nosuch" in pipeline "nosuch"` + "\x00"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			res := Substitute([]byte(tt.in), set, nil)
			if got := string(res.Text); got != tt.want {
				t.Errorf("Text = %q, want %q", got, tt.want)
			}
			var all []string
			for _, p := range res.Problems {
				all = append(all, p.String()+"\x00") // a want ending in \x00 is the whole message
			}
			joined := strings.Join(all, "\n")
			if len(tt.msgs) == 0 && len(all) > 0 {
				t.Fatalf("unexpected problems:\n%s", joined)
			}
			if len(tt.msgs) > 0 && len(all) == 0 {
				t.Fatalf("no problem, want %q", tt.msgs)
			}
			for _, m := range tt.msgs {
				if !strings.Contains(joined, m) {
					t.Errorf("problems lack %q:\n%s", m, joined)
				}
			}
		})
	}
}

func TestAllMissingReportedAtOnce(t *testing.T) {
	src := "a: ${ONE}\n" +
		"b: ok ${V}\n" +
		"# comment ${TWO}\n" +
		"c: ünï ${ONE} and ${THREE|lower}\n" +
		"d: ${FOUR:-fine}\n" +
		"e: ${X#bad} ${FIVE}\n"
	res := Substitute([]byte(src), testSet(t, nil, "V=v"), nil)
	want := []string{
		"1:4: variable ONE is not set",
		"3:11: variable TWO is not set",
		"4:8: variable ONE is not set",
		"4:19: variable THREE is not set",
		"6:4: malformed variable reference",
		"6:13: variable FIVE is not set",
	}
	if len(res.Problems) != len(want) {
		t.Fatalf("got %d problems: %v", len(res.Problems), res.Problems)
	}
	for i, p := range res.Problems {
		if !strings.HasPrefix(p.String(), want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, p.String(), want[i])
		}
	}
	if got := string(res.Text); got != "a: \nb: ok v\n# comment \nc: ünï  and \nd: fine\ne: ${X#bad} \n" {
		t.Errorf("Text = %q", got)
	}
}

func TestSecretRegistration(t *testing.T) {
	red := redact.New()
	set := testSet(t, red, "PLAIN=plain-value")
	const token = "t0k/en+=?&x"
	if red.Len() != 1 {
		t.Fatalf("after Resolve: %d registered", red.Len())
	}
	src := "raw: ${TOKEN}\nb64: ${TOKEN|b64enc}\nq: ${TOKEN|urlquery}\nupper: ${TOKEN | upper}\n" +
		"url: https://u:${TOKEN|urlquery}@h\nplain: ${PLAIN|upper}\ndef: ${NOPE:-default-value|upper}\n"
	res := Substitute([]byte(src), set, red)
	if len(res.Problems) > 0 {
		t.Fatal(res.Problems)
	}
	text := string(res.Text)
	for _, leaked := range []string{token, base64.StdEncoding.EncodeToString([]byte(token)), url.QueryEscape(token), strings.ToUpper(token)} {
		if !strings.Contains(text, leaked) {
			t.Fatalf("substituted text lacks %q", leaked)
		}
		if strings.Contains(red.String(text), leaked) {
			t.Errorf("%q not masked:\n%s", leaked, red.String(text))
		}
	}
	want := "raw: ***\nb64: ***\nq: ***\nupper: ***\nurl: https://***@h\nplain: PLAIN-VALUE\ndef: DEFAULT-VALUE\n"
	if got := red.String(text); got != want {
		t.Errorf("redacted:\n%s\nwant:\n%s", got, want)
	}
	// TOKEN and its three distinct pipeline outputs; plain values and
	// defaults are not registered.
	if red.Len() != 4 {
		t.Errorf("registered %d values, want 4", red.Len())
	}
	// A pipeline error on a secret value does not leak it.
	res = Substitute([]byte(`${TOKEN|fail}`), set, red)
	if len(res.Problems) != 1 || strings.Contains(res.Problems[0].Msg, token) || !strings.Contains(res.Problems[0].Msg, "error calling fail: ***") {
		t.Errorf("problems = %v", res.Problems)
	}
}

func TestNoSecretWithoutRedactor(t *testing.T) {
	// A nil redactor is allowed everywhere.
	set := testSet(t, nil)
	res := Substitute([]byte("${TOKEN|b64enc}"), set, nil)
	if len(res.Problems) > 0 || len(res.Text) == 0 {
		t.Fatal(res.Problems)
	}
}

func TestExcludedFunctionsExistInSprig(t *testing.T) {
	// Every excluded name is a real sprig function (no typo leaves the real
	// one reachable), and the excluded set covers sprig's own nonhermetic
	// list.
	fm := funcMap()
	for name := range excluded {
		if _, ok := fm[name]; !ok {
			t.Errorf("%s missing from the function map", name)
		}
		res := Substitute([]byte("${V|"+name+"}"), testSet(t, nil, "V=v"), nil)
		if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Msg, fmt.Sprintf("function %q is not available", name)) {
			t.Errorf("%s: %v", name, res.Problems)
		}
	}
	for _, name := range []string{"date", "date_in_zone", "date_modify", "now", "htmlDate", "htmlDateInZone", "dateInZone", "dateModify", "randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "uuidv4", "env", "expandenv", "getHostByName"} {
		if _, ok := excluded[name]; !ok {
			t.Errorf("sprig nonhermetic %s not excluded", name)
		}
	}
}

func TestPipelineCacheConcurrent(t *testing.T) {
	red := redact.New()
	set := testSet(t, red, "APP=App")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				src := fmt.Sprintf("a: ${APP|lower|trunc %d}\nb: ${TOKEN|b64enc|trunc %d}\nc: ${APP|printf \"%%s-%d\"}\n", 1+i%3, 2+g, g)
				res := Substitute([]byte(src), set, red)
				if len(res.Problems) > 0 {
					t.Error(res.Problems)
					return
				}
				if !strings.HasPrefix(string(res.Text), "a: "+"app"[:1+i%3]+"\n") {
					t.Errorf("Text = %q", res.Text)
					return
				}
				_, _ = res.SourcePos(2, 4)
			}
		}()
	}
	wg.Wait()
}

// TestRefsAndInsert: every reference is listed with its offset and whether
// its value is secret, and Insert marks where each one went in the text.
func TestRefsAndInsert(t *testing.T) {
	red := redact.New()
	set, err := Resolve(Options{Environ: []string{"KHOOK_VAR_A=alpha", "KHOOK_SECRET_S=s3cret", "KHOOK_VAR_LONG=" + "x\ny"}}, red)
	if err != nil {
		t.Fatal(err)
	}
	src := "a: ${A}\nb: ${LONG} ${S|upper} $${X}\nc: ${MISSING} ${BAD#}\n"
	res := Substitute([]byte(src), set, red)
	want := []Ref{{Name: "A", Offset: 3}, {Name: "LONG", Offset: 11}, {Name: "S", Secret: true, Offset: 19}, {Name: "MISSING", Offset: 39}}
	outputs := []string{"alpha", "x\ny", "S3CRET", ""}
	if len(res.Refs) != len(want) {
		t.Fatalf("Refs = %+v, want %+v", res.Refs, want)
	}
	for i, r := range res.Refs {
		if r.Name != want[i].Name || r.Secret != want[i].Secret || r.Offset != want[i].Offset || string(res.Output(r)) != outputs[i] {
			t.Errorf("Refs[%d] = %+v (output %q), want %+v (output %q)", i, r, res.Output(r), want[i], outputs[i])
		}
	}
	if len(res.Problems) != 2 || res.Problems[0].Offset != 39 || res.Problems[1].Offset != 50 {
		t.Fatalf("Problems = %+v", res.Problems)
	}
	at := map[int]string{3: "<A>", 19: "<S>", 39: "<M>", 50: "<B>", 0: "<0>"}
	text, mapPos := res.Insert(at)
	wantText := "<0>a: <A>alpha\nb: x\ny <S>S3CRET ${X}\nc: <M> <B>${BAD#}\n"
	if string(text) != wantText {
		t.Fatalf("Insert:\n got %q\nwant %q", text, wantText)
	}
	// Positions of the new text map to the source: inside an inserted
	// string to where it was inserted, elsewhere to the text as written.
	for _, tt := range []struct{ line, col, wantLine, wantCol int }{
		{1, 1, 1, 1},   // inside "<0>"
		{1, 4, 1, 1},   // "a", after "<0>"
		{1, 8, 1, 4},   // inside "<A>": the "${" of ${A}
		{1, 11, 1, 4},  // inside "alpha"
		{3, 3, 2, 12},  // "<S>" after the value spanning two lines
		{3, 13, 2, 23}, // the "${" written "$${"
		{3, 15, 2, 26}, // the "X" after it
		{4, 12, 3, 16}, // "${BAD#}" after "<B>"
	} {
		l, c := mapPos(tt.line, tt.col)
		if l != tt.wantLine || c != tt.wantCol {
			t.Errorf("mapPos(%d, %d) = %d:%d, want %d:%d", tt.line, tt.col, l, c, tt.wantLine, tt.wantCol)
		}
	}
}
