// Package schema generates the JSON Schema (draft 2020-12) of the khook v1
// spec from the spec package's types and tags, so the schema cannot drift
// from what the decoder accepts. docs/schema/v1/khook.json is this output,
// committed; a test fails when the two differ.
//
// What a schema can say, it says: the fixed apiVersion and kind, exactly
// one action key per step (oneOf), the one skipIf word each step type
// accepts (so editors autocomplete it), enums, required fields, one-source
// manifest and values entries, the delete forms and the patch body shape.
// The rest (needs that exist, cycles, chart-source rules, variables) is the
// validator's. Because a spec is validated by editors before its variables
// are substituted, every non-string field also accepts a string holding a
// ${VAR} reference.
package schema

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"khook.io/core/spec"
)

// ID is the schema's canonical URL.
const ID = "https://khook.io/schema/v1/khook.json"

const (
	draft         = "https://json-schema.org/draft/2020-12/schema"
	variableRef   = "#/$defs/variable"
	durationRegex = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
)

type object = map[string]any

var (
	once sync.Once
	out  []byte
)

// JSON returns the schema document, indented, with a trailing newline.
// It is generated once per process.
func JSON() []byte {
	once.Do(func() {
		b, err := json.MarshalIndent(Generate(), "", "  ")
		if err != nil {
			panic("schema: " + err.Error()) // maps of plain values always marshal
		}
		out = append(b, '\n')
	})
	return out
}

// Generate builds the schema as a JSON-ready value.
func Generate() map[string]any {
	g := &generator{defs: object{}}
	root := g.structSchema(reflect.TypeOf(spec.Spec{}))
	root["$schema"] = draft
	root["$id"] = ID
	root["title"] = "khook spec (apiVersion: khook.io/v1, kind: Khook)"
	root["description"] = "A declarative cluster-bootstrap spec run by kubectl khook or helm khook."
	g.defs["variable"] = object{
		"type":        "string",
		"pattern":     `\$\{[^}]*\}`,
		"description": "a ${VAR} reference, substituted before the spec is parsed",
	}
	root["$defs"] = g.defs
	return root
}

type generator struct {
	defs object
}

func (g *generator) ref(t reflect.Type) object {
	name := t.Name()
	if _, ok := g.defs[name]; !ok {
		g.defs[name] = object{} // reserve: types may recurse
		g.defs[name] = g.structSchema(t)
	}
	return object{"$ref": "#/$defs/" + name}
}

func (g *generator) structSchema(t reflect.Type) object {
	info := spec.StructInfoOf(t)
	props := object{}
	var required []string
	for _, f := range info.Fields {
		s := g.fieldSchema(f)
		props[f.Name] = s
		if f.Required {
			required = append(required, f.Name)
		}
	}
	s := object{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	if len(info.OneOf) > 0 {
		alts := make([]any, len(info.OneOf))
		for i, name := range info.OneOf {
			alts[i] = object{"required": []string{name}}
		}
		s["oneOf"] = alts
	}
	if extra, ok := extras[t]; ok {
		extra(s)
	}
	return s
}

func (g *generator) fieldSchema(f spec.FieldInfo) object {
	s := g.typeSchema(f.Type, f)
	if f.Doc != "" {
		s["description"] = f.Doc
	}
	if f.Default != "" {
		s["default"] = typedDefault(f.Type, f.Default)
	}
	return s
}

var durationType = reflect.TypeOf(spec.Duration{})

func (g *generator) typeSchema(t reflect.Type, f spec.FieldInfo) object {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		return withVariable(object{"type": "string", "pattern": durationRegex})
	case t.Kind() == reflect.Interface:
		if f.Schema == "patchbody" {
			return object{"type": []string{"object", "array"}}
		}
		return object{}
	}
	switch t.Kind() {
	case reflect.String:
		switch {
		case len(f.Enum) == 1 && (f.Name == "apiVersion" || f.Name == "kind"):
			return object{"const": f.Enum[0]}
		case len(f.Enum) > 0:
			return withVariable(object{"enum": f.Enum})
		}
		s := object{"type": "string"}
		switch f.Schema {
		case "url":
			s["pattern"] = `^(https?://|\$\{)`
		case "localpath":
			s["pattern"] = `^(\./|\.\./|/|\$\{)`
		}
		return s
	case reflect.Bool:
		return withVariable(object{"type": "boolean"})
	case reflect.Int:
		return withVariable(object{"type": "integer", "minimum": 0})
	case reflect.Slice:
		el := t.Elem()
		var items object
		if el.Kind() == reflect.Struct {
			items = g.ref(el)
		} else {
			items = g.typeSchema(el, spec.FieldInfo{})
		}
		return object{"type": "array", "items": items}
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return object{"type": "object", "additionalProperties": object{"type": []string{"string", "number", "boolean"}}}
		}
		return object{"type": "object"}
	case reflect.Struct:
		return g.ref(t)
	}
	panic("schema: no rule for " + t.String())
}

func withVariable(s object) object {
	return object{"anyOf": []any{s, object{"$ref": variableRef}}}
}

func typedDefault(t reflect.Type, def string) any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return def == "true"
	case reflect.Int:
		n, _ := strconv.Atoi(def)
		return n
	}
	return def
}

// extras add what the tags cannot express, per struct.
var extras = map[reflect.Type]func(object){
	// delete: exactly one form, and the fields a form does not take
	reflect.TypeOf(spec.Delete{}): func(s object) {
		s["oneOf"] = []any{
			object{"required": []string{"manifests"}},
			object{"required": []string{"resource"}},
			object{"required": []string{"release"}},
		}
		notSelection := object{"properties": object{"selector": false, "fieldSelector": false, "allNamespaces": false}}
		s["dependentSchemas"] = object{"release": notSelection, "manifests": notSelection}
	},
	// patch: a list of operations for json, a mapping otherwise
	reflect.TypeOf(spec.Patch{}): func(s object) {
		s["if"] = object{"properties": object{"type": object{"const": "json"}}, "required": []string{"type"}}
		s["then"] = object{"properties": object{"patch": object{"type": "array", "items": jsonPatchOp}}}
		s["else"] = object{"properties": object{"patch": object{"type": "object"}}}
	},
}

var jsonPatchOp = object{
	"type":     "object",
	"required": []string{"op", "path"},
	"properties": object{
		"op":    object{"enum": strings.Split("add,remove,replace,move,copy,test", ",")},
		"path":  object{"type": "string"},
		"from":  object{"type": "string"},
		"value": object{},
	},
	"additionalProperties": false,
}
