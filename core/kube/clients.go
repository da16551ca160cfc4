// Package kube builds the one set of cluster clients a run shares: a REST
// config with client-side throttling raised, the dynamic and typed clients,
// in-memory cached discovery, and a RESTMapper that is reset when new CRDs
// appear. It also checks the cluster up front and turns client-go's errors
// into lines a user can act on.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Client-side rate limits: high enough that a large spec is never throttled
// by client-go itself (200 objects applied client-side are 400 requests,
// well inside the burst); the API server's priority and fairness still
// protects it.
const (
	DefaultQPS   = 1000
	DefaultBurst = 2000
)

// Clients is one run's connection to the cluster. Safe for concurrent use.
type Clients struct {
	Config    *rest.Config
	Dynamic   dynamic.Interface
	Typed     kubernetes.Interface
	Discovery discovery.CachedDiscoveryInterface
	Mapper    meta.RESTMapper
	// Server is the API server URL, without credentials, for messages.
	Server string
	// Getter is what the clients were built from (helm's action
	// configuration takes one).
	Getter genericclioptions.RESTClientGetter

	deferred *restmapper.DeferredDiscoveryRESTMapper
	resetMu  sync.Mutex
}

// ErrNoKubeconfig means no cluster is configured at all.
var ErrNoKubeconfig = errors.New("no cluster configured: set KUBECONFIG, pass --kubeconfig, or write ~/.kube/config")

// Options tune the clients.
type Options struct {
	QPS   float32
	Burst int
	// Warnings receives API server warnings (deprecations); nil drops them.
	Warnings io.Writer
}

// Configured reports whether getter names a cluster at all (a kubeconfig
// with a cluster, or a --server flag), without contacting it.
func Configured(getter genericclioptions.RESTClientGetter) bool {
	raw, err := getter.ToRawKubeConfigLoader().RawConfig()
	if err == nil && len(raw.Clusters) > 0 {
		return true
	}
	// an explicit --server, or in-cluster config; an empty kubeconfig gets
	// clientcmd's default server (localhost:8080), which counts as nothing
	if cfg, err := getter.ToRESTConfig(); err == nil && cfg.Host != "" && cfg.Host != clientcmd.ClusterDefaults.Server {
		return true
	}
	return false
}

// New builds the clients. It fails with ErrNoKubeconfig when nothing is
// configured, instead of client-go's fallback to localhost:8080.
func New(getter genericclioptions.RESTClientGetter, opts Options) (*Clients, error) {
	if !Configured(getter) {
		return nil, ErrNoKubeconfig
	}
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, ErrNoKubeconfig
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	if opts.QPS > 0 {
		cfg.QPS = opts.QPS
	}
	if opts.Burst > 0 {
		cfg.Burst = opts.Burst
	}
	if opts.Warnings != nil {
		cfg.WarningHandler = rest.NewWarningWriter(opts.Warnings, rest.WarningWriterOptions{Deduplicate: true})
	} else {
		cfg.WarningHandler = rest.NoWarnings{}
	}
	return NewForConfig(cfg, getter)
}

// NewForConfig builds the clients from a REST config (getter may be nil).
func NewForConfig(cfg *rest.Config, getter genericclioptions.RESTClientGetter) (*Clients, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("typed client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(disco)
	deferred := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	c := &Clients{
		Config:    cfg,
		Dynamic:   dyn,
		Typed:     typed,
		Discovery: cached,
		Mapper:    restmapper.NewShortcutExpander(deferred, cached, nil),
		Server:    StripCredentials(cfg.Host),
		Getter:    getter,
		deferred:  deferred,
	}
	if c.Getter == nil {
		c.Getter = &configGetter{cfg: cfg, disco: cached, mapper: c.Mapper}
	}
	return c, nil
}

// StripCredentials drops userinfo from a server URL.
func StripCredentials(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.User == nil {
		return host
	}
	u.User = nil
	return u.String()
}

// Check contacts the API server once, bounded by timeout, and says which
// server and why when it cannot be reached.
func (c *Clients) Check(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := c.Typed.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err == nil {
		return nil
	}
	return fmt.Errorf("cannot reach the cluster at %s: %s", c.Server, Reason(err))
}

// Reason is a one-line explanation of a client-go error.
func Reason(err error) string {
	var status apierrors.APIStatus
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case apierrors.IsUnauthorized(err):
		return "unauthorized: the credentials in the kubeconfig were rejected"
	case errors.As(err, &status):
		return strings.TrimSpace(status.Status().Message)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error() // drop the method and URL: the caller names the server
	}
	return err.Error()
}

// ResetMapper forgets cached discovery, so kinds served since (new CRDs)
// are found.
func (c *Clients) ResetMapper() {
	c.resetMu.Lock()
	defer c.resetMu.Unlock()
	c.Discovery.Invalidate()
	c.deferred.Reset()
}

// MappingFor returns the REST mapping of gvk, resetting discovery once when
// the kind is not (yet) known.
func (c *Clients) MappingFor(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.ResetMapper()
		m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not served by the cluster: %w", kindString(gvk), err)
	}
	return m, nil
}

func kindString(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + " " + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + " " + gvk.Kind
}

// Resource returns the dynamic client for mapping in namespace (ignored
// for cluster-scoped kinds).
func (c *Clients) Resource(m *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Dynamic.Resource(m.Resource).Namespace(namespace)
	}
	return c.Dynamic.Resource(m.Resource)
}

// Namespaced reports whether mapping's kind lives in namespaces.
func Namespaced(m *meta.RESTMapping) bool { return m.Scope.Name() == meta.RESTScopeNameNamespace }
