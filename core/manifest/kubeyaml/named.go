package kubeyaml

import (
	"errors"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// ErrGenerateNameOnly is an object named only by metadata.generateName:
// the server names it anew on every create, so applying it again makes one
// more object each time and nothing can find it again to update or
// delete it. kubectl apply refuses it too.
var ErrGenerateNameOnly = errors.New("metadata.generateName without metadata.name: apply cannot find such an object again (each run would create one more, and destroy could not find any of them), as kubectl apply refuses it; give it a metadata.name")

// Unnamed lists the objects of data (read as Decode reads it) that have a
// generateName and no name, each as a *DocumentError wrapping
// ErrGenerateNameOnly; documents Decode refuses are left to Decode.
func Unnamed(data []byte) Errors {
	docs, _ := Split(data)
	var errs Errors
	for _, d := range docs {
		objs, derr := d.decode()
		if derr != nil {
			continue
		}
		list := d.isList()
		for k, o := range objs {
			if o.GetName() != "" || o.GetGenerateName() == "" {
				continue
			}
			de := &DocumentError{Document: d.Index, Line: d.Line, Err: ErrGenerateNameOnly}
			if list {
				de.Item = k + 1
			}
			errs = append(errs, de)
		}
	}
	return errs
}

// isList reports whether the document is a List whose items Decode
// expands.
func (d Document) isList() bool {
	js, derr := d.toJSON()
	if derr != nil || js == nil {
		return false
	}
	var m map[string]any
	if utiljson.Unmarshal(js, &m) != nil {
		return false
	}
	kind, _ := m["kind"].(string)
	_, items := m["items"]
	return strings.HasSuffix(kind, "List") && items
}
