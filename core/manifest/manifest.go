// Package manifest turns the manifests: list of an apply: or delete: step
// into Kubernetes objects: inline YAML, local files, HTTP(S) URLs and local
// kustomizations built in-process. It only builds objects; sending them is
// the business of the steps.
//
// Every source may hold several YAML (or JSON) documents separated by
// "---". Documents are decoded the way kubectl decodes them (YAML converted
// to JSON by sigs.k8s.io/yaml, so YAML 1.1 scalars such as yes/no are
// booleans, and numbers become int64 or float64). Empty documents (only
// whitespace or comments) are skipped, documents of a *List kind holding
// items are expanded into their items, and every object must have
// apiVersion, kind and metadata.name (or metadata.generateName). Errors say
// which source and which document:
//
//	manifests[1] (file ./crds.yaml), document 2: missing metadata.name
package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"khook.io/core/fetch"
	"khook.io/core/redact"
	"khook.io/core/spec"
)

// Load reads every source in order and returns their objects in order:
// the documents of each source as written (a kustomization in kustomize's
// output order), List items in place of their List. file: and kustomize:
// paths are relative to baseDir (absolute paths stay); url: sources are
// fetched with client (nil: http.DefaultClient), bounded by ctx.
func Load(ctx context.Context, sources []spec.ManifestSource, baseDir string, client *http.Client) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for i, src := range sources {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		objs, err := LoadSource(ctx, i, src, baseDir, client)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// LoadSource reads the source at index i of a manifests list.
func LoadSource(ctx context.Context, i int, src spec.ManifestSource, baseDir string, client *http.Client) ([]*unstructured.Unstructured, error) {
	where := Describe(i, src)
	var data []byte
	switch {
	case src.Inline != "":
		data = []byte(src.Inline)
	case src.File != "":
		b, err := os.ReadFile(spec.Resolve(baseDir, src.File))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, pathError(err))
		}
		data = b
	case src.URL != "":
		b, err := fetch.Get(ctx, client, src.URL)
		if err != nil {
			// fetch's errors name the URL, which where already does
			return nil, fmt.Errorf("%s: %w", where, trimFetchPrefix(err, src.URL))
		}
		data = b
	case src.Kustomize != "":
		b, err := Kustomize(ctx, spec.Resolve(baseDir, src.Kustomize))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		data = b
	default:
		return nil, fmt.Errorf("%s: empty manifests entry: want one of inline, file, url or kustomize", where)
	}
	objs, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s, %w", where, err)
	}
	return objs, nil
}

// Describe names source i of a manifests list for messages:
// manifests[0] (inline), manifests[1] (file ./a.yaml), manifests[2] (url
// https://host/x.yaml, without credentials), manifests[3] (kustomize ./k).
func Describe(i int, src spec.ManifestSource) string {
	switch {
	case src.Inline != "":
		return fmt.Sprintf("manifests[%d] (inline)", i)
	case src.File != "":
		return fmt.Sprintf("manifests[%d] (file %s)", i, src.File)
	case src.URL != "":
		return fmt.Sprintf("manifests[%d] (url %s)", i, redact.StripURLUserinfo(src.URL))
	case src.Kustomize != "":
		return fmt.Sprintf("manifests[%d] (kustomize %s)", i, src.Kustomize)
	}
	return fmt.Sprintf("manifests[%d]", i)
}

// DocumentError is a problem with one document of a source.
type DocumentError struct {
	// Document is 1-based, counting every document of the source (empty
	// ones included), like an editor shows them; Item is the 1-based index
	// in a List's items, 0 for a plain document.
	Document int
	Item     int
	// Line is the 1-based line where the document's content starts.
	Line int
	Err  error
}

func (e *DocumentError) Error() string {
	where := fmt.Sprintf("document %d", e.Document)
	if e.Line > 0 {
		where += fmt.Sprintf(" (line %d)", e.Line)
	}
	if e.Item > 0 {
		where += fmt.Sprintf(", item %d", e.Item)
	}
	return where + ": " + e.Err.Error()
}

