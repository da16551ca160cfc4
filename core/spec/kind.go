package spec

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// StepKind describes a step kind to this package: the action key its steps
// write their block under, the block's Go type, and a line about it. A
// kind's package returns it from its executor (step.Executor.Kind); the
// step registry lists the kinds (step.Registry.Kinds) for the decoder, the
// validator, the schema and the input hash. Nothing in this package names
// a kind: see docs/spec.md decision 230.
type StepKind struct {
	// Name is the action key (helm, apply, ...): a lowerCamel word that
	// is no field of the step itself.
	Name string
	// Doc describes what a step of the kind does, in one line (the
	// schema's description of the action key).
	Doc string
	// Block is a pointer to the kind's zero block, new(T): T is a named
	// struct whose tags say its fields (see the package doc). The decoder
	// makes a new T for each step of the kind. *T may implement Checker,
	// Summarizer, Hinter and Waiter, and the schema's extension (see
	// package schema).
	Block any
}

// Checker is a block with rules its tags cannot say. Check runs after the
// block's required fields were checked, when the step has this block
// only, and reports every problem through c.
type Checker interface {
	Check(c *Check)
}

// Summarizer is a block that says what its step does, in one line, from
// the spec alone (no cluster): plan prints it. Callers redact it.
type Summarizer interface {
	Summary(st *Step) string
}

// Hinter is a block that explains a field it does not take (skipIf on a
// kind that has none): Hint returns the explanation, or "" for none.
type Hinter interface {
	Hint(field string) string
}

// Waiter is a block whose step may only wait: OnlyWaits reports whether
// this one changes nothing in the cluster whatever it finds (wait:, a
// rollout status), so a diff that cannot be computed still counts it
// unchanged.
type Waiter interface {
	OnlyWaits() bool
}

// StepKinds is the set of step kinds a spec may use, in the order they were
// given: the order messages list their names in, and the one whose block
// a step with several action keys keeps. A nil *StepKinds has none.
type StepKinds struct {
	list   []StepKind
	names  []string
	types  []reflect.Type // block struct types, by index in list
	byName map[string]int
}

var kindNameRe = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// NewStepKinds checks kinds and returns their set: each has a name that is no
// step field and no other kind's, and a block that is a pointer to a
// named struct. Every problem is reported.
func NewStepKinds(kinds ...StepKind) (*StepKinds, error) {
	k := &StepKinds{byName: make(map[string]int, len(kinds))}
	stepFields := structInfoOf(stepType)
	var errs []error
	for _, kd := range kinds {
		t := reflect.TypeOf(kd.Block)
		switch _, field := stepFields.byName[kd.Name]; {
		case !kindNameRe.MatchString(kd.Name):
			errs = append(errs, fmt.Errorf("step kind %q: the name must be a lowerCamel word (letters and digits, starting with a lowercase letter)", kd.Name))
			continue
		case field:
			errs = append(errs, fmt.Errorf("step kind %q: %s is a field of every step", kd.Name, kd.Name))
			continue
		case t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct:
			errs = append(errs, fmt.Errorf("step kind %q: its block is %T, not a pointer to a struct", kd.Name, kd.Block))
			continue
		}
		if _, dup := k.byName[kd.Name]; dup {
			errs = append(errs, fmt.Errorf("two step kinds are named %q", kd.Name))
			continue
		}
		k.byName[kd.Name] = len(k.list)
		k.list = append(k.list, kd)
		k.names = append(k.names, kd.Name)
		k.types = append(k.types, t.Elem())
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return k, nil
}

// List returns the kinds, in order.
func (k *StepKinds) List() []StepKind {
	if k == nil {
		return nil
	}
	return append([]StepKind(nil), k.list...)
}

// Names returns the kinds' names (the action keys), in order.
func (k *StepKinds) Names() []string { return slices.Clone(k.nameList()) }

// nameList is Names, not to be modified.
func (k *StepKinds) nameList() []string {
	if k == nil {
		return nil
	}
	return k.names
}

// Lookup returns the kind named name.
func (k *StepKinds) Lookup(name string) (StepKind, bool) {
	if k == nil {
		return StepKind{}, false
	}
	i, ok := k.byName[name]
	if !ok {
		return StepKind{}, false
	}
	return k.list[i], true
}

// BlockType returns the struct type of the block of the kind named name.
func (k *StepKinds) BlockType(name string) (reflect.Type, bool) {
	if k == nil {
		return nil, false
	}
	i, ok := k.byName[name]
	if !ok {
		return nil, false
	}
	return k.types[i], true
}

// index is the kind's position in the set, or -1.
func (k *StepKinds) index(name string) int {
	if k == nil {
		return -1
	}
	if i, ok := k.byName[name]; ok {
		return i
	}
	return -1
}

// orList lists names as "a, b or c".
func orList(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Type returns the step's action key, or "" when it has none. With several
// action keys (a validation error) it is the first in the order of the
// kinds the spec was decoded with.
func (s *Step) Type() string { return s.kind }

// Action returns the step's block (what its kind's Block points to a new
// one of: *helm.Helm for a helm: step), or nil when it has none.
func (s *Step) Action() any { return s.block }

// SetAction makes the step one of kind, with block (a pointer to the
// kind's block struct), as the decoder does.
func (s *Step) SetAction(kind string, block any) { s.kind, s.block = kind, block }

// BlockOf returns the step's block as a *T, or nil when the step (or its
// block) is no T: a kind's package reads its own block with it, as
// spec.BlockOf[Helm](st).
func BlockOf[T any](s *Step) *T {
	if s == nil {
		return nil
	}
	b, _ := s.block.(*T)
	return b
}

// Summary describes what the step's action does, in one line, from the
// spec alone (no cluster): its block's Summary, or "" when its kind has
// none. Callers redact it before printing.
func (s *Step) Summary() string {
	if b, ok := s.block.(Summarizer); ok {
		return b.Summary(s)
	}
	return ""
}

// OnlyWaits reports whether the step changes nothing in the cluster
// whatever it finds: its block says so (Waiter).
func (s *Step) OnlyWaits() bool {
	b, ok := s.block.(Waiter)
	return ok && b.OnlyWaits()
}
