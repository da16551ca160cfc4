// Package schema generates the JSON Schema (draft 2020-12) of the khook v1
// spec from the spec package's types and tags, so the schema cannot drift
// from what the decoder accepts. docs/schema/v1/khook.json is this output,
// committed; a test fails when the two differ.
//
// What a schema can say, it says: the fixed apiVersion and kind, exactly
// one action key per step (oneOf, over the step kinds it is given), the
// one skipIf word each step type accepts (so editors autocomplete it),
// enums, required fields, one-source manifest and values entries, and what
// a kind's block adds itself (Extender: the delete forms, the patch body
// shape).
// The rest (needs that exist, cycles, chart-source rules, variables) is the
// validator's. Because a spec is validated by editors before its variables
// are substituted, every non-string field also accepts a string holding a
// ${VAR} reference.
package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

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

// Extender is a spec struct (a step kind's block) that adds to its schema
// what its tags cannot say; s is the struct's object schema.
type Extender interface {
	JSONSchema(s map[string]any)
}

// JSON returns the schema document of a spec whose steps may be kinds,
// indented, with a trailing newline.
func JSON(kinds *spec.StepKinds) ([]byte, error) {
	doc, err := Generate(kinds)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return append(b, '\n'), nil
}

// Generate builds the schema as a JSON-ready value. Two different spec
// structs of one name (two kinds' blocks, say) are an error: the schema
// names its definitions after them.
func Generate(kinds *spec.StepKinds) (map[string]any, error) {
	g := &generator{defs: object{}, types: map[string]reflect.Type{}, kinds: kinds}
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
	if len(g.errs) > 0 {
		return nil, errors.Join(g.errs...)
	}
	return root, nil
}

type generator struct {
	defs  object
	types map[string]reflect.Type // by definition name
	kinds *spec.StepKinds
	errs  []error
}

func (g *generator) ref(t reflect.Type) object {
	name := t.Name()
	switch other, ok := g.types[name]; {
	case name == "" || name == "variable":
		g.errs = append(g.errs, fmt.Errorf("schema: the spec struct %s needs a name of its own", t))
	case ok && other != t:
		g.errs = append(g.errs, fmt.Errorf("schema: two spec structs are named %s: %s and %s", name, other, t))
	}
	g.types[name] = t
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
	oneOf := info.OneOf
	if t == stepType {
		// a step's action keys: one per kind, exactly one of them
		oneOf = g.kinds.Names()
		for _, k := range g.kinds.List() {
			props[k.Name] = object{"$ref": g.ref(reflect.TypeOf(k.Block).Elem())["$ref"], "description": k.Doc}
		}
	}
	if len(oneOf) > 0 {
		alts := make([]any, len(oneOf))
		for i, name := range oneOf {
			alts[i] = object{"required": []string{name}}
		}
		s["oneOf"] = alts
	}
	if x, ok := reflect.New(t).Interface().(Extender); ok {
		x.JSONSchema(s)
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

var (
	durationType = reflect.TypeOf(spec.Duration{})
	stepType     = reflect.TypeOf(spec.Step{})
)

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
