package diff

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/redact"
)

// A rotated secret is the case registered values cannot cover: after
// KHOOK_SECRET_TOKEN changes, the live object still holds the old value,
// which this run never learned. But khook knows where it wrote a secret:
// at the fields of its own object (the merged version, which holds its
// manifest as applied, or a chart rendered with its values) whose value
// holds a registered value now. Those fields held the old secret, so they
// are masked in both versions whatever they hold, and so are the same
// fields in the last-applied-configuration annotation, a copy of the
// manifest khook applied before (server-side apply as khook leaves that
// copy untouched, so the old value stays there even when the field
// itself changes).

// elem is one step of a field path: a map key, or a list item. A list
// item that is a map with a string "name" (containers, env vars, volumes,
// ports: the merge key of most Kubernetes lists) is found by that name in
// the other version, so a reordered list still pairs the right items;
// another by its index.
type elem struct {
	key    string
	item   bool
	index  int
	name   string
	byName bool
}

// FieldPath is the path to one field of an object.
type FieldPath []elem

// String is the path in jsonpath-like form: spec.containers[name=web].env[name=TOKEN].value.
func (p FieldPath) String() string { return p.format(false) }

// format writes p; with quote, a key that holds a dot, a bracket, a quote
// or a space (an annotation's, a label's), or the empty key, is quoted in
// brackets: metadata.labels["app.kubernetes.io/name"].
func (p FieldPath) format(quote bool) string {
	var b strings.Builder
	for i, e := range p {
		switch {
		case e.item && e.byName:
			fmt.Fprintf(&b, "[name=%s]", e.name)
		case e.item:
			fmt.Fprintf(&b, "[%d]", e.index)
		case quote && (strings.ContainsAny(e.key, `.[]" `) || e.key == ""):
			fmt.Fprintf(&b, "[%q]", e.key)
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e.key)
		}
	}
	return b.String()
}

// SecretFields returns the paths of obj's fields whose value holds a value
// registered with red (a string, or a number or boolean as written), in
// no particular order. These are the fields khook wrote from a secret
// variable: Prepare masks them in both versions of an object.
func SecretFields(obj *unstructured.Unstructured, red *redact.Redactor) []FieldPath {
	if obj == nil {
		return nil
	}
	return secretPaths(obj.Object, red)
}

func secretPaths(obj map[string]any, red *redact.Redactor) []FieldPath {
	var out []FieldPath
	var walk func(v any, path FieldPath)
	walk = func(v any, path FieldPath) {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				walk(y, append(path[:len(path):len(path)], elem{key: k}))
			}
		case []any:
			byName := uniqueNames(x)
			for i, y := range x {
				e := elem{item: true, index: i}
				if byName {
					e.name, e.byName = y.(map[string]any)["name"].(string), true
				}
				walk(y, append(path[:len(path):len(path)], e))
			}
		case nil:
		default:
			if len(red.Occurrences(scalar(x))) > 0 {
				out = append(out, path)
			}
		}
	}
	walk(obj, nil)
	return out
}

// uniqueNames reports whether every item of list is a map with a string
// "name", no two alike.
func uniqueNames(list []any) bool {
	seen := make(map[string]bool, len(list))
	for _, it := range list {
		m, ok := it.(map[string]any)
		if !ok {
			return false
		}
		n, ok := m["name"].(string)
		if !ok || seen[n] {
			return false
		}
		seen[n] = true
	}
	return len(list) > 0
}

