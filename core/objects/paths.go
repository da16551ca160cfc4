package objects

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Fields of an object named as managedFields name them (Fields): the one
// way khook reads a value at such a path, finds a list entry by its key,
// and compares JSON values, for destroy's revert (revert.go, previous.go)
// and the drift check of releases (core/helm).

// LookupPath is obj's value at p, read from the JSON as it is: a list
// entry is the one whose key fields hold the key's values (a live object
// holds every key, defaults included), a set element the one equal to
// it.
func LookupPath(obj map[string]any, p fieldpath.Path) (any, bool) {
	return lookupPath(obj, p, false)
}

// LookupPathLenient is LookupPath in an object as a manifest (or a patch)
// writes it: a key field a list entry does not have matches, as SetPath
// finds entries.
func LookupPathLenient(obj map[string]any, p fieldpath.Path) (any, bool) {
	return lookupPath(obj, p, true)
}

func lookupPath(obj map[string]any, p fieldpath.Path, lenient bool) (any, bool) {
	if obj == nil {
		return nil, false
	}
	var v any = obj
	for _, pe := range p {
		var ok bool
		if pe.FieldName != nil {
			m, isMap := v.(map[string]any)
			if !isMap {
				return nil, false
			}
			if v, ok = m[*pe.FieldName]; !ok {
				return nil, false
			}
			continue
		}
		l, isList := v.([]any)
		if !isList {
			return nil, false
		}
		i := EntryIndex(l, pe, lenient)
		if i < 0 {
			return nil, false
		}
		v = l[i]
	}
	return v, true
}

// EntryIndex is the index of the entry of l that pe names, -1 when there
// is none. Lenient, a key field an entry does not have matches: a list as
// a manifest writes it may leave a key field to its default (a port's
// protocol), which a path read from a live object names.
func EntryIndex(l []any, pe fieldpath.PathElement, lenient bool) int {
	switch {
	case pe.Index != nil:
		if *pe.Index < len(l) {
			return *pe.Index
		}
	case pe.Value != nil:
		want := (*pe.Value).Unstructured()
		for i, e := range l {
			if SameJSON(want, e) {
				return i
			}
		}
	case pe.Key != nil:
	entries:
		for i, e := range l {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			for _, k := range *pe.Key {
				got, has := m[k.Name]
				if !has && lenient {
					continue
				}
				if !has || !SameJSON(k.Value.Unstructured(), got) {
					continue entries
				}
			}
			return i
		}
	}
	return -1
}

// SameJSON reports whether a and b are the same JSON value (an int64 and
// a float64 of one number are).
func SameJSON(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// AsStored is intent as the API server stores it, where that differs
// from what a manifest writes: a field written null (annotations: with
// no value, as the usual {{- with .Values.annotations }} renders it) is
// not set, as kubectl, helm and the API server read it (decoded into the
// kind's type, a null is the field's absence; a custom resource's nulls
// are pruned unless its schema makes the field nullable); a core Secret's
// stringData is each value base64-encoded into data (stringData wins over
// data), which is what the live object holds. Any other intent is
// returned as it is (not a copy).
func AsStored(intent *unstructured.Unstructured) *unstructured.Unstructured {
	out := intent
	if hasNull(intent.Object) {
		out = intent.DeepCopy()
		dropNulls(out.Object)
	}
	sd, ok := out.Object["stringData"].(map[string]any)
	if !ok || !isSecretKind(out) {
		return out
	}
	if out == intent {
		out = intent.DeepCopy()
	}
	data, _ := out.Object["data"].(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range sd {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	out.Object["data"] = data
	delete(out.Object, "stringData")
	return out
}

// hasNull reports whether a map in v, at any depth, holds a null.
func hasNull(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if e == nil || hasNull(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasNull(e) {
				return true
			}
		}
	}
	return false
}

// dropNulls removes every null a map in v holds, at any depth (a list's
// null elements stay: they are the list's).
func dropNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range x {
			dropNulls(e)
		}
	}
}

// SetPath puts v at p in obj, an object as a manifest writes it: a list
// entry is the one whose key fields hold the key's values, a key field
// the manifest leaves to its default (a port's protocol) matching any. A
// field !present is removed (p may name a list entry). A path obj does
// not have is left alone.
func SetPath(obj map[string]any, p fieldpath.Path, v any, present bool) {
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
		i := EntryIndex(c, last, true)
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
	i := EntryIndex(l, pe, true)
	if i < 0 {
		return nil, false
	}
	return l[i], true
}

// SameField reports whether a field is the same in two versions (present
// in each, or not): an empty map, list or null is the field's absence,
// which the API server makes of it.
func SameField(a any, ap bool, b any, bp bool) bool {
	if !ap || !bp {
		return (!ap || isEmpty(a)) && (!bp || isEmpty(b))
	}
	return SameJSON(a, b)
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

// Contained reports whether every field want sets holds the same value in
// live (an empty map, list or null in want also where live lacks it),
// lists item by item in order; top, at the object's root, skips status
// (never the manifest's to set). It is a cheap sufficient test of no
// drift: true means objects.Fields would find every field equal; false
// means it has to look (a list the server reorders or extends, a
// normalised value, a field that did drift).
func Contained(want, live any, top bool) bool {
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
			if !Contained(v, lv, false) {
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
			if !Contained(w[i], l[i], false) {
				return false
			}
		}
		return true
	case nil:
		return live == nil
	}
	return SameJSON(want, live)
}
