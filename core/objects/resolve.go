package objects

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/kube"
	"khook.io/core/manifest"
)

// Resolved is a manifest's object mapped to its resource: Object is what
// Apply sends (Prepare).
type Resolved struct {
	Mapping *meta.RESTMapping
	Object  *unstructured.Unstructured
}

// Ref names the resolved object, with its namespace.
func (r Resolved) Ref() Ref { return RefOf(r.Object) }

// Namespaced reports whether the object's kind lives in namespaces.
func (r Resolved) Namespaced() bool { return kube.Namespaced(r.Mapping) }

// Resolve maps obj's kind (an unserved kind is an error
// meta.IsNoMatchError finds, see Mapping) and fills in namespace when the
// kind is namespaced and obj names none.
func (m *Manager) Resolve(ctx context.Context, obj *unstructured.Unstructured, namespace string) (Resolved, error) {
	mapping, err := m.Mapping(ctx, obj.GroupVersionKind())
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{Mapping: mapping, Object: Prepare(obj, mapping, namespace)}, nil
}

// Get reads the resolved object from the cluster; an absent one is a
// NotFound error.
func (m *Manager) Get(ctx context.Context, r Resolved) (*unstructured.Unstructured, error) {
	return m.Client(r.Mapping, r.Object.GetNamespace()).Get(ctx, r.Object.GetName(), metav1.GetOptions{})
}

// Prepare returns the object Apply sends for obj: a copy with the
// namespace filled in for namespaced kinds (manifest.SetNamespace), and
// server-owned metadata dropped (managedFields, which server-side apply
// refuses).
func Prepare(obj *unstructured.Unstructured, mapping *meta.RESTMapping, namespace string) *unstructured.Unstructured {
	o := obj.DeepCopy()
	manifest.SetNamespace(o, kube.Namespaced(mapping), namespace)
	unstructured.RemoveNestedField(o.Object, "metadata", "managedFields")
	return o
}
