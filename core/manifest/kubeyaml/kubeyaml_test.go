package kubeyaml

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf16"

	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// kubectlRead is what kubectl's builder reads from a stream: the loop of
// cli-runtime's StreamVisitor.Visit (pkg/resource/visitor.go) over
// apimachinery's YAMLOrJSONDecoder, keeping the raw JSON of every
// document it visits, up to the error that stops it.
func kubectlRead(data []byte) ([][]byte, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out [][]byte
	for {
		ext := runtime.RawExtension{}
		if err := d.Decode(&ext); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		ext.Raw = bytes.TrimSpace(ext.Raw)
		if len(ext.Raw) == 0 || bytes.Equal(ext.Raw, []byte("null")) {
			continue
		}
		out = append(out, ext.Raw)
	}
}

// kubectlReadFile is kubectlRead behind cli-runtime's FileVisitor, which
// reads a file through a BOM-aware UTF-8 decoder.
func kubectlReadFile(data []byte) ([][]byte, error) {
	b, err := io.ReadAll(transform.NewReader(bytes.NewReader(data), unicode.BOMOverride(unicode.UTF8.NewDecoder())))
	if err != nil {
		return nil, err
	}
	return kubectlRead(b)
}

// khookRead is the same through Split: the JSON of every document, up to
// the first problem.
func khookRead(data []byte) ([][]byte, error) {
	docs, err := Split(data)
	var out [][]byte
	for _, d := range docs {
		js, derr := d.toJSON()
		if derr != nil {
			return out, derr
		}
		if js != nil {
			out = append(out, js)
		}
	}
	return out, err
}

func isSecondDocument(err error) bool {
	var le *LineError
	return errors.As(err, &le) && strings.HasPrefix(le.What, "content after the document end marker")
}

// sameAsKubectl checks that Split and Decode read data as kubectl does:
// the same documents, to the byte, and an error where kubectl stops. The
// one difference allowed is an error where kubectl silently reads less
// than a chunk holds.
func sameAsKubectl(t *testing.T, data []byte, want [][]byte, kerr error) {
	t.Helper()
	got, err := khookRead(data)
	if errors.Is(err, errAlign) {
		t.Fatalf("%q: %v", data, err)
	}
	prefix := isPrefix(got, want)
	if !prefix {
		// YAML keys that convert to the same JSON key ("0", 0 and 0.0)
		// make sigs.k8s.io/yaml's output depend on Go's map order: accept
		// khook's reading when kubectl reads the same on another try
		for range 50 {
			if w, _ := kubectlRead(data); isPrefix(got, w) && len(w) == len(want) {
				want, prefix = w, true
				break
			}
		}
	}
	switch {
	case isSecondDocument(err):
		// kubectl reads the first document of the chunk and drops the rest
		if !prefix || len(got) == len(want) && kerr == nil {
			t.Fatalf("%q: khook says %v, but kubectl reads %q (%v), not more than khook's %q", data, err, want, kerr, got)
		}
	case kerr != nil:
		// nothing is applied either way; khook may check the lines before
		// an invalid separator, which kubectl drops unread
		if err == nil || !prefix && !isPrefix(want, got) {
			t.Fatalf("%q: kubectl reads %q and stops with %v; khook reads %q, error %v", data, want, kerr, got, err)
		}
	default:
		if err != nil || !prefix || len(got) != len(want) {
			t.Fatalf("%q: kubectl reads %q; khook reads %q, error %v", data, want, got, err)
		}
	}
}

func isPrefix(got, want [][]byte) bool {
	if len(got) > len(want) {
		return false
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			return false
		}
	}
	return true
}

