package helm

import (
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"khook.io/core/objects"
)

// Fields of an object named as managedFields name them
// (objects.Fields): written and printed for the drift check; read with
// objects.LookupPath, list entries found with objects.EntryIndex.

// pathName is a field's path as a plan and an outcome print it: data.b,
// spec.template.spec.containers[name="web"].image.
func pathName(p fieldpath.Path) string { return strings.TrimPrefix(p.String(), ".") }

// setPath puts v at p in obj, an object as a manifest writes it: a list
// entry is the one whose key fields hold the key's values, a key field
// the manifest leaves to its default (a port's protocol) matching any. A
// field !present is removed (p may name a list entry). A path obj does
// not have is left alone.
func setPath(obj map[string]any, p fieldpath.Path, v any, present bool) {
	if len(p) == 0 {
		return
	}
	parent, ok := parentOf(obj, p)
	if !ok {
		return
	}
	last := p[len(p)-1]
	switch c := parent.(type) {
	case map[string]any:
		if last.FieldName == nil {
			return
		}
		if present {
			c[*last.FieldName] = v
		} else {
			delete(c, *last.FieldName)
		}
	case []any:
		i := objects.EntryIndex(c, last, true)
		if i < 0 {
			return
		}
		if present {
			c[i] = v
			return
		}
		// removed in place: the parent holds the list by value
		setList(obj, p[:len(p)-1], append(c[:i:i], c[i+1:]...))
	}
}

// setList puts l at the list field p of obj.
func setList(obj map[string]any, p fieldpath.Path, l []any) {
	parent, _ := parentOf(obj, p)
	if m, ok := parent.(map[string]any); ok && p[len(p)-1].FieldName != nil {
		m[*p[len(p)-1].FieldName] = l
	}
}

// parentOf is the value that holds the last element of the non-empty path
// p in obj; false when obj does not have it.
func parentOf(obj map[string]any, p fieldpath.Path) (any, bool) {
	var parent any = obj
	for _, pe := range p[:len(p)-1] {
		next, ok := child(parent, pe)
		if !ok {
			return nil, false
		}
		parent = next
	}
	return parent, true
}

func child(v any, pe fieldpath.PathElement) (any, bool) {
	if pe.FieldName != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		c, ok := m[*pe.FieldName]
		return c, ok
	}
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	i := objects.EntryIndex(l, pe, true)
	if i < 0 {
		return nil, false
	}
	return l[i], true
}

// sameField reports whether a field is the same in two versions (present
// in each, or not): an empty map, list or null is the field's absence,
// which the API server makes of it.
func sameField(a any, ap bool, b any, bp bool) bool {
	if !ap || !bp {
		return (!ap || isEmpty(a)) && (!bp || isEmpty(b))
	}
	return objects.SameJSON(a, b)
}

// isEmpty reports whether v is null, an empty map or an empty list.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// contained reports whether every field want sets holds the same value in
// live (an empty map, list or null in want also where live lacks it),
// lists item by item in order; top, at the object's root, skips status
// (never the manifest's to set). It is a cheap sufficient test of no
// drift: true means objects.Fields would find every field equal; false
// means it has to look (a list the server reorders or extends, a
// normalised value, a field that did drift).
func contained(want, live any, top bool) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(w) == 0 && isEmpty(live)
		}
		for k, v := range w {
			if top && k == "status" {
				continue
			}
			lv, found := l[k]
			if !found {
				if isEmpty(v) {
					continue
				}
				return false
			}
			if !contained(v, lv, false) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(w) == 0 && isEmpty(live)
		}
		if len(w) != len(l) {
			return false
		}
		for i := range w {
			if !contained(w[i], l[i], false) {
				return false
			}
		}
		return true
	case nil:
		return live == nil
	}
	return objects.SameJSON(want, live)
}
