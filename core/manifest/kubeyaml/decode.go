package kubeyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// FileText returns a local file's content as kubectl's FileVisitor reads
// it: a UTF-8 byte order mark is dropped, UTF-16 text with a byte order
// mark is converted to UTF-8, and bytes that are not UTF-8 become U+FFFD.
// (kubectl reads URLs and stdin as they are.)
func FileText(data []byte) []byte {
	out, _, err := transform.Bytes(unicode.BOMOverride(unicode.UTF8.NewDecoder()), data)
	if err != nil {
		return data // the transformers used here do not fail
	}
	return out
}

// DocumentError is a problem with one document of a stream.
type DocumentError struct {
	// Document is 1-based (see Document.Index); 0 for a problem between
	// documents, such as an invalid separator.
	Document int
	// Item is the 1-based index in a List's items, 0 for a plain document.
	Item int
	// Line is the 1-based line where the document's content starts, for a
	// problem with the object; 0 when Err is a *LineError, which says
	// where the reader stopped.
	Line int
	Err  error
}

func (e *DocumentError) Error() string {
	var where string
	if e.Document > 0 {
		where = fmt.Sprintf("document %d", e.Document)
		if e.Line > 0 {
			where += fmt.Sprintf(" (line %d)", e.Line)
		}
		if e.Item > 0 {
			where += fmt.Sprintf(", item %d", e.Item)
		}
		where += ": "
	}
	return where + e.Err.Error()
}

func (e *DocumentError) Unwrap() error { return e.Err }

// ProblemLine is the 1-based line of the stream the problem is at: where
// the reader stopped, or where the document's content starts.
func (e *DocumentError) ProblemLine() int {
	var le *LineError
	if errors.As(e.Err, &le) {
		return le.Line
	}
	return e.Line
}

// LineError is a problem found at one line while reading a stream.
type LineError struct {
	What string // "invalid YAML", "invalid document separator", ...
	Line int    // 1-based, in the stream
	Msg  string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s at line %d: %s", e.What, e.Line, e.Msg)
}

// Errors is every problem of a stream, in stream order.
type Errors []*DocumentError

