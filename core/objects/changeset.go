package objects

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/internal/english"
)

// Action is what a write did to one object, as kubectl prints it.
type Action string

// Actions.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Deleted    Action = "deleted"
)

// Change is what applying or deleting one object did.
type Change struct {
	Action  Action
	Mapping *meta.RESTMapping
	// Live is the object before the write (nil when it did not exist, or
	// could not be read); Object is the object after it, as the server
	// returned it (Live when unchanged).
	Live   *unstructured.Unstructured
	Object *unstructured.Unstructured
	// Patch is the client-side three-way patch that was sent (nil for a
	// create, for server-side apply, and when unchanged).
	Patch     []byte
	PatchType types.PatchType
	// Kept and Ignored are the fields of an existing object the write
	// left to other writers or ignored, Left those a person changed that
	// it left as they are (drift mode warn): ApplyOptions.Drift.
	Kept, Ignored []Kept
	Left          []string
}

// Ref names the object the change is about.
func (c Change) Ref() Ref {
	if c.Object != nil {
		return RefOf(c.Object)
	}
	return RefOf(c.Live)
}

// ChangeSet is what a step's writes did, in order.
type ChangeSet struct {
	Entries []Change
}

// Add records c.
func (s *ChangeSet) Add(c Change) { s.Entries = append(s.Entries, c) }

// Count is how many entries did a.
func (s *ChangeSet) Count(a Action) int {
	n := 0
	for _, e := range s.Entries {
		if e.Action == a {
			n++
		}
	}
	return n
}

// Summary is the outcome line of applying total objects of which the set
// holds what was done: "applied 3 objects: 1 created, 1 configured, 1
// unchanged".
func (s *ChangeSet) Summary(total int) string {
	var parts []string
	for _, a := range []Action{Created, Configured, Unchanged, Deleted} {
		if n := s.Count(a); n > 0 {
			parts = append(parts, strconv.Itoa(n)+" "+string(a))
		}
	}
	out := "applied " + english.CountNoun(total, "object")
	if len(parts) > 0 {
		out += ": " + strings.Join(parts, ", ")
	}
	return out
}
