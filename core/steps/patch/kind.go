package patch

import (
	"fmt"
	"strconv"
	"strings"

	"khook.io/core/spec"
)

// Type is the action key of patch: steps.
const Type = "patch"

// Patch types.
const (
	Strategic = "strategic"
	Merge     = "merge"
	JSON      = "json"
)

// Patch is a patch: step's block: modify a resource in place.
type Patch struct {
	Target    string `yaml:"target" khook:"required" doc:"kind/name of the object to patch"`
	Namespace string `yaml:"namespace" schema:"dnslabel" default:"default" doc:"namespace; ignored for cluster-scoped kinds"`
	Type      string `yaml:"type" enum:"strategic,merge,json" default:"strategic" doc:"strategic (built-in kinds), merge (RFC 7386, any kind) or json (RFC 6902)"`
	Patch     any    `yaml:"patch" khook:"required" schema:"patchbody" doc:"the patch body: a mapping for strategic/merge, a list of operations for json"`
}

// Kind describes patch: steps to the spec.
func (*Executor) Kind() spec.StepKind {
	return spec.StepKind{Name: Type, Doc: "modify a resource in place", Block: new(Patch)}
}

// PatchType returns the patch type with its default.
func (p *Patch) PatchType() string {
	if p.Type == "" {
		return Strategic
	}
	return p.Type
}

// Check validates the target and the body's shape for the patch type.
func (pt *Patch) Check(c *spec.Check) {
	p := c.Path
	c.Namespace(p+".namespace", pt.Namespace)
	c.Enum(p+".type", pt.Type, Strategic, Merge, JSON)
	if pt.Target != "" {
		ref, err := spec.ParseResource(pt.Target)
		if err != nil {
			c.Errorf(p+".target", "%v", err)
		} else if ref.Name == "" {
			c.Errorf(p+".target", "%q: want kind/name, for example daemonset/aws-node", pt.Target)
		}
	}
	if pt.Patch == nil {
		return
	}
	bp := p + ".patch"
	switch pt.PatchType() {
	case Strategic, Merge:
		m, ok := pt.Patch.(map[string]any)
		if !ok {
			c.Errorf(bp, "a %s patch is a mapping of the fields to change, not %s", pt.PatchType(), goKind(pt.Patch))
		} else if len(m) == 0 {
			c.Errorf(bp, "must not be empty")
		}
	case JSON:
		ops, ok := pt.Patch.([]any)
		if !ok {
			c.Errorf(bp, "a json patch is a list of operations (op, path, value), not %s", goKind(pt.Patch))
			return
		}
		if len(ops) == 0 {
			c.Errorf(bp, "must not be empty")
		}
		for i, op := range ops {
			jsonPatchOp(c, bp+"["+strconv.Itoa(i)+"]", op)
		}
	}
}

func goKind(x any) string {
	switch x.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, float64, uint64:
		return "a number"
	}
	return fmt.Sprintf("%T", x)
}

func jsonPatchOp(c *spec.Check, p string, x any) {
	m, ok := x.(map[string]any)
	if !ok {
		c.Errorf(p, "a json patch operation is a mapping with op and path, not %s", goKind(x))
		return
	}
	for k := range m {
		if k != "op" && k != "path" && k != "value" && k != "from" {
			c.Errorf(p, "unknown json patch field %q (want op, path, value, from)", k)
		}
	}
	op, _ := m["op"].(string)
	path, hasPath := m["path"].(string)
	if !hasPath || !strings.HasPrefix(path, "/") && path != "" {
		c.Errorf(p, "path must be a JSON pointer such as /spec/replicas")
	}
	_, hasValue := m["value"]
	from, hasFrom := m["from"].(string)
	switch op {
	case "add", "replace", "test":
		if !hasValue {
			c.Errorf(p, "a %q operation needs value", op)
		}
	case "remove":
	case "move", "copy":
		if !hasFrom || (!strings.HasPrefix(from, "/") && from != "") {
			c.Errorf(p, "a %q operation needs from, a JSON pointer", op)
		}
	case "":
		c.Errorf(p, "op is required (add, remove, replace, move, copy or test)")
	default:
		c.Errorf(p, "op must be add, remove, replace, move, copy or test, not %q", op)
	}
}

// Summary says which patch, of what.
func (p *Patch) Summary(*spec.Step) string {
	ns := p.Namespace
	if ns == "" {
		ns = "default"
	}
	return p.PatchType() + " patch of " + p.Target + " in " + ns
}

// Hint explains that a patch has no skipIf.
func (*Patch) Hint(field string) string {
	if field == "skipIf" {
		return "patch steps have no skipIf: strategic and merge patches are idempotent"
	}
	return ""
}

// JSONSchema adds the body's shape to the block's schema: a list of
// operations for json, a mapping otherwise.
func (*Patch) JSONSchema(s map[string]any) {
	type object = map[string]any
	s["if"] = object{"properties": object{"type": object{"const": "json"}}, "required": []string{"type"}}
	s["then"] = object{"properties": object{"patch": object{"type": "array", "items": object{
		"type":     "object",
		"required": []string{"op", "path"},
		"properties": object{
			"op":    object{"enum": strings.Split("add,remove,replace,move,copy,test", ",")},
			"path":  object{"type": "string"},
			"from":  object{"type": "string"},
			"value": object{},
		},
		"additionalProperties": false,
	}}}}
	s["else"] = object{"properties": object{"patch": object{"type": "object"}}}
}
