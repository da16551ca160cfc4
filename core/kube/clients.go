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
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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
	"k8s.io/klog/v2"
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
	// Config is the REST config every client is built from, connection
	// retries included (see retryTransport): libraries that build their
	// own clients from it (helm) get them too.
	Config    *rest.Config
	Dynamic   dynamic.Interface
	Typed     kubernetes.Interface
	Discovery discovery.CachedDiscoveryInterface
	Mapper    meta.RESTMapper
	// Server is the API server URL, without credentials, for messages.
	Server string
	// Identity is whom the clients act as (kubeconfig context, user,
	// credential plugin), for messages.
	Identity Identity
	// Getter is what the clients were built from (helm's action
	// configuration takes one).
	Getter genericclioptions.RESTClientGetter
	// Writes holds the writes of every client built from Config to the
	// run's lock, once the run has one (WriteGate.Set).
	Writes *WriteGate

	mapper   meta.RESTMapperWithContext
	deferred *restmapper.DeferredDiscoveryRESTMapper
	resetMu  sync.Mutex
}

// Options tune the clients.
type Options struct {
	// QPS and Burst replace khook's client-side rate limits when set
	// (helm's --qps and --burst-limit); a negative QPS turns throttling
	// off.
	QPS   float32
	Burst int
	// Warnings receives API server warnings (deprecations), each once,
	// but those of requests whose context routes them (WithWarnings); nil
	// drops them.
	Warnings io.Writer
}

// Configured reports whether getter names a cluster at all, without
// contacting it: true also for a configuration that cannot be used (a
// named kubeconfig file that does not exist, an unknown context), which
// New reports.
func Configured(getter genericclioptions.RESTClientGetter) bool {
	_, _, err := loadConfig(getter)
	return !errors.Is(err, ErrNoKubeconfig)
}

// New builds the clients. It fails with ErrNoKubeconfig when nothing is
// configured, instead of client-go's fallback to localhost:8080, and says
// precisely what is wrong with a configuration that cannot be used.
func New(getter genericclioptions.RESTClientGetter, opts Options) (*Clients, error) {
	cfg, id, err := loadConfig(getter)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	if opts.QPS != 0 {
		cfg.QPS = opts.QPS
	}
	if opts.Burst > 0 {
		cfg.Burst = opts.Burst
	}
	var fallback rest.WarningHandler = rest.NoWarnings{}
	if opts.Warnings != nil {
		fallback = rest.NewWarningWriter(opts.Warnings, rest.WarningWriterOptions{Deduplicate: true})
	}
	cfg.WarningHandler, cfg.WarningHandlerWithContext = nil, routedWarnings{fallback: fallback}
	c, err := NewForConfig(cfg, getter)
	if err != nil {
		return nil, err
	}
	c.Identity = id
	return c, nil
}

// NewForConfig builds the clients from a REST config (getter may be nil).
// All clients share one HTTP client: one connection pool, and the layers
// of retryTransport and outerTransport. Config carries the write gate
// (beneath the retries: each attempt asks it) and the retries, so the
// clients libraries build from it (helm) have both.
func NewForConfig(cfg *rest.Config, getter genericclioptions.RESTClientGetter) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	gate := &WriteGate{}
	cfg.Wrap(gate.wrap)
	cfg.Wrap(newRetryTransport)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	hc.Transport = &outerTransport{
		next:    hc.Transport,
		abandon: cfg.ExecProvider != nil || cfg.AuthProvider != nil,
		logAll:  klog.V(6).Enabled(),
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	typed, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("typed client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(disco)
	deferred := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	mapper := restmapper.NewShortcutExpander(deferred, cached, nil)
	c := &Clients{
		Config:    cfg,
		Dynamic:   dyn,
		Typed:     typed,
		Discovery: cached,
		Mapper:    mapper,
		Server:    StripCredentials(cfg.Host),
		Identity:  Identity{Plugin: execCommand(cfg)},
		Getter:    getter,
		Writes:    gate,
		mapper:    meta.ToRESTMapperWithContext(mapper),
		deferred:  deferred,
	}
	if c.Getter == nil {
		c.Getter = &configGetter{cfg: cfg, disco: cached, mapper: c.Mapper}
	}
	return c, nil
}

func execCommand(cfg *rest.Config) string {
	if cfg.ExecProvider == nil {
		return ""
	}
	return cfg.ExecProvider.Command
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

// DefaultCheckTimeout bounds Check when the connection sets no request
// timeout.
const DefaultCheckTimeout = 15 * time.Second

// Check contacts the API server once, without retries, and says which
// server and why when it cannot be used: unreachable, a certificate that
// does not verify, credentials the server rejected (naming the kubeconfig
// user and context), a credential plugin that did not return. It is
// bounded by timeout, or by the request timeout of the connection
// (kubectl's --request-timeout) when one is set.
func (c *Clients) Check(ctx context.Context, timeout time.Duration) error {
	if c.Config.Timeout > 0 {
		timeout = c.Config.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var reached atomic.Bool
	rctx := withReached(withoutDialRetries(ctx), &reached)
	_, err := c.Typed.Discovery().RESTClient().Get().AbsPath("/version").Do(rctx).Raw()
	if err == nil {
		return nil
	}
	return c.checkError(ctx, err, timeout, reached.Load())
}

func (c *Clients) checkError(ctx context.Context, err error, timeout time.Duration, reached bool) error {
	id := c.Identity
	stuck := !reached && id.Plugin != "" // never got past the credential plugin
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		why := "cancelled"
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			why = cause.Error()
		}
		if stuck {
			return fmt.Errorf("stopped (%s) while %s was running, before contacting the cluster at %s", why, id.plugin(), c.Server)
		}
		return fmt.Errorf("stopped (%s) while contacting the cluster at %s", why, c.Server)
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		if stuck {
			return fmt.Errorf("%s did not return within %s (it runs before khook contacts the cluster at %s)", id.plugin(), timeout, c.Server)
		}
		return fmt.Errorf("cannot reach the cluster at %s: timed out after %s", c.Server, timeout)
	case apierrors.IsUnauthorized(err):
		msg := fmt.Sprintf("%s were rejected by the cluster at %s (401 Unauthorized)", id.credentials(), c.Server)
		if when, ok := expiredClientCert(c.Config, time.Now()); ok {
			msg += fmt.Sprintf(": the client certificate expired on %s", when.UTC().Format(time.RFC3339))
		}
		return errors.New(msg)
	}
	return fmt.Errorf("cannot reach the cluster at %s: %s", c.Server, Reason(err))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Reason is a one-line explanation of a client-go error.
func Reason(err error) string {
	var status apierrors.APIStatus
	switch {
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
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
// the kind is not (yet) known. Discovery requests end with ctx.
func (c *Clients) MappingFor(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.ResetMapper()
		m, err = c.mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("%s is not served by the cluster: %w", kindString(gvk), err)
		}
		return nil, fmt.Errorf("discover %s: %w", kindString(gvk), err)
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