func cm(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

func cmJSON(name string) string {
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"}}`
}

func names(t *testing.T, data []byte) (string, error) {
	t.Helper()
	objs, err := Decode(data)
	var s []string
	for _, o := range objs {
		s = append(s, o.GetName())
	}
	return strings.Join(s, " "), err
}

var a, b = cm("a"), cm("b")

// separatorCases are the forms a stream's documents can be separated (or
// not) by. want is the names of the objects read, or err a part of the
// error (which always names the line).
var separatorCases = []struct {
	name, in, want, err string
}{
	{"plain", a + "---\n" + b, "a b", ""},
	{"comment after the separator", a + "--- # the second one\n" + b, "a b", ""},
	{"comment without a space", a + "---#c\n" + b, "a b", ""},
	{"trailing spaces", a + "---   \n" + b, "a b", ""},
	{"trailing tab", a + "---\t\n" + b, "a b", ""},
	{"trailing tab and comment", a + "---\t# c\n" + b, "a b", ""},
	{"leading and trailing separators", "---\n" + a + "---\n" + b + "---\n", "a b", ""},
	{"separators only", "---\n---\n--- # c\n", "", ""},
	{"no final line end", a + "---\n" + strings.TrimSuffix(b, "\n"), "a b", ""},
	{"separator without a line end", a + "---", "a", ""},
	{"empty and comment-only documents", "# header\n---\n---\n# only a comment\n---\n\n---\n" + a + "---\n   \n---\n" + b, "a b", ""},
	{"null documents", "~\n---\n" + a + "---\nnull\n", "a", ""},
	{"document end marker", a + "...\n---\n" + b, "a b", ""},
	{"document end marker then comments", a + "...\n# trailing\n", "a", ""},
	{"document end markers", a + "...\n...\n", "a", ""},
	{"document end marker then a document", a + "...\n" + b, "", `document 1: content after the document end marker "..." at line 5`},
	{"document end marker with a comment then a document", "---\n" + a + "... # end\n" + b, "", `document 1: content after the document end marker "..." at line 6`},
	{"second document after an end marker in a later document", a + "---\n" + b + "...\n" + cm("c") + "---\n" + cm("d"), "", `document 2: content after the document end marker "..." at line 10`},
	{"document end marker alone", a + "---\n...\n", "", "document 2: invalid YAML at line 6"},
	{"indented separator in a block scalar", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  x: |\n    ---\n    ...\n    --- # c\n", "a", ""},
	{"CRLF line ends", strings.ReplaceAll(a+"--- # c\n"+b+"---\n", "\n", "\r\n"), "a b", ""},
	{"CRLF separator in LF text", a + "---\r\n" + b, "a b", ""},
	{"byte order mark", "\ufeff" + a + "---\n" + b, "a b", ""},
	{"byte order mark before a separator", "\ufeff---\n" + a + "---\n" + b, "a b", ""},
	{"tagged separator", a + "--- !tag\n" + b, "", `invalid document separator at line 5: "--- !tag"`},
	{"text after the separator", a + "---text\n" + b, "", `invalid document separator at line 5: "---text"`},
	{"four dashes", a + "----\n" + b, "", `invalid document separator at line 5: "----"`},
	{"block scalar on the separator line", "--- |\n  text\n", "", `invalid document separator at line 1: "--- |"`},
	{"flow mapping on the separator line", a + "--- {a: 1}\n", "", `invalid document separator at line 5: "--- {a: 1}"`},
	{"invalid separator after a valid document", a + "---\n" + b + "---\n" + "--- x\n", "", `invalid document separator at line 11: "--- x"`},
	{"JSON document", cmJSON("a"), "a", ""},
	{"JSON documents", cmJSON("a") + "\n" + cmJSON("b") + "\n", "a b", ""},
	{"JSON documents on one line", cmJSON("a") + cmJSON("b") + cmJSON("c"), "a b c", ""},
	{"JSON then YAML", cmJSON("a") + "\n---\n" + b, "a b", ""},
	{"JSON then YAML without a separator", cmJSON("a") + "\n" + b, "a b", ""},
	{"two JSON documents then YAML", cmJSON("a") + "\n" + cmJSON("b") + "\n---\n" + cm("c"), "", "document 3: invalid JSON at line 3"},
	{"JSON after a comment is YAML", "# c\n" + cmJSON("a") + "\n", "a", ""},
	{"JSON after a separator is YAML", "---\n" + cmJSON("a") + "\n---\n" + cmJSON("b") + "\n", "a b", ""},
	{"YAML flow mapping", "{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n---\n" + b, "a b", ""},
	{"YAML flow mapping after a separator", a + "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n", "a b", ""},
	{"invalid YAML in the second document", a + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  labels: [x\n---\n" + cm("c"), "", "document 2: invalid YAML at line 10: did not find expected ',' or ']'"},
	{"mis-indented key", a + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n   labels: {}\n", "", "document 2: invalid YAML at line 10: mapping values are not allowed in this context"},
	{"missing sequence indicator", "apiVersion: v1\nkind: List\nitems:\n  - " + cmJSON("a") + "\n  x: 1\n", "", "document 1: invalid YAML at line 5: did not find expected '-' indicator"},
	{"error on the first line", "a: b: c\n", "", "document 1: invalid YAML at line 1: mapping values are not allowed in this context"},
	{"missing fields", "# c\n---\n" + a + "---\n\nkind: ConfigMap\n", "", "document 2 (line 9): missing apiVersion, metadata.name"},
	{"list expanded", "apiVersion: v1\nkind: List\nitems:\n- " + cmJSON("a") + "\n- " + cmJSON("b") + "\n", "a b", ""},
}

func TestSplitLikeKubectl(t *testing.T) {
	for _, tc := range separatorCases {
		t.Run(tc.name, func(t *testing.T) {
			want, kerr := kubectlRead([]byte(tc.in))
			sameAsKubectl(t, []byte(tc.in), want, kerr)
			got, err := names(t, []byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("objects %q, want %q", got, tc.want)
			}
		})
	}
}

// The case of the issue: before, "--- # c" was no separator, the two
// documents were one chunk and sigs.k8s.io/yaml read the first only.
func TestCommentedSeparatorKeepsEveryObject(t *testing.T) {
	in := a + "--- # second\n" + b + "---  # third\n" + cm("c")
	got, err := names(t, []byte(in))
	if err != nil || got != "a b c" {
		t.Fatalf("objects %q, error %v; want a b c", got, err)
	}
}

func TestDocumentNumbersAndLines(t *testing.T) {
	in := "# header\n\n---\n" + a + "---\n---\n# only a comment\n\n" + b + "---\n" + cmJSON("c") + "\n"
	docs, err := Split([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	type doc struct{ index, line, start int }
	var got []doc
	for _, d := range docs {
		got = append(got, doc{d.Index, d.Line, d.Start})
	}
	// the header is decoded (as kubectl does) but is no document; the
	// empty document between the two "---" lines counts
	want := []doc{{1, 1, 1}, {1, 4, 4}, {3, 12, 9}, {4, 17, 17}}
	if len(got) != len(want) {
		t.Fatalf("documents %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("documents %v, want %v", got, want)
		}
	}
}

func TestJSONErrorLines(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{cmJSON("a") + "\n" + cmJSON("b") + "\n{\"x\": tru}\n", "document 3: invalid JSON at line 3: invalid character"},
		{cmJSON("a") + "\n" + cmJSON("b") + "\n{\"x\": \n", "document 3: invalid JSON at line 3: unexpected EOF"},
		{cmJSON("a") + "\n{\"b\": 1,\n\"c\": 2,\n\"d\" 3}\n", "document 2: invalid YAML at line 4"},
	} {
		want, kerr := kubectlRead([]byte(tc.in))
		sameAsKubectl(t, []byte(tc.in), want, kerr)
		_, err := Decode([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want it to contain %q", tc.in, err, tc.err)
		}
	}
}

func utf16LE(s string) []byte {
	u := utf16.Encode([]rune("\ufeff" + s))
	out := make([]byte, 2*len(u))
	for i, r := range u {
		binary.LittleEndian.PutUint16(out[2*i:], r)
	}
	return out
}

// Files are read as kubectl's FileVisitor reads them.
func TestFileText(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"UTF-8 byte order mark", []byte("\ufeff" + a + "---\n" + b), "a b"},
		{"UTF-8 byte order mark before JSON documents", []byte("\ufeff" + cmJSON("a") + cmJSON("b")), "a b"},
		{"UTF-16 with a byte order mark", utf16LE(a + "--- # c\r\n" + b), "a b"},
		{"plain", []byte(a), "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, kerr := kubectlReadFile(tc.in)
			sameAsKubectl(t, FileText(tc.in), want, kerr)
			got, err := names(t, FileText(tc.in))
			if err != nil || got != tc.want {
				t.Fatalf("objects %q, error %v; want %q", got, err, tc.want)
			}
		})
	}
}

// FuzzSplitLikeKubectl compares Split and Decode with kubectl's reader on
// arbitrary streams (go test -fuzz FuzzSplitLikeKubectl ./manifest/kubeyaml).
func FuzzSplitLikeKubectl(f *testing.F) {
	for _, tc := range separatorCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte("a: 1\n---\n{\"b\": 2}\n...\n--- #\n\r\n---\tx\n"))
	f.Add([]byte(" {\"a\":1} \t{\"b\":2}\n c: 3\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, kerr := kubectlRead(data)
		sameAsKubectl(t, data, want, kerr)
		if _, err := Decode(data); errors.Is(err, errAlign) {
			t.Fatal(err)
		}
	})
}
