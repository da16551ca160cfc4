package vars

import (
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// TestYAMLColumnUnit pins what go.yaml.in/yaml/v3 reports: 1-based lines
// and columns, columns counted in runes (not bytes), BOM not counted.
func TestYAMLColumnUnit(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("\xEF\xBB\xBFé: x\nb: [é, ü, k]\n"), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Content[0]
	if k := m.Content[0]; k.Line != 1 || k.Column != 1 {
		t.Errorf("key after BOM at %d:%d, want 1:1", k.Line, k.Column)
	}
	seq := m.Content[3]
	// "b: [é, ü, k]": in runes é=5 ü=8 k=11; in bytes it would be 5, 9, 13.
	for i, want := range []int{5, 8, 11} {
		if got := seq.Content[i].Column; got != want {
			t.Errorf("item %d column = %d, want %d (runes)", i, got, want)
		}
	}
}

// find returns the 1-based line and rune column of the first occurrence of
// needle in text.
func find(t *testing.T, text, needle string) (int, int) {
	t.Helper()
	i := strings.Index(text, needle)
	if i < 0 {
		t.Fatalf("%q not found", needle)
	}
	before := text[:i]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}

// nodes returns every node of a document, depth first.
func nodes(n *yaml.Node) []*yaml.Node {
	out := []*yaml.Node{n}
	for _, c := range n.Content {
		out = append(out, nodes(c)...)
	}
	return out
}

func TestSourcePosWithYAML(t *testing.T) {
	src := "" +
		"first: é ${SHORT}\n" + // 1
		"list: ${FLOW}\n" + // 2
		"after: ü\n" + // 3
		"nested:\n" + // 4
		"  key: ${SHORT}${SHORT} tail\n" + // 5
		"  ünï: ${ FLOW2 | trim }\n" + // 6
		"  esc: \"$${x} ${SHORT} ß\"\n" + // 7
		"  block: |\n" + // 8
		"    ${BLOCK}\n" + // 9
		"    ßend\n" + // 10
		"last: end # ${SHORT}\n" // 11
	set := testSet(t, nil, "SHORT=ßß", "FLOW=[one,\n  two,\n  k3: three]", "FLOW2=  {aa: 1,\n   bb: 2}  ", "BLOCK=b1\n    b2\n    b3")
	res := Substitute([]byte(src), set, nil)
	if len(res.Problems) > 0 {
		t.Fatal(res.Problems)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(res.Text, &doc); err != nil {
		t.Fatalf("%v\n%s", err, res.Text)
	}
	// Every node whose text appears literally in the source (a key, or a
	// value not produced by substitution) maps back exactly there.
	literal := map[string]string{
		"first": "first:", "list": "list:", "after": "after:", "ü": "ü\n", "nested": "nested:",
		"key": "key:", "ünï": "ünï:", "esc": "esc:", "block": "block:", "last": "last:", "end": "end #",
	}
	// Nodes inside a substituted value map to its reference's "${".
	inside := map[string]string{
		"one": "${FLOW}", "two": "${FLOW}", "k3": "${FLOW}", "three": "${FLOW}",
		"aa": "${ FLOW2", "1": "${ FLOW2", "bb": "${ FLOW2", "2": "${ FLOW2",
		"é ßß":      "é ${SHORT}", // starts with literal text
		"ßßßß tail": "${SHORT}${SHORT}",
		"${x} ßß ß": `"$${x}`,
	}
	seen := 0
	for _, n := range nodes(&doc) {
		if n.Kind != yaml.ScalarNode {
			continue
		}
		var needle string
		if s, ok := literal[n.Value]; ok {
			needle = s
		} else if s, ok := inside[n.Value]; ok {
			needle = s
		} else if strings.HasPrefix(n.Value, "b1") {
			// A block scalar's node starts at its indicator "|", which
			// is literal.
			needle = "|\n    ${BLOCK}"
		} else {
			continue
		}
		wl, wc := find(t, src, needle)
		if gl, gc := res.SourcePos(n.Line, n.Column); gl != wl || gc != wc {
			t.Errorf("node %q at text %d:%d maps to %d:%d, want %d:%d", n.Value, n.Line, n.Column, gl, gc, wl, wc)
		}
		seen++
	}
	if seen != 23 {
		t.Errorf("checked %d nodes, want 23", seen)
	}
}

func TestSourcePosDirect(t *testing.T) {
	set := testSet(t, nil, "M=x\ny\nz", "S=ß", "E=")
	tests := []struct {
		name, src string
		line, col int // in Text
		wl, wc    int // in source
	}{
		{"identity", "a: b\nc: d\n", 2, 4, 2, 4},
		{"before value", "a ${M} b\nc\n", 1, 2, 1, 2},
		{"at value start", "a ${M} b\nc\n", 1, 3, 1, 3},
		{"inside value first line", "a ${M} b\nc\n", 1, 4, 1, 3},
		{"inside value middle line", "a ${M} b\nc\n", 2, 1, 1, 3},
		{"inside value last line", "a ${M} b\nc\n", 3, 1, 1, 3},
		{"right after value", "a ${M} b\nc\n", 3, 2, 1, 7},
		{"after value same line", "a ${M} b\nc\n", 3, 3, 1, 8},
		{"line after value", "a ${M} b\nc\n", 4, 1, 2, 1},
		{"multibyte before", "ßß ${S} ü ${S}\n", 1, 6, 1, 9},
		{"multibyte after", "ßß ${S} ü ${S}\n", 1, 8, 1, 11},
		{"empty value", "k: ${E}v\n", 1, 4, 1, 4},
		{"escape", "a $${b} c\n", 1, 5, 1, 6},
		{"crlf", "a: ${M}\r\nb: 1\r\n", 4, 1, 2, 1},
		{"bom", "\xEF\xBB\xBFk: ${S} v\n", 1, 6, 1, 9},
		{"lone cr", "a\rb: ${M}\rc\r", 5, 1, 3, 1},
		{"clamp line high", "a\nb\n", 99, 1, 3, 1},
		{"clamp line low", "a\nb\n", -3, 1, 1, 1},
		{"clamp col high", "ab\ncd\n", 1, 99, 1, 3},
		{"clamp col low", "ab\ncd\n", 2, 0, 2, 1},
		{"empty text", "", 1, 1, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Substitute([]byte(tt.src), set, nil)
			if len(res.Problems) > 0 {
				t.Fatal(res.Problems)
			}
			if gl, gc := res.SourcePos(tt.line, tt.col); gl != tt.wl || gc != tt.wc {
				t.Errorf("SourcePos(%d, %d) = %d:%d, want %d:%d (text %q)", tt.line, tt.col, gl, gc, tt.wl, tt.wc, res.Text)
			}
		})
	}
}

func TestProblemPositionsWithBOMAndCRLF(t *testing.T) {
	res := Substitute([]byte("\xEF\xBB\xBFa: ${X}\r\nü: ${Y}\r\n"), nil, nil)
	if len(res.Problems) != 2 || res.Problems[0].String()[:4] != "1:4:" || res.Problems[1].String()[:4] != "2:4:" {
		t.Fatalf("problems = %v", res.Problems)
	}
}