// scalar is a leaf value as text.
func scalar(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// lookup returns the container of the field at path in obj, and the
// field's key or index in it; ok is false when the path is absent.
func lookup(obj map[string]any, path FieldPath) (parent any, key string, index int, ok bool) {
	var cur any = obj
	for i, e := range path {
		last := i == len(path)-1
		switch c := cur.(type) {
		case map[string]any:
			if e.item {
				return nil, "", 0, false
			}
			v, found := c[e.key]
			if !found {
				return nil, "", 0, false
			}
			if last {
				return c, e.key, 0, true
			}
			cur = v
		case []any:
			if !e.item {
				return nil, "", 0, false
			}
			k := -1
			if e.byName {
				for j, it := range c {
					if m, ok := it.(map[string]any); ok && m["name"] == e.name {
						k = j
						break
					}
				}
			} else if e.index < len(c) {
				k = e.index
			}
			if k < 0 {
				return nil, "", 0, false
			}
			if last {
				return c, "", k, true
			}
			cur = c[k]
		default:
			return nil, "", 0, false
		}
	}
	return nil, "", 0, false
}

func get(obj map[string]any, path FieldPath) (any, bool) {
	parent, key, index, ok := lookup(obj, path)
	if !ok {
		return nil, false
	}
	if m, isMap := parent.(map[string]any); isMap {
		return m[key], true
	}
	return parent.([]any)[index], true
}

func set(obj map[string]any, path FieldPath, v any) {
	parent, key, index, ok := lookup(obj, path)
	if !ok {
		return
	}
	if m, isMap := parent.(map[string]any); isMap {
		m[key] = v
		return
	}
	parent.([]any)[index] = v
}

// maskFields masks the fields at paths in both versions of an object
// (either may be nil), in place, whatever they hold: see maskField.
func maskFields(red *redact.Redactor, l, m map[string]any, paths []FieldPath) {
	for _, p := range paths {
		lv, lok := get(l, p)
		mv, mok := get(m, p)
		switch {
		case lok && mok:
			lv, mv = maskField(red, lv, mv)
			set(l, p, lv)
			set(m, p, mv)
		case lok:
			set(l, p, Mask)
		case mok:
			set(m, p, maskOne(red, mv))
		}
	}
}

// maskField masks the two versions of a field khook wrote a secret into.
// A version that holds a registered value keeps the rest of its text (the
// changed middle of two strings is masked whole, as maskStrings does, so
// an old value the redactor never learned is covered); one that holds
// none is masked whole: it is the old value, or what stands for it.
func maskField(red *redact.Redactor, a, b any) (any, any) {
	sa, aok := a.(string)
	sb, bok := b.(string)
	switch {
	case aok && bok && sa == sb:
		if len(red.Occurrences(sa)) > 0 {
			r := red.String(sa)
			return r, r
		}
		return Mask, Mask
	case aok && bok && (len(red.Occurrences(sa)) > 0 || len(red.Occurrences(sb)) > 0):
		return maskStrings(red, sa, sb)
	case reflect.DeepEqual(a, b):
		return Mask, Mask
	}
	return MaskBefore, MaskAfter
}

// maskOne masks a field that exists in one version only.
func maskOne(red *redact.Redactor, v any) any {
	if s, ok := v.(string); ok && len(red.Occurrences(s)) > 0 {
		return red.String(s)
	}
	return Mask
}

// maskKhookFields masks, in both versions, the fields where the merged
// version holds a registered value (SecretFields), and the same fields
// (with those where the merged copy holds one) in both versions of the
// last-applied-configuration annotation.
func maskKhookFields(red *redact.Redactor, l, m map[string]any) {
	if m == nil {
		return // deleted: nothing khook writes now; registered values are still masked
	}
	paths := secretPaths(m, red)
	al, lok := annotation(l)
	am, mok := annotation(m)
	// the annotation's own paths first: maskFields below rewrites the
	// merged body, which may hold the annotation's copy of them
	var jl, jm map[string]any
	if lok || mok {
		jl, jm = parseJSON(al, lok), parseJSON(am, mok)
		apaths := append(paths[:len(paths):len(paths)], secretPaths(jm, red)...)
		// the annotation itself is no field of the manifest it copies
		apaths = dropAnnotationPaths(apaths)
		if len(apaths) > 0 && (jl != nil || jm != nil) {
			maskFields(red, jl, jm, apaths)
			// both copies re-encoded alike, so encoding alone never differs
			if jl != nil {
				setAnnotation(l, encodeJSON(jl, al))
			}
			if jm != nil {
				setAnnotation(m, encodeJSON(jm, am))
			}
		}
	}
	maskFields(red, l, m, dropAnnotationPaths(paths))
}

// dropAnnotationPaths leaves out the path of the last-applied annotation,
// which maskKhookFields masks field by field.
func dropAnnotationPaths(paths []FieldPath) []FieldPath {
	out := paths[:0:0]
	for _, p := range paths {
		if len(p) == 3 && p[0].key == "metadata" && p[1].key == "annotations" && p[2].key == corev1.LastAppliedConfigAnnotation {
			continue
		}
		out = append(out, p)
	}
	return out
}
