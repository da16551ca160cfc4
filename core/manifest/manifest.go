// Package manifest turns the manifests: list of an apply: or delete: step
// into Kubernetes objects: inline YAML, local files, HTTP(S) URLs and local
// kustomizations built in-process. It only builds objects; sending them is
// the business of the steps.
//
// Every source may hold several YAML (or JSON) documents. They are split
// and decoded exactly as kubectl splits and decodes them, by package
// kubeyaml, the one splitter every command uses: YAML converted to JSON by
// sigs.k8s.io/yaml, so YAML 1.1 scalars such as yes/no are booleans, and
// numbers become int64 or float64. Empty documents (only whitespace or
// comments) are skipped, documents of a *List kind holding items are
// expanded into their items, and every object must have apiVersion, kind
// and metadata.name (or metadata.generateName). A local file is read as
// kubectl reads one (a byte order mark dropped, UTF-16 converted). Errors
// say which source and which document:
//
//	manifests[1] (file ./crds.yaml), document 2 (line 17): missing metadata.name
package manifest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/fetch"
	"khook.io/core/manifest/kubeyaml"
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
		data = kubeyaml.FileText(b)
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
		return nil, sourceError(where, err)
	}
	return objs, nil
}

// sourceError names the source in front of each of its documents'
// problems.
func sourceError(where string, err error) error {
	var list kubeyaml.Errors
	if !errors.As(err, &list) {
		return fmt.Errorf("%s, %w", where, err)
	}
	errs := make([]error, len(list))
	for i, de := range list {
		errs[i] = fmt.Errorf("%s, %w", where, de)
	}
	return errors.Join(errs...)
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

// DocumentError is a problem with one document of a source (see
// kubeyaml.DocumentError).
type DocumentError = kubeyaml.DocumentError

// Decode splits data into YAML (or JSON) documents and decodes each
// exactly as kubectl does (see package kubeyaml), skipping empty
// documents and expanding Lists. Every object is checked for apiVersion,
// kind and metadata.name or generateName. The error lists every problem
// (a kubeyaml.Errors).
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	return kubeyaml.Decode(data)
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
