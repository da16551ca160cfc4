package objects

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// NamespaceExists reports whether namespace name exists. An error says
// why it could not be read; apierrors.IsForbidden finds a user who may not
// read namespaces (who may still use this one).
func (m *Manager) NamespaceExists(ctx context.Context, name string) (bool, error) {
	_, err := m.kube.Typed.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("namespace %s: %w", name, err)
}

// NamespaceUnknownError is an EnsureNamespace by a user who may neither
// read nor create namespaces: whether the namespace exists is unknown
// (what is created in it next says). It unwraps to the create's refusal.
type NamespaceUnknownError struct {
	Name string
	Err  error
}

func (e *NamespaceUnknownError) Error() string {
	return fmt.Sprintf("namespace %s: create failed: %v", e.Name, e.Err)
}

func (e *NamespaceUnknownError) Unwrap() error { return e.Err }

// newNamespace is the namespace khook creates (createNamespace): labelled
// app.kubernetes.io/managed-by: khook, the one policy of decision 120,
// and with labels (a helm step's: helm's name=<namespace>, decision 222).
// Made for a spec (Options.CreatedBy), it also carries AnnotationCreatedBy.
func (m *Manager) newNamespace(name string, labels map[string]string) *corev1.Namespace {
	all := map[string]string{}
	for k, v := range labels {
		all[k] = v
	}
	all[LabelManagedBy] = ManagedBy
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: all},
	}
	if m.createdBy != "" {
		ns.Annotations = map[string]string{AnnotationCreatedBy: m.createdBy}
	}
	return ns
}

// EnsureNamespace creates namespace name when it does not exist and
// reports whether it did; an existing namespace is left as it is, labels
// and all. When reading namespaces is forbidden, the create is tried
// anyway: an existing namespace then answers AlreadyExists, and a refused
// create is a *NamespaceUnknownError.
func (m *Manager) EnsureNamespace(ctx context.Context, name string) (bool, error) {
	return m.EnsureNamespaceLabelled(ctx, name, nil)
}

// EnsureNamespaceLabelled is EnsureNamespace of a namespace that, when
// created, carries labels besides the policy's (a helm step's namespace
// carries helm's name=<namespace>). An existing namespace is left alone.
func (m *Manager) EnsureNamespaceLabelled(ctx context.Context, name string, labels map[string]string) (bool, error) {
	ok, err := m.NamespaceExists(ctx, name)
	getForbidden := apierrors.IsForbidden(err)
	switch {
	case ok:
		return false, nil
	case err != nil && !getForbidden:
		return false, err
	}
	_, err = m.kube.Typed.CoreV1().Namespaces().Create(ctx, m.newNamespace(name, labels), metav1.CreateOptions{FieldManager: m.fieldManager})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case getForbidden && apierrors.IsForbidden(err):
		return false, &NamespaceUnknownError{Name: name, Err: err}
	}
	return false, fmt.Errorf("namespace %s: create failed: %w", name, err)
}

// DryRunNamespace is EnsureNamespace's create as a server dry run: the
// namespace as the server would create it.
func (m *Manager) DryRunNamespace(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	created, err := m.kube.Typed.CoreV1().Namespaces().Create(ctx, m.newNamespace(name, nil),
		metav1.CreateOptions{FieldManager: m.fieldManager, DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, fmt.Errorf("namespace %s: dry-run create: %w", name, err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(created)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", name, err)
	}
	out := &unstructured.Unstructured{Object: u}
	out.SetAPIVersion("v1")
	out.SetKind("Namespace")
	return out, nil
}
