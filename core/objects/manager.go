// Package objects is the lifecycle of Kubernetes objects the steps share,
// after fluxcd/pkg's ssa.ResourceManager: a Manager owns one run's
// clients, REST mapper and field manager, and offers the verbs the steps
// need: Resolve (mapping, namespace defaulting, served check, waiting for
// a CRD applied just before), EnsureNamespace, Apply (kubectl's
// client-side three-way apply, server-side apply, dry-run), Delete and
// WaitGone (UID preconditions, watches). Objects are named one way (Ref),
// and what a write did is one change-set type (Change, ChangeSet).
//
// A Manager serves one step attempt: it remembers the kinds the cluster
// does not serve, so many objects of such a kind cost one discovery reset.
package objects

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"khook.io/core/kube"
	"khook.io/core/redact"
)

// DefaultFieldManager is the field manager khook writes as
// (managedFields) unless configured otherwise.
const DefaultFieldManager = "khook"

// Labels khook puts on what it creates on its own (not from a manifest):
// the namespaces of createNamespace (decision 120) and the Jobs of job:.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "khook"
)

// Options configure a Manager.
type Options struct {
	// FieldManager is the field manager of every write; empty means
	// DefaultFieldManager.
	FieldManager string
	// Redactor, when set, learns what a live object holds where the
	// manifest holds a secret (diff.Learn) whenever the manager reads one
	// before writing it: an older value of a rotated secret is masked
	// from then on.
	Redactor *redact.Redactor
	// CreatedBy, when set, is the name of the spec the manager writes
	// for: what it creates carries it as the annotation
	// AnnotationCreatedBy, and destroy deletes only what carries it
	// (decision 150).
	CreatedBy string
}

// Manager reads and writes objects for one step attempt. Safe for
// concurrent use.
type Manager struct {
	kube         *kube.Clients
	fieldManager string
	redactor     *redact.Redactor
	createdBy    string

	mu       sync.Mutex
	unserved map[schema.GroupVersionKind]error
}

// New returns a manager over the run's clients.
func New(c *kube.Clients, opts Options) *Manager {
	fm := opts.FieldManager
	if fm == "" {
		fm = DefaultFieldManager
	}
	return &Manager{kube: c, fieldManager: fm, redactor: opts.Redactor, createdBy: opts.CreatedBy, unserved: map[schema.GroupVersionKind]error{}}
}

// Clients returns the clients the manager uses.
func (m *Manager) Clients() *kube.Clients { return m.kube }

// FieldManager returns the field manager the manager writes as.
func (m *Manager) FieldManager() string { return m.fieldManager }

// Client returns the dynamic client of mapping in namespace (ignored for
// cluster-scoped kinds).
func (m *Manager) Client(mapping *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	return m.kube.Resource(mapping, namespace)
}

// Mapping returns the REST mapping of gvk. A kind the cluster does not
// serve is an error meta.IsNoMatchError finds; it is remembered, so the
// next object of the kind costs no discovery reset, until a CRD the
// manager establishes (Establish) or ForgetUnserved clears it.
func (m *Manager) Mapping(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m.mu.Lock()
	err := m.unserved[gvk]
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	mapping, err := m.kube.MappingFor(ctx, gvk)
	if meta.IsNoMatchError(err) {
		m.mu.Lock()
		m.unserved[gvk] = err
		m.mu.Unlock()
	}
	return mapping, err
}

// MappingForType resolves a type as a user writes it in a resource
// argument (pods, deploy, deployments.apps): see kube.MappingForType.
func (m *Manager) MappingForType(ctx context.Context, typ string) (*meta.RESTMapping, error) {
	return m.kube.MappingForType(ctx, typ)
}

// ForgetUnserved forgets the kinds found unserved and resets the shared
// REST mapper, so kinds served since are found.
func (m *Manager) ForgetUnserved() {
	m.mu.Lock()
	clear(m.unserved)
	m.mu.Unlock()
	m.kube.ResetMapper()
}
