package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// MappingForType resolves a type as a user writes it in a resource
// argument (wait.on, delete.resource, patch.target, rollout), with
// kubectl's own code: cli-runtime's resource.Builder, which tries
// TYPE[.VERSION][.GROUP] as a resource (plural, singular or short name)
// and then as a kind, so pods, pod, po, Pod, deployments.apps,
// deploy, Deployment.apps, deployments.v1.apps and Deployment.v1.apps all
// name what kubectl names. A category (all) must expand to a single type.
//
// A type not found is looked up once more after forgetting the cached
// discovery (a CRD served since). When it is still unknown, the error is
// kubectl's ("the server doesn't have a resource type ...") and
// meta.IsNoMatchError finds it. Discovery requests end with ctx.
func (c *Clients) MappingForType(ctx context.Context, typ string) (*meta.RESTMapping, error) {
	m, err := c.resolveType(ctx, typ)
	if meta.IsNoMatchError(err) {
		c.ResetMapper()
		m, err = c.resolveType(ctx, typ)
	}
	return m, err
}

func (c *Clients) resolveType(ctx context.Context, typ string) (*meta.RESTMapping, error) {
	// the builder calls the mapper without a context: bind ctx to it
	rec := &recordingMapper{RESTMapper: ctxMapper{ctx: ctx, m: c.mapper}}
	getter := builderGetter{cfg: c.Config, disco: c.DiscoveryFor(ctx), mapper: rec}
	// ResourceTypeOrNameArgs with allowEmptySelector selects every object
	// of the type: the builder only resolves it here, nothing is listed.
	m, err := resource.NewBuilder(getter).
		Unstructured().
		SingleResourceType().
		ResourceTypeOrNameArgs(true, typ).
		Do().
		ResourceMapping()
	if err == nil {
		return m, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("resolve resource type %q: %w", typ, context.Cause(ctx))
	}
	switch {
	case errors.Is(err, resource.ErrMultipleResourceTypes):
		return nil, fmt.Errorf("resource type %q names several types (a list, or a category such as all): name one type", typ)
	case rec.noMatch() != nil:
		// the builder words the error as kubectl does, dropping the
		// mapper's typed error: keep both, and the type as written when
		// kubectl's words name only its parts
		msg := err.Error()
		if !strings.Contains(msg, strconv.Quote(typ)) {
			msg = strconv.Quote(typ) + ": " + msg
		}
		return nil, &noMatchError{msg: msg, cause: rec.noMatch()}
	}
	return nil, fmt.Errorf("resolve resource type %q: %w", typ, err)
}

// ctxMapper is a RESTMapper whose every call is bounded by ctx: the
// resource builder takes no context of its own.
type ctxMapper struct {
	ctx context.Context
	m   meta.RESTMapperWithContext
}

func (c ctxMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return c.m.KindForWithContext(c.ctx, r)
}

func (c ctxMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return c.m.KindsForWithContext(c.ctx, r)
}

func (c ctxMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return c.m.ResourceForWithContext(c.ctx, r)
}

func (c ctxMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return c.m.ResourcesForWithContext(c.ctx, r)
}

func (c ctxMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return c.m.RESTMappingWithContext(c.ctx, gk, versions...)
}

func (c ctxMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return c.m.RESTMappingsWithContext(c.ctx, gk, versions...)
}

func (c ctxMapper) ResourceSingularizer(resource string) (string, error) {
	return c.m.ResourceSingularizerWithContext(c.ctx, resource)
}

// noMatchError is kubectl's "the server doesn't have a resource type"
// message around the RESTMapper's no-match error.
type noMatchError struct {
	msg   string
	cause error
}

func (e *noMatchError) Error() string { return e.msg }
func (e *noMatchError) Unwrap() error { return e.cause }

// recordingMapper remembers the last error of RESTMapping: the builder
// ends with a RESTMapping call whose no-match error it rewords.
type recordingMapper struct {
	meta.RESTMapper
	mu   sync.Mutex
	last error
}

func (r *recordingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m, err := r.RESTMapper.RESTMapping(gk, versions...)
	r.mu.Lock()
	r.last = err
	r.mu.Unlock()
	return m, err
}

// noMatch is the last RESTMapping error when it was a no-match error.
func (r *recordingMapper) noMatch() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if meta.IsNoMatchError(r.last) {
		return r.last
	}
	return nil
}

// builderGetter hands the run's clients to a resource.Builder, so it
// resolves with the run's (resettable) discovery and mapper.
type builderGetter struct {
	cfg    *rest.Config
	disco  discovery.CachedDiscoveryInterface
	mapper meta.RESTMapper
}

func (g builderGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g builderGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.disco, nil
}

func (g builderGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.mapper, nil }
