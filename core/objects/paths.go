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
		i := EntryIndex(l, pe, false)
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
