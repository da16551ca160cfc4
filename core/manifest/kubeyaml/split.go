// Package kubeyaml reads a stream of Kubernetes manifests exactly as
// kubectl does, and says where each document sits in it. It is the one
// splitter of khook: validate, plan (offline and live), diff, apply and
// destroy read every manifest source (inline, file, url, kustomize output,
// a chart's rendered manifest, delete.manifests) through it.
//
// kubectl's builder (k8s.io/cli-runtime/pkg/resource, StreamVisitor) reads
// a stream with apimachinery's YAMLOrJSONDecoder:
//
//   - a stream whose first 4096 bytes start (after white space) with "{"
//     is read as a sequence of JSON values; when the second value fails to
//     parse, the rest of the stream is read as YAML (after two or more
//     values, a failure is an error);
//   - otherwise, and for that rest, apimachinery's YAMLReader cuts the
//     stream at every line that starts with "---" and has nothing after it
//     but white space or a comment ("--- # c" included); any other line
//     starting with "---" ("---text", "--- !tag", "----") is an error; CRLF
//     line ends are read as LF; "..." is not a separator;
//   - each chunk is converted to JSON by sigs.k8s.io/yaml, which decodes
//     only the first YAML document of a chunk; a chunk that is empty,
//     comments only or null is skipped.
//
// Split reuses YAMLReader itself for the cutting and only adds where each
// chunk starts. Decode then converts each document as kubectl does, and
// where kubectl would silently read less than the chunk holds (a second
// document after a "..." end marker) it returns an error instead.
package kubeyaml

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Document is one document of a stream, as kubectl cuts it.
type Document struct {
	// Index is 1-based and counts documents as an editor shows them: every
	// "---" opens one (empty ones included), and text before the first
	// "---" is one only when it holds more than comments. A JSON value is
	// one document.
	Index int
	// Line is the 1-based line of the document's first content (neither
	// blank nor a comment), or of its first line when it has none.
	Line int
	// Start is the 1-based line of Data's first line in the stream.
	Start int
	// JSON is set for a value read in kubectl's JSON stream mode: Data is
	// that value, verbatim. Otherwise Data is the YAML chunk kubectl
	// decodes (lines ending in "\n", CRLF read as LF).
	JSON bool
	Data []byte
}

// jsonPeek is how far into a stream kubectl's StreamVisitor looks to tell
// a JSON stream from a YAML one (yaml.NewYAMLOrJSONDecoder(r, 4096)).
const jsonPeek = 4096

// Split cuts data into documents exactly where kubectl does, every chunk
// kubectl decodes (one of only comments before the first "---" included:
// it has the number the next document gets). The error, a
// *DocumentError, is one that stops kubectl's reader (an invalid "---"
// line, a JSON stream that breaks after two values); the documents
// before it are returned with it, and for an invalid "---" line also the
// lines between the last document and it, which kubectl drops unread.
func Split(data []byte) ([]Document, error) {
	s := &splitter{data: data}
	from := 0
	if utilyaml.IsJSONBuffer(data[:min(len(data), jsonPeek)]) {
		var err error
		if from, err = s.json(); err != nil {
			return s.docs, err
		}
	}
	return s.docs, s.yaml(from)
}

type splitter struct {
	data  []byte
	docs  []Document
	index int   // the last document number given
	nl    []int // offsets of the "\n"s in data, built on demand
}

// lineAt returns the 1-based line of byte offset off.
func (s *splitter) lineAt(off int) int {
	if s.nl == nil {
		s.nl = make([]int, 0, bytes.Count(s.data, []byte{'\n'}))
		for i, c := range s.data {
			if c == '\n' {
				s.nl = append(s.nl, i)
			}
		}
	}
	return sort.SearchInts(s.nl, off) + 1
}

// json reads the stream as kubectl's YAMLOrJSONDecoder does in JSON mode
// and returns the offset where YAML reading takes over.
func (s *splitter) json() (int, error) {
	dec := json.NewDecoder(bytes.NewReader(s.data))
	consumed, n := 0, 0
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return len(s.data), nil
		}
		if err == nil {
			end := int(dec.InputOffset())
			line := s.lineAt(end - len(raw))
			s.index++
			s.docs = append(s.docs, Document{Index: s.index, Line: line, Start: line, JSON: true, Data: raw})
			consumed, n = end, n+1
			continue
		}
		jerr := s.jsonError(err)
		if n > 1 {
			// two JSON values make it a JSON stream: kubectl does not
			// switch to YAML any more
			return 0, jerr
		}
		// kubectl rewinds to the end of the last value and eats white
		// space up to and including the first line end, then reads YAML.
		// Its consumeWhitespace reads 4 bytes at a time: when fewer are
		// left, or they do not start with a valid rune, it gives up and
		// kubectl returns the JSON error.
		i := consumed
		for {
			if len(s.data)-i < 4 {
				return 0, jerr
			}
			r, size := utf8.DecodeRune(s.data[i : i+4])
			if r == utf8.RuneError {
				return 0, jerr
			}
			if !unicode.IsSpace(r) {
				return i, nil
			}
			i += size
			if r == '\n' {
				return i, nil
			}
		}
	}
}