func (l Errors) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap exposes each problem to errors.Is and errors.As.
func (l Errors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Decode splits data as kubectl does (see Split) and decodes every
// document to objects as kubectl does: YAML converted to JSON by
// sigs.k8s.io/yaml (so YAML 1.1 scalars such as yes/no are booleans),
// numbers as int64 or float64. Empty and null documents are skipped, a
// document of a *List kind holding items is expanded into its items, and
// every object must have apiVersion, kind and metadata.name (or
// generateName). A chunk that holds a second YAML document, which kubectl
// would silently drop, is an error. The error is an Errors listing every
// problem; the documents after one that stops the reader are not read.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := Split(data)
	var (
		out  []*unstructured.Unstructured
		errs Errors
	)
	for _, d := range docs {
		objs, derr := d.decode()
		if derr != nil {
			errs = append(errs, derr)
			continue
		}
		out = append(out, objs...)
	}
	if err != nil {
		var de *DocumentError
		if !errors.As(err, &de) {
			de = &DocumentError{Err: err}
		}
		errs = append(errs, de)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// Objects decodes the document as kubectl does (see Decode). The error is
// a *DocumentError.
func (d Document) Objects() ([]*unstructured.Unstructured, error) {
	objs, err := d.decode()
	if err != nil {
		return nil, err
	}
	return objs, nil
}

func (d Document) decode() ([]*unstructured.Unstructured, *DocumentError) {
	js, derr := d.toJSON()
	if derr != nil || js == nil {
		return nil, derr
	}
	var v any
	if err := utiljson.Unmarshal(js, &v); err != nil {
		return nil, &DocumentError{Document: d.Index, Line: d.Line, Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	objs, err := objects(v)
	if err != nil {
		var de *DocumentError
		if !errors.As(err, &de) {
			de = &DocumentError{Err: err}
		}
		de.Document, de.Line = d.Index, d.Line
		return nil, de
	}
	return objs, nil
}

// toJSON returns the JSON kubectl's StreamVisitor gets for the document,
// or nil when it skips it (empty, or null).
func (d Document) toJSON() ([]byte, *DocumentError) {
	js := d.Data
	if !d.JSON {
		j, err := yaml.YAMLToJSON(d.Data)
		if err != nil {
			return nil, d.yamlError(err)
		}
		if err := d.secondDocument(); err != nil {
			return nil, err
		}
		js = j
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || bytes.Equal(js, []byte("null")) {
		return nil, nil
	}
	return js, nil
}

// secondDocument reports a chunk that holds more than one YAML document:
// sigs.k8s.io/yaml (kubectl) reads the first and silently drops the rest.
// Without a "---" line (those end a chunk), a second document can only
// follow a "..." document end marker, so only chunks with such a line are
// parsed again, with the YAML library kubectl uses.
func (d Document) secondDocument() *DocumentError {
	end := endMarkerLine(d.Data)
	if end == 0 {
		return nil
	}
	dec := yamlv2.NewDecoder(bytes.NewReader(d.Data))
	var first any
	if err := dec.Decode(&first); err != nil {
		return nil // YAMLToJSON read it: not reached
	}
	var next any
	if err := dec.Decode(&next); errors.Is(err, io.EOF) {
		return nil
	}
	return &DocumentError{Document: d.Index, Err: &LineError{
		What: `content after the document end marker "..."`, Line: d.Start + end - 1,
		Msg: `kubectl would read only the document before it and silently drop the rest; separate documents with "---"`,
	}}
}

// endMarkerLine returns the 1-based line of chunk's first line that starts
// with "...", or 0.
func endMarkerLine(chunk []byte) int {
	if !bytes.HasPrefix(chunk, []byte("...")) && !bytes.Contains(chunk, []byte("\n...")) {
		return 0
	}
	for n := 1; len(chunk) > 0; n++ {
		if bytes.HasPrefix(chunk, []byte("...")) {
			return n
		}
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			break
		}
		chunk = chunk[i+1:]
	}
	return 0
}

// yamlError places a sigs.k8s.io/yaml (yaml.v2) error at its line in the
// stream. yaml.v2 numbers the lines of parser errors from 0 (scanner
// errors from 1) and leaves out a line 0: both are corrected here.
func (d Document) yamlError(err error) *DocumentError {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	lines := bytes.Count(d.Data, []byte{'\n'})
	if !bytes.HasSuffix(d.Data, []byte{'\n'}) {
		lines++
	}
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if n, convErr := strconv.Atoi(num); convErr == nil {
				line, msg = n, text
				if parserProblems[msg] {
					line++
				}
			}
		}
	} else if libyamlProblem(msg) {
		line = 1 // yaml.v2 leaves out the line of a problem on the first line
	}
	if line == 0 {
		// not positioned by the parser: the document's content
		line = d.Line - d.Start + 1
	}
	line = max(1, min(line, lines))
	return &DocumentError{Document: d.Index, Err: &LineError{What: "invalid YAML", Line: d.Start + line - 1, Msg: msg}}
}

// parserProblems are the problems libyaml's parser (not its scanner)
// reports, whose line yaml.v2 prints 0-based (go.yaml.in/yaml/v2
// parserc.go).
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// libyamlProblem reports whether msg comes from libyaml's parser or
// scanner, which yaml.v2 positions by line unless that line is the first.
func libyamlProblem(msg string) bool {
	if parserProblems[msg] {
		return true
	}
	for _, p := range []string{"found ", "did not find ", "could not find ", "mapping values are not allowed", "mapping keys are not allowed", "block sequence entries are not allowed"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// objects checks a decoded document: one object, or a List's items.
func objects(v any) ([]*unstructured.Unstructured, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a manifest must be a mapping, not %s", typeName(v))
	}
	if kind, _ := m["kind"].(string); strings.HasSuffix(kind, "List") {
		if items, isList := m["items"]; isList {
			return expandList(items)
		}
	}
	if err := checkObject(m); err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{{Object: m}}, nil
}

func expandList(items any) ([]*unstructured.Unstructured, error) {
	if items == nil {
		return nil, nil
	}
	list, ok := items.([]any)
	if !ok {
		return nil, fmt.Errorf("items must be a list, not %s", typeName(items))
	}
	out := make([]*unstructured.Unstructured, 0, len(list))
	for i, it := range list {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, &DocumentError{Item: i + 1, Err: fmt.Errorf("a manifest must be a mapping, not %s", typeName(it))}
		}
		if err := checkObject(m); err != nil {
			return nil, &DocumentError{Item: i + 1, Err: err}
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// checkObject requires apiVersion, kind and metadata.name or generateName.
func checkObject(m map[string]any) error {
	var missing []string
	apiVersion, _ := m["apiVersion"].(string)
	if apiVersion == "" {
		missing = append(missing, "apiVersion")
	}
	if kind, _ := m["kind"].(string); kind == "" {
		missing = append(missing, "kind")
	}
	md, _ := m["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	gen, _ := md["generateName"].(string)
	if name == "" && gen == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
		return fmt.Errorf("invalid apiVersion %q: want version or group/version", apiVersion)
	}
	if ns, ok := md["namespace"]; ok && ns != nil {
		if _, isString := ns.(string); !isString {
			return fmt.Errorf("metadata.namespace must be a string, not %s", typeName(ns))
		}
	}
	return nil
}

func typeName(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
