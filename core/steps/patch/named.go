package patch

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// fieldPath is a field's path as segments: {"spec", "replicas"}. Keys may
// hold dots (annotation keys), so paths are compared by segment, never as
// the dotted strings ChangedFields prints.
type fieldPath []string

func (p fieldPath) String() string { return "." + strings.Join(p, ".") }

// within reports whether p lies within q or q within p: one is a prefix
// of the other, segment by segment.
func (p fieldPath) within(q fieldPath) bool {
	n := min(len(p), len(q))
	return reflect.DeepEqual([]string(p[:n]), []string(q[:n]))
}

// changedPaths lists where after differs from before, ignoring the fields
// every write changes (ignoredFields). Maps are compared key by key, lists
// and scalars whole.
func changedPaths(before, after *unstructured.Unstructured) []fieldPath {
	b, a := before.DeepCopy().Object, after.DeepCopy().Object
	for _, f := range ignoredFields {
		unstructured.RemoveNestedField(b, f...)
		unstructured.RemoveNestedField(a, f...)
	}
	var out []fieldPath
	diffPaths(nil, b, a, &out)
	return out
}

func diffPaths(prefix fieldPath, b, a any, out *[]fieldPath) {
	bm, bok := b.(map[string]any)
	am, aok := a.(map[string]any)
	if bok && aok {
		keys := map[string]bool{}
		for k := range bm {
			keys[k] = true
		}
		for k := range am {
			keys[k] = true
		}
		for k := range keys {
			diffPaths(append(prefix[:len(prefix):len(prefix)], k), bm[k], am[k], out)
		}
		return
	}
	if !reflect.DeepEqual(b, a) {
		*out = append(*out, prefix)
	}
}

// namedPaths lists the fields a patch names: for a strategic or merge
// patch, every leaf of the document (a scalar, a list, null or an empty
// map); a strategic directive ($patch, $retainKeys, $setElementOrder/...,
// $deleteFromPrimitiveList/...) names the map it stands in. For a JSON
// patch, the path (and the from) of every operation but test.
func namedPaths(typ types.PatchType, body []byte) ([]fieldPath, error) {
	if typ == types.JSONPatchType {
		return jsonPatchPaths(body)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("patch body: %w", err)
	}
	var out []fieldPath
	leaves(nil, doc, &out)
	return out, nil
}

func leaves(prefix fieldPath, v any, out *[]fieldPath) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		*out = append(*out, prefix)
		return
	}
	for k, sub := range m {
		if strings.HasPrefix(k, "$") {
			*out = append(*out, prefix)
			continue
		}
		leaves(append(prefix[:len(prefix):len(prefix)], k), sub, out)
	}
}

func jsonPatchPaths(body []byte) ([]fieldPath, error) {
	var ops []struct {
		Op   string  `json:"op"`
		Path string  `json:"path"`
		From *string `json:"from"`
	}
	if err := json.Unmarshal(body, &ops); err != nil {
		return nil, fmt.Errorf("patch body: %w", err)
	}
	var out []fieldPath
	for _, op := range ops {
		if op.Op == "test" {
			continue
		}
		out = append(out, pointerPath(op.Path))
		if op.From != nil {
			out = append(out, pointerPath(*op.From))
		}
	}
	return out, nil
}

// pointerPath turns a JSON pointer (RFC 6901) into segments: "/a~1b/0" is
// {"a/b", "0"}.
func pointerPath(ptr string) fieldPath {
	if ptr == "" {
		return fieldPath{}
	}
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return segs
}

// patchChanged reports whether a patch changed the object: a field it
// names (or one within it) differs between live and the patch's answer,
// status aside. What a controller writes meanwhile elsewhere (a
// Deployment's revision annotation, any status) is not the patch's doing.
func patchChanged(named []fieldPath, live, out *unstructured.Unstructured) bool {
	return len(patchChanges(named, live, out)) > 0
}

// patchChanges lists, sorted, the fields patchChanged counts: those that
// differ between live and out within a field the patch names, status
// aside.
func patchChanges(named []fieldPath, live, out *unstructured.Unstructured) []string {
	var changed []string
	for _, c := range changedPaths(live, out) {
		if len(c) > 0 && c[0] == "status" {
			continue
		}
		if slices.ContainsFunc(named, c.within) {
			changed = append(changed, c.String())
		}
	}
	sort.Strings(changed)
	return changed
}