func (e *DocumentError) Unwrap() error { return e.Err }

// Decode splits data into YAML (or JSON) documents and decodes each like
// kubectl does, skipping empty documents and expanding Lists. Every object
// is checked for apiVersion, kind and metadata.name or generateName.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, d := range splitDocuments(data) {
		objs, err := decodeDocument(d.data)
		if err != nil {
			var de *DocumentError
			if !errors.As(err, &de) {
				de = &DocumentError{Err: err}
			}
			de.Document, de.Line = d.index, d.line
			return nil, de
		}
		out = append(out, objs...)
	}
	return out, nil
}

type document struct {
	index int // 1-based
	line  int // 1-based line of its first content line
	data  []byte
}

// splitDocuments splits a YAML stream on "---" lines the way kubectl's
// YAML reader does (a line that is "---" plus optional trailing
// whitespace), numbering documents like a YAML parser: an explicit "---"
// starts a document even when it is empty, and text before the first
// "---" is a document only when it holds more than comments.
func splitDocuments(data []byte) []document {
	var (
		docs     []document
		cur      []byte
		start    = 1     // line where cur starts
		explicit = false // cur was opened by a ---
		lineNo   = 0
	)
	emit := func() {
		first := firstContentLine(cur)
		if !explicit && first == 0 {
			return // blank lines and comments before the first ---
		}
		line := start
		if first > 0 {
			line = start + first - 1
		}
		docs = append(docs, document{index: len(docs) + 1, line: line, data: cur})
	}
	for rest := data; len(rest) > 0; {
		var line []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			line, rest = rest, nil
		}
		lineNo++
		if isSeparator(line) {
			emit()
			cur, explicit, start = nil, true, lineNo+1
			continue
		}
		cur = append(cur, line...)
	}
	emit()
	return docs
}

func isSeparator(line []byte) bool {
	return bytes.HasPrefix(line, []byte("---")) && len(bytes.TrimSpace(line[3:])) == 0
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

func decodeDocument(raw []byte) ([]*unstructured.Unstructured, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	js, err := utilyaml.ToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	var v any
	if err := utiljson.Unmarshal(js, &v); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	if v == nil {
		return nil, nil // only comments, or an explicit null
	}
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

// SetNamespace fills obj's namespace the way kubectl apply -n does: a
// namespaced object without a namespace gets ns; one with a namespace
// keeps it, even when it differs from ns; a cluster-scoped object loses
// any namespace written on it (the API server ignores it, and keeping it
// would make every client-side apply see a difference).
func SetNamespace(obj *unstructured.Unstructured, namespaced bool, ns string) {
	switch {
	case !namespaced:
		if obj.GetNamespace() != "" {
			obj.SetNamespace("")
		}
	case obj.GetNamespace() == "":
		obj.SetNamespace(ns)
	}
}

// IsCRD reports whether gvk is a CustomResourceDefinition.
func IsCRD(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition"
}

// IsNamespace reports whether gvk is a core Namespace.
func IsNamespace(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "" && gvk.Kind == "Namespace"
}

// Ref names an object for messages, kubectl style: Kind/name, or
// Kind/generateName* for an object named by the server.
func Ref(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if name == "" && obj.GetGenerateName() != "" {
		name = obj.GetGenerateName() + "*"
	}
	return obj.GetKind() + "/" + name
}

// pathError drops the path from an fs error: the source description
// already names the file as the user wrote it.
func pathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// trimFetchPrefix drops "fetch <url>: " from a fetch error, keeping the
// chain for errors.Is.
func trimFetchPrefix(err error, rawURL string) error {
	prefix := "fetch " + redact.StripURLUserinfo(rawURL) + ": "
	if msg := err.Error(); strings.HasPrefix(msg, prefix) {
		return &trimmedError{msg: strings.TrimPrefix(msg, prefix), err: err}
	}
	return err
}

type trimmedError struct {
	msg string
	err error
}

func (e *trimmedError) Error() string { return e.msg }
func (e *trimmedError) Unwrap() error { return e.err }
