package vars

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"khook.io/core/redact"
)

// expanding are sprig functions whose output size is an argument; a fuzzed
// "repeat 999999999" would only measure memory. Spec authors are trusted
// with them.
var expanding = [][]byte{[]byte("repeat"), []byte("until"), []byte("seq"), []byte("indent"), []byte("wrap")}

// FuzzSubstitute checks that substitution never panics, that SourcePos
// always returns a position inside the source (for every position of the
// text and for every node go.yaml.in/yaml/v3 finds in it), and that text
// without "$" comes back unchanged. Seeds live in
// testdata/fuzz/FuzzSubstitute and run in plain go test.
func FuzzSubstitute(f *testing.F) {
	f.Add([]byte("a: ${V}\nb: ${M|upper}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, e := range expanding {
			if bytes.Contains(src, e) {
				return // an expanding input: outside the property
			}
		}
		red := redact.New()
		set, err := Resolve(Options{
			Set:     []string{"V=val", "M=multi\nline: ü\n  x", "E=", "D=${V}{{ . }}"},
			Environ: []string{"KHOOK_SECRET_S=s3cr3t\nß"},
		}, red)
		if err != nil {
			t.Fatal(err)
		}
		res := Substitute(src, set, red)
		if bytes.IndexByte(src, '$') < 0 && !bytes.Equal(res.Text, src) {
			t.Fatalf("text without $ changed: %q -> %q", src, res.Text)
		}
		srcLines := lineStarts(src)
		check := func(what string, line, col int) {
			gl, gc := res.SourcePos(line, col)
			if gl < 1 || gl > len(srcLines) {
				t.Fatalf("%s: SourcePos(%d, %d) line %d out of 1..%d", what, line, col, gl, len(srcLines))
			}
			end := len(src)
			if gl < len(srcLines) {
				end = srcLines[gl]
			}
			if maxCol := utf8.RuneCount(src[srcLines[gl-1]:end]) + 1; gc < 1 || gc > maxCol {
				t.Fatalf("%s: SourcePos(%d, %d) col %d out of 1..%d", what, line, col, gc, maxCol)
			}
		}
		for _, p := range res.Problems {
			if p.Line < 1 || p.Line > len(srcLines) || p.Col < 1 {
				t.Fatalf("problem out of range: %v", p)
			}
		}
		outLines := lineStarts(res.Text)
		for l := range outLines {
			for c := 0; c <= 6; c += 2 {
				check("line scan", l+1, c)
			}
		}
		check("past end", len(outLines)+3, 1000)
		var doc yaml.Node
		if yaml.Unmarshal(res.Text, &doc) == nil {
			var walk func(n *yaml.Node)
			walk = func(n *yaml.Node) {
				check("yaml node", n.Line, n.Column)
				for _, c := range n.Content {
					walk(c)
				}
			}
			walk(&doc)
		}
	})
}
