package waiter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/jsonpath"

	"khook.io/core/diagnose"
	"khook.io/core/spec"
)

// CheckFunc decides whether one object is ready. current describes the
// object's present value of what is waited for ("status False
// (MinimumReplicasUnavailable)"), for progress lines and the timeout
// error. A non-nil error ends the wait at once with that error: the object
// can never become ready (a Job that failed, a Deployment past its
// progress deadline).
type CheckFunc func(obj *unstructured.Unstructured) (ready bool, current string, err error)

// Condition is a compiled condition= or jsonpath= wait.for expression.
// A Condition is not safe for concurrent use (a JSONPath evaluator keeps
// state); compile one per wait.
type Condition struct {
	cond spec.WaitFor
	path *jsonpath.JSONPath
}

// NewCondition compiles cond, which must be a condition= or jsonpath= form
// (delete is not a property of an object: Until handles it).
func NewCondition(cond spec.WaitFor) (*Condition, error) {
	switch cond.Kind {
	case spec.ForCondition:
		if cond.Name == "" {
			return nil, fmt.Errorf("condition wait without a condition name")
		}
		if cond.Value == "" {
			cond.Value = "True"
		}
		return &Condition{cond: cond}, nil
	case spec.ForJSONPath:
		p := jsonpath.New("wait").AllowMissingKeys(true)
		if err := p.Parse(cond.Path); err != nil {
			return nil, fmt.Errorf("invalid jsonpath %s: %w", cond.Path, err)
		}
		return &Condition{cond: cond, path: p}, nil
	case spec.ForDelete:
		return nil, fmt.Errorf("delete is not a condition of an object")
	}
	return nil, fmt.Errorf("unknown wait condition %q", cond.Kind)
}

// Check reports whether obj meets the condition, and its current value.
// A missing condition or path means "not yet"; a JSONPath that kubectl
// wait refuses on obj (several values, a map or list compared with a
// value, an index out of range) fails the wait, as it fails kubectl wait.
func (c *Condition) Check(obj *unstructured.Unstructured) (bool, string, error) {
	if c.path != nil {
		ok, cur, err := c.checkJSONPath(obj)
		if err != nil {
			return false, "", fmt.Errorf("%s: %s: %w", objectName(obj.GetKind(), obj), Describe(c.cond), err)
		}
		return ok, cur, nil
	}
	ok, cur := checkCondition(obj, c.cond.Name, c.cond.Value)
	return ok, cur, nil
}

// Describe names the condition in messages: "condition Available",
// "condition Ready=False", "jsonpath {.status.phase}=Running".
func Describe(cond spec.WaitFor) string {
	switch cond.Kind {
	case spec.ForCondition:
		if cond.Value == "" || strings.EqualFold(cond.Value, "True") {
			return "condition " + cond.Name
		}
		return "condition " + cond.Name + "=" + cond.Value
	case spec.ForJSONPath:
		if cond.Value == "" {
			return "jsonpath " + cond.Path
		}
		return "jsonpath " + cond.Path + "=" + cond.Value
	case spec.ForDelete:
		return "deletion"
	}
	return cond.Kind
}

// checkCondition is kubectl wait's condition check: the first entry of
// status.conditions whose type equals name (case-insensitively) decides,
// by comparing its status with want case-insensitively; a condition
// observed for an older generation of the object does not count yet.
func checkCondition(obj *unstructured.Unstructured, name, want string) (bool, string) {
	conds, found, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil {
		return false, "status.conditions is not a list"
	}
	if !found || len(conds) == 0 {
		return false, "no conditions yet"
	}
	for _, raw := range conds {
		cond, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		typ, _, _ := unstructured.NestedString(cond, "type")
		if !strings.EqualFold(typ, name) {
			continue
		}
		status, found, _ := unstructured.NestedString(cond, "status")
		if !found {
			continue
		}
		cur := "status " + status
		reason, _, _ := unstructured.NestedString(cond, "reason")
		if reason != "" {
			cur += " (" + reason + ")"
		}
		if gen, found, _ := unstructured.NestedInt64(obj.Object, "metadata", "generation"); found {
			if observed, found := observedGeneration(obj, cond); found && observed < gen {
				return false, cur + ", observed for generation " + strconv.FormatInt(observed, 10) + " of " + strconv.FormatInt(gen, 10)
			}
		}
		return strings.EqualFold(status, want), cur
	}
	return false, "no " + name + " condition yet"
}

// observedGeneration is the condition's observedGeneration, else the
// status's (as kubectl has it).
func observedGeneration(obj *unstructured.Unstructured, cond map[string]any) (int64, bool) {
	if g, found, _ := unstructured.NestedInt64(cond, "observedGeneration"); found {
		return g, true
	}
	g, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	return g, found
}

// maxValueLen bounds a value quoted in a message.
const maxValueLen = 80

// Errors of a JSONPath wait, worded as kubectl wait words them.
var (
	errSeveralLists  = errors.New("given jsonpath expression matches more than one list")
	errSeveralValues = errors.New("given jsonpath expression matches more than one value (kubectl wait compares exactly one: narrow the expression with an index or a filter)")
	errNested        = errors.New("jsonpath leads to a nested object or list which is not supported (kubectl wait compares scalars only: drop the value to wait for the field to exist)")
)

// checkJSONPath is kubectl wait's JSONPath check (JSONPathWait in
// k8s.io/kubectl/pkg/cmd/wait): no result is "not yet"; more than one
// result is an error; without a wanted value, the one result meets the
// condition whatever it is (an empty string, null, an empty map or list);
// with one, a map or list is an error and a scalar is formatted with %v
// and compared with the value, both trimmed of spaces. An evaluation
// error (an index out of range) is an error too.
func (c *Condition) checkJSONPath(obj *unstructured.Unstructured) (bool, string, error) {
	results, err := c.path.FindResults(obj.UnstructuredContent())
	if err != nil {
		return false, "", err
	}
	if len(results) == 0 || len(results[0]) == 0 {
		return false, c.cond.Path + " not found", nil
	}
	if len(results) > 1 {
		return false, "", errSeveralLists
	}
	if len(results[0]) > 1 {
		return false, "", errSeveralValues
	}
	v := results[0][0]
	var x any
	if v.IsValid() {
		x = v.Interface()
	}
	cur := "value " + quoteValue(x)
	if c.cond.Value == "" {
		return true, cur, nil
	}
	switch x.(type) {
	case map[string]any, []any:
		return false, "", errNested
	}
	return strings.TrimSpace(fmt.Sprintf("%v", x)) == strings.TrimSpace(c.cond.Value), cur, nil
}

func quoteValue(x any) string {
	var s string
	switch v := x.(type) {
	case string:
		s = strconv.Quote(v)
	case map[string]any:
		return fmt.Sprintf("an object of %d fields", len(v))
	case []any:
		return fmt.Sprintf("a list of %d items", len(v))
	case nil:
		return "null"
	default:
		s = fmt.Sprintf("%v", v)
	}
	if len(s) > maxValueLen {
		s = s[:maxValueLen] + "..."
	}
	return s
}

// ReasonMessage is a condition's or container state's reason and message
// as one phrase, "Reason: message", either part left out when empty.
func ReasonMessage(reason, msg string) string { return diagnose.ReasonMessage(reason, msg) }
