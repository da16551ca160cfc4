package diff

import (
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ChangedFields names the fields that differ between two versions of an
// object (live, and merged as apply would leave it), as a plan lists
// them: the deepest path where they part, a list's items paired by their
// "name" when every item has a distinct one (else by index, and a list
// that changes length is one field), a map key on one side only as that
// key. metadata.managedFields, metadata.resourceVersion and
// metadata.generation are server bookkeeping, not listed. No value is
// returned, only paths: nothing here can hold a secret's value.
func ChangedFields(live, merged *unstructured.Unstructured) []string {
	var l, m map[string]any
	if live != nil {
		l = live.Object
	}
	if merged != nil {
		m = merged.Object
	}
	var out []string
	changed(l, m, nil, &out)
	return out
}

func changed(a, b any, path FieldPath, out *[]string) {
	// a map on one side only is its keys, each a field
	if _, ok := b.(map[string]any); ok && a == nil {
		a = map[string]any{}
	}
	if _, ok := a.(map[string]any); ok && b == nil {
		b = map[string]any{}
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			p := append(path[:len(path):len(path)], elem{key: k})
			if bookkeeping(p) {
				continue
			}
			changed(x[k], y[k], p, out)
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		if uniqueNames(x) && uniqueNames(y) {
			// an item on one side only is one field
			for i, it := range x {
				name := it.(map[string]any)["name"].(string)
				p := append(path[:len(path):len(path)], elem{item: true, index: i, name: name, byName: true})
				if other := itemByName(y, name); other != nil {
					changed(it, other, p, out)
				} else {
					*out = append(*out, pathString(p))
				}
			}
			for i, it := range y {
				name := it.(map[string]any)["name"].(string)
				if itemByName(x, name) == nil {
					*out = append(*out, pathString(append(path[:len(path):len(path)], elem{item: true, index: i, name: name, byName: true})))
				}
			}
			return
		}
		if len(x) == len(y) {
			for i := range x {
				changed(x[i], y[i], append(path[:len(path):len(path)], elem{item: true, index: i}), out)
			}
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, pathString(path))
	}
}

func itemByName(list []any, name string) any {
	for _, it := range list {
		if m, ok := it.(map[string]any); ok && m["name"] == name {
			return it
		}
	}
	return nil
}

// bookkeeping: a field the server changes with every write.
func bookkeeping(p FieldPath) bool {
	if len(p) != 2 || p[0].key != "metadata" {
		return false
	}
	switch p[1].key {
	case "managedFields", "resourceVersion", "generation":
		return true
	}
	return false
}

// pathString is p as FieldPath.String writes it, with a key that holds a
// dot (an annotation's, a label's) quoted in brackets:
// metadata.labels["app.kubernetes.io/name"].
func pathString(p FieldPath) string { return p.format(true) }
