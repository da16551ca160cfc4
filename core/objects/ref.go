package objects

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Ref names one object for people. String is the one form khook's
// messages use, kubectl's kind/name with the namespace after it
// ("Deployment/web in team"); Path is the form of diff headers and of the
// steps that name their single target ("Deployment team/web"), kept
// because the diff output and those messages print it.
type Ref struct {
	Kind, Namespace, Name string
}

// RefOf names obj as it is written: a name from generateName gets a "*"
// ("Pod/job-*").
func RefOf(obj *unstructured.Unstructured) Ref {
	name := obj.GetName()
	if name == "" && obj.GetGenerateName() != "" {
		name = obj.GetGenerateName() + "*"
	}
	return Ref{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: name}
}

// RefFor names the object name of mapping's kind in namespace; the
// namespace is dropped for a cluster-scoped kind.
func RefFor(mapping *meta.RESTMapping, namespace, name string) Ref {
	r := Ref{Kind: mapping.GroupVersionKind.Kind, Name: name}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		r.Namespace = namespace
	}
	return r
}

// String is "Kind/name", plus " in <namespace>" when there is one.
func (r Ref) String() string {
	s := r.Kind + "/" + r.Name
	if r.Namespace != "" {
		s += " in " + r.Namespace
	}
	return s
}

// KindName is "Kind/name", without the namespace (manifest.Ref's form:
// the object as a manifest writes it, before its namespace is known).
func (r Ref) KindName() string { return r.Kind + "/" + r.Name }

// Path is "Kind namespace/name", or "Kind name" without a namespace.
func (r Ref) Path() string {
	if r.Namespace != "" {
		return r.Kind + " " + r.Namespace + "/" + r.Name
	}
	return r.Kind + " " + r.Name
}
