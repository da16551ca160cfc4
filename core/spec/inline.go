package spec

import (
	"bytes"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// blockIndex remembers where the lines of each literal block scalar
// (inline: |) sit in the parsed text, so that a problem inside one, such
// as an inline manifest's, is reported at its own line and column in the
// file rather than at the field.
type blockIndex struct {
	text   []byte
	lines  [][]byte // text's lines, split on first use
	mapPos PosMapper
	blocks map[string]blockScalar
}

// blockScalar is where a literal block scalar's value sits in the text.
type blockScalar struct {
	line   int // 1-based text line of the value's first line
	indent int // columns of indentation before each of its lines
}

func newBlockIndex(text []byte, mapPos PosMapper) *blockIndex {
	return &blockIndex{text: text, mapPos: mapPos}
}

func (b *blockIndex) textLines() [][]byte {
	if b.lines == nil {
		b.lines = bytes.Split(b.text, []byte{'\n'})
		for i, l := range b.lines {
			b.lines[i] = bytes.TrimSuffix(l, []byte{'\r'})
		}
	}
	return b.lines
}

// note records n, the value at path, when it is a literal block scalar:
// its value's line k is then the text's line n.Line+k, less the
// indentation, which the first line holding more than spaces tells.
func (b *blockIndex) note(n *yaml.Node, path string) {
	if b == nil || n.Kind != yaml.ScalarNode || n.Style&yaml.LiteralStyle == 0 {
		return
	}
	lines := b.textLines()
	for k, v := range strings.Split(n.Value, "\n") {
		if strings.TrimLeft(v, " ") == "" {
			continue
		}
		i := n.Line + k // 0-based index of the text line holding value line k
		if i >= len(lines) {
			return
		}
		t := lines[i]
		indent := len(t) - len(v)
		if indent < 0 || !bytes.HasSuffix(t, []byte(v)) || len(bytes.TrimLeft(t[:indent], " ")) != 0 {
			return // not laid out as expected: positions stay at the field
		}
		if b.blocks == nil {
			b.blocks = map[string]blockScalar{}
		}
		b.blocks[path] = blockScalar{line: n.Line + 1, indent: indent}
		return
	}
}

// InBlock returns where line (1-based) of the string at path sits in the
// file, at its first character that is not a space, when that string was
// written as a literal block scalar (inline: |). ok is false otherwise
// (other styles fold or escape their lines).
func (p *Positions) InBlock(path string, line int) (pos Pos, ok bool) {
	if p == nil || p.blocks == nil || line < 1 {
		return Pos{}, false
	}
	b, ok := p.blocks.blocks[path]
	if !ok {
		return Pos{}, false
	}
	lines := p.blocks.textLines()
	i := b.line + line - 2 // 0-based text line index
	if i >= len(lines) {
		return Pos{}, false
	}
	col := b.indent + 1
	if t := lines[i]; len(t) > b.indent {
		col += len(t[b.indent:]) - len(bytes.TrimLeft(t[b.indent:], " "))
		if col > len(t) {
			col = b.indent + 1 // a line of spaces
		}
	}
	textLine := i + 1
	if m := p.blocks.mapPos; m != nil {
		textLine, col = m(textLine, col)
	}
	return Pos{File: p.file, Line: textLine, Col: col}, true
}