func (s *splitter) jsonError(err error) *DocumentError {
	off := len(s.data)
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		// bytes read from the start of the stream, the bad one included
		off = min(int(max(syn.Offset-1, 0)), len(s.data))
	}
	line := s.lineAt(off)
	if off == len(s.data) && off > 0 && s.data[off-1] == '\n' {
		line-- // the end of a stream that ends with a line end
	}
	return &DocumentError{Document: s.index + 1, Err: &LineError{What: "invalid JSON", Line: line, Msg: err.Error()}}
}

// yaml reads data[from:] with apimachinery's YAMLReader, and finds each
// chunk's place by walking the same lines. The reader keeps every line but
// the "---" line that ends a chunk: a "---" line read while the chunk is
// still empty stays in it, at its start.
func (s *splitter) yaml(from int) error {
	rest := s.data[from:]
	base := 0 // lines before rest
	if from > 0 {
		base = s.lineAt(from - 1)
		if s.data[from-1] != '\n' {
			base-- // rest starts inside a line (after a JSON value)
		}
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(rest)))
	lines := lineCursor{rest: rest}
	for first := true; ; first = false {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		opened := false // a "---" opened the chunk's document
		if !first {
			// the "---" that ended the previous chunk
			if !lines.separator() {
				return fmt.Errorf("%w at line %d", errAlign, base+lines.n+1)
			}
			s.index++
			opened = true
		}
		start := lines.n + 1
		if err != nil {
			// the reader stopped at an invalid "---" line; the lines
			// before it are checked too, to report every problem
			pending, n, text := lines.badSeparator()
			if n == 0 {
				return fmt.Errorf("%w: %w", errAlign, err)
			}
			if len(pending) > 0 {
				s.add(pending, base+start, opened)
			}
			return &DocumentError{Err: &LineError{
				What: "invalid document separator", Line: base + n,
				Msg: fmt.Sprintf("%q: only white space or a comment may follow \"---\" on its line (kubectl reads every line starting with \"---\" as a separator)", text),
			}}
		}
		if !lines.match(chunk) {
			return fmt.Errorf("%w at line %d", errAlign, base+start)
		}
		s.add(chunk, base+start, opened)
	}
}

// add appends the document of chunk, which starts at line start (opened:
// after a "---" that ended the previous chunk).
func (s *splitter) add(chunk []byte, start int, opened bool) {
	body, skipped := chunk, 0
	if bytes.HasPrefix(chunk, []byte("---")) {
		s.index++
		opened = true
		body, skipped = chunk[bytes.IndexByte(chunk, '\n')+1:], 1
	}
	content := firstContentLine(body)
	index := s.index
	switch {
	case opened:
	case content > 0:
		s.index++ // content before the first "---" is a document
		index = s.index
	default:
		// comments before the first "---" are not a document; kubectl
		// still decodes them (to null)
		index = s.index + 1
	}
	line := start
	if content > 0 {
		line += skipped + content - 1
	}
	s.docs = append(s.docs, Document{Index: index, Line: line, Start: start, Data: chunk})
}

// errAlign means Split lost track of where YAMLReader's chunks sit: a bug.
var errAlign = errors.New("kubeyaml: internal error: cannot place a document read by the YAML reader")

// lineCursor walks the lines of a stream as bufio.Reader.ReadLine (under
// YAMLReader) returns them.
type lineCursor struct {
	rest []byte
	n    int // lines consumed
}

// peek returns the next line without its line end ("\n" or "\r\n")
// and the bytes it takes with its line end.
func (c *lineCursor) peek() (line []byte, size int, ok bool) {
	if len(c.rest) == 0 {
		return nil, 0, false
	}
	i := bytes.IndexByte(c.rest, '\n')
	if i < 0 {
		return c.rest, len(c.rest), true
	}
	line = c.rest[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, i + 1, true
}

// separator consumes the next line when it starts with "---".
func (c *lineCursor) separator() bool {
	line, size, ok := c.peek()
	if !ok || !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	c.rest, c.n = c.rest[size:], c.n+1
	return true
}

// match consumes the lines of chunk, reporting whether they are the next
// lines of the stream.
func (c *lineCursor) match(chunk []byte) bool {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		want := chunk[:i]
		chunk = chunk[i+1:]
		line, size, ok := c.peek()
		if !ok || !bytes.Equal(line, want) {
			return false
		}
		c.rest, c.n = c.rest[size:], c.n+1
	}
	return true
}

// badSeparator finds the line YAMLReader refused: the first one from the
// cursor on that starts with "---" and has more than a comment after it.
// It returns the lines before it as the reader buffered them, its 1-based
// number in the stream (0 if none) and its text.
func (c *lineCursor) badSeparator() (pending []byte, n int, text string) {
	for {
		line, size, ok := c.peek()
		if !ok {
			return nil, 0, ""
		}
		c.rest, c.n = c.rest[size:], c.n+1
		if t := strings.TrimSpace(string(line[min(3, len(line)):])); bytes.HasPrefix(line, []byte("---")) && t != "" && t[0] != '#' {
			return pending, c.n, string(line)
		}
		pending = append(append(pending, line...), '\n')
	}
}

// firstContentLine returns the 1-based line of b's first line that is
// neither blank nor a comment, or 0.
func firstContentLine(b []byte) int {
	for n := 1; len(b) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return n
		}
	}
	return 0
}
