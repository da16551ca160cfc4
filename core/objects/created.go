package objects

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationCreatedBy marks an object khook created (not one it only
// configured: one that existed before its first apply): its value is the
// name of the spec whose run created it. destroy deletes what carries its
// spec's name and only reverts khook's fields on anything else (decision
// 150). An annotation, not a label: nothing selects by it (destroy reads
// the objects its manifests name), and it must not change what a
// selector of someone else's matches.
const AnnotationCreatedBy = "khook.io/created-by"

// CreatedBy returns the spec that created obj (AnnotationCreatedBy), ""
// for an object khook did not create.
func CreatedBy(obj *unstructured.Unstructured) string {
	return obj.GetAnnotations()[AnnotationCreatedBy]
}

// CreatedByThis reports whether obj was created by the manager's spec
// (Options.CreatedBy); always false for a manager of no spec.
func (m *Manager) CreatedByThis(obj *unstructured.Unstructured) bool {
	return m.createdBy != "" && CreatedBy(obj) == m.createdBy
}

// mark sets AnnotationCreatedBy on o, an object about to be created.
func (a *applier) mark(o *unstructured.Unstructured) {
	if a.createdBy == "" {
		return
	}
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationCreatedBy] = a.createdBy
	o.SetAnnotations(ann)
}
