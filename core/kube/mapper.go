package kube

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
)

// MapperFor is the run's RESTMapper for a library that asks it without a
// context (helm 4's kube client and its resource builder): its discovery
// requests end with ctx, and a kind or resource it does not find is looked
// up once more after forgetting the cached discovery (a chart's CRD just
// Established), as MappingFor does for khook's own steps. Reset forgets
// the cached discovery (helm calls it after installing a chart's CRDs).
func (c *Clients) MapperFor(ctx context.Context) meta.ResettableRESTMapper {
	return refreshingMapper{m: ctxMapper{ctx: ctx, m: c.mapper}, c: c}
}

type refreshingMapper struct {
	m ctxMapper
	c *Clients
}

// again calls fn, and once more after a reset of discovery when it found
// no match.
func again[T any](c *Clients, fn func() (T, error)) (T, error) {
	v, err := fn()
	if meta.IsNoMatchError(err) {
		c.ResetMapper()
		v, err = fn()
	}
	return v, err
}

func (r refreshingMapper) Reset() { r.c.ResetMapper() }

func (r refreshingMapper) KindFor(res schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return again(r.c, func() (schema.GroupVersionKind, error) { return r.m.KindFor(res) })
}

func (r refreshingMapper) KindsFor(res schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return again(r.c, func() ([]schema.GroupVersionKind, error) { return r.m.KindsFor(res) })
}

func (r refreshingMapper) ResourceFor(res schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return again(r.c, func() (schema.GroupVersionResource, error) { return r.m.ResourceFor(res) })
}

func (r refreshingMapper) ResourcesFor(res schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return again(r.c, func() ([]schema.GroupVersionResource, error) { return r.m.ResourcesFor(res) })
}

func (r refreshingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return again(r.c, func() (*meta.RESTMapping, error) { return r.m.RESTMapping(gk, versions...) })
}

func (r refreshingMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return again(r.c, func() ([]*meta.RESTMapping, error) { return r.m.RESTMappings(gk, versions...) })
}

func (r refreshingMapper) ResourceSingularizer(resource string) (string, error) {
	return r.m.ResourceSingularizer(resource)
}

// DiscoveryFor is the run's cached discovery for a library that asks it
// without a context (helm 4 reads the server's version and API groups for
// every operation): its requests end with ctx.
//
// It is the run's cache itself, aggregated discovery included (client-go
// and helm read the groups and resources in one request when the client
// says it can), with ctx on every call.
func (c *Clients) DiscoveryFor(ctx context.Context) discovery.CachedDiscoveryInterface {
	d, ok := c.Discovery.(discovery.CachedDiscoveryInterfaceWithContext)
	ad, aok := c.Discovery.(discovery.AggregatedDiscoveryInterfaceWithContext)
	if !ok || !aok {
		return c.Discovery
	}
	return ctxDiscovery{CachedDiscoveryInterface: c.Discovery, d: d, ad: ad, ctx: ctx}
}

type ctxDiscovery struct {
	discovery.CachedDiscoveryInterface
	d   discovery.CachedDiscoveryInterfaceWithContext
	ad  discovery.AggregatedDiscoveryInterfaceWithContext
	ctx context.Context
}

var _ discovery.AggregatedDiscoveryInterface = ctxDiscovery{}

func (x ctxDiscovery) GroupsAndMaybeResources() (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	return x.ad.GroupsAndMaybeResourcesWithContext(x.ctx)
}

func (x ctxDiscovery) ServerGroups() (*metav1.APIGroupList, error) {
	return x.d.ServerGroupsWithContext(x.ctx)
}

func (x ctxDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	return x.d.ServerResourcesForGroupVersionWithContext(x.ctx, gv)
}

func (x ctxDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return x.d.ServerGroupsAndResourcesWithContext(x.ctx)
}

func (x ctxDiscovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return x.d.ServerPreferredResourcesWithContext(x.ctx)
}

func (x ctxDiscovery) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	return x.d.ServerPreferredNamespacedResourcesWithContext(x.ctx)
}

func (x ctxDiscovery) ServerVersion() (*version.Info, error) {
	return x.d.ServerVersionWithContext(x.ctx)
}
