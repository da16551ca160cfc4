// Package helm is khook's one door to the Helm SDK (helm.sh/helm/v4): it
// fetches charts, merges values, and installs, upgrades, inspects and
// uninstalls releases, in-process. No other package imports Helm (the move
// from helm v3 touched only this one: docs/spec.md decision 100).
//
// Waits follow watch events: readiness (wait, atomic) is khook's waiter
// judging every object of the release by kstatus (see readinessWaiter),
// and an uninstall waits until the objects it deleted, by UID, are gone.
// Releases are applied as the helm 4 SDK applies them: installed
// server-side as field manager "helm" (see installServerSide), upgraded
// with the method the release was installed with, so the helm 4 CLI and
// khook take turns on one release without conflicts.
//
// What it does, and what it never does:
//
//   - Every operation builds its own action.Configuration from the run's
//     shared clients (REST config, cached discovery and RESTMapper), with
//     the Secret storage driver in the release namespace. Nothing mutable
//     is shared between operations: registry clients, HTTP clients bound to
//     the operation's context, and Helm's configuration are per call.
//   - No helm binary, no repositories.yaml, no repository cache: a repo:
//     URL's index.yaml is fetched and resolved in memory, charts are held
//     in memory, OCI charts are pulled with Helm's registry client using
//     only the credentials of the spec (never ~/.docker or Helm's registry
//     login file).
//   - Credentials (auth: or URL userinfo) are registered with the run's
//     redactor before anything is fetched, and every error and log line
//     leaves this package through the redactor.
//
// Install or upgrade is decided by the release history. An upgrade whose
// chart, values and rendered manifests equal the deployed revision is not
// performed (no new revision: see Client.Apply) unless the release's
// objects drifted from its manifest: then it is, and puts them back (a
// repair: drift.go, repair.go). A release left pending by an interrupted
// run is recovered where Helm allows it.
package helm

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"khook.io/core/kube"
	"khook.io/core/redact"
)

// Env is what every operation needs: the run's shared, concurrency-safe
// clients. An Env is read, never changed.
type Env struct {
	Kube *kube.Clients
	// HTTP fetches repository indexes, charts, url: values and talks to OCI
	// registries; nil means a default client.
	HTTP *http.Client
	// Redactor masks secrets in errors and log lines; credentials found in
	// a chart source are added to it.
	Redactor *redact.Redactor
	// StepsFieldManager is the field manager of the spec's other steps
	// (apply:, patch:); empty means objects.DefaultFieldManager. A field
	// of a release's object it owns is the spec's, not drift (drift.go).
	StepsFieldManager string
	// Log reports progress; nil drops it.
	Log func(format string, args ...any)
	// BaseDir anchors relative local paths (charts, values files).
	BaseDir string
	// FieldManager is the field manager of every write Helm makes for an
	// operation (the objects of a release, its hooks, its storage
	// Secrets); empty means DefaultFieldManager, what the helm 4 CLI
	// writes as. See fieldManagerTransport.
	FieldManager string
	// Warn receives each warning of an operation once, redacted: the API
	// server's, and Helm's own (a deprecated chart); nil drops them.
	Warn func(text string)
}

// DefaultFieldManager is the field manager of Helm's writes unless
// Env.FieldManager says otherwise: "helm", as the helm 3 and helm 4 CLIs
// set it (kube.ManagedFieldsManager), so that a release khook applied
// server-side and one the helm CLI applied have one owner, and either
// upgrades the other's without a conflict (decision 221).
const DefaultFieldManager = "helm"

func (e Env) fieldManager() string {
	if e.FieldManager != "" {
		return e.FieldManager
	}
	return DefaultFieldManager
}

func (e Env) logf(format string, args ...any) {
	if e.Log != nil {
		e.Log("%s", e.Redactor.String(fmt.Sprintf(format, args...)))
	}
}

func (e Env) httpClient() *http.Client {
	if e.HTTP != nil {
		return e.HTTP
	}
	return http.DefaultClient
}

// Client runs Helm operations. It holds no mutable state: one Client may
// run any number of operations in parallel.
type Client struct {
	env Env
	// beforeRepair, when set, runs in a repair after the drift check and
	// before the objects are written: a test's hook point (the race of a
	// scale between the two).
	beforeRepair func()
}

// NewClient returns a Client for env.
func NewClient(env Env) *Client { return &Client{env: env} }

// configuration is one operation's Helm configuration: a fresh
// action.Configuration over the run's shared clients, storing releases as
// Secrets in namespace, and a recorder of Helm's debug log (whose last
// readiness message makes a timeout error say what was not ready).
type configuration struct {
	*action.Configuration
	log  *helmLog
	kube *kubeClient
}

// configuration builds the configuration of one operation, in namespace.
// Every request of Helm's clients is bound to ctx (kube.BindTo): Helm
// sends some with context.Background() (its storage driver's: the release
// records), which would otherwise wait at the write gate or in the
// connection retries past the step's deadline and Ctrl-C.
func (c *Client) configuration(ctx context.Context, namespace string) (*configuration, error) {
	if c.env.Kube == nil {
		return nil, fmt.Errorf("no cluster clients")
	}
	getter := &restGetter{ctx: ctx, kube: c.env.Kube, namespace: namespace, fieldManager: c.env.fieldManager(), warnings: c.env.warningHandler()}
	log := &helmLog{}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(log))
	if err := cfg.Init(getter, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration: %w", err)
	}
	kc, ok := cfg.KubeClient.(*helmkube.Client)
	if !ok {
		return nil, fmt.Errorf("helm configuration: unexpected Kubernetes client %T", cfg.KubeClient)
	}
	kc.Namespace = namespace
	// every client-side create (a client-side release's hooks) without
	// Helm's process-wide lock; server-side ones are Helm's own: see
	// kubeClient.Create
	wrapped := &kubeClient{Client: kc, clients: c.env.Kube, log: c.env.logf, clientSideCreates: true, red: c.env.Redactor}
	cfg.KubeClient = wrapped
	return &configuration{Configuration: cfg, log: log, kube: wrapped}, nil
}

// restGetter hands Helm the run's shared REST config, cached discovery and
// RESTMapper, with namespace as the default namespace, bound to the
// operation's context ctx.
type restGetter struct {
	ctx       context.Context
	kube      *kube.Clients
	namespace string
	// fieldManager is set on every write (fieldManagerTransport);
	// warnings receives the API server's warnings (nil: the run's).
	fieldManager string
	warnings     rest.WarningHandlerWithContext
}

// ToRESTConfig is the run's REST config with the operation's field
// manager and warnings, its requests bound to the operation's context.
func (g *restGetter) ToRESTConfig() (*rest.Config, error) {
	cfg := rest.CopyConfig(g.kube.Config)
	cfg.Wrap(kube.BindTo(g.ctx))
	if g.fieldManager != "" {
		cfg.Wrap(fieldManagerTransport(g.fieldManager))
	}
	if g.warnings != nil {
		cfg.WarningHandler, cfg.WarningHandlerWithContext = nil, g.warnings
	}
	return cfg, nil
}

// ToDiscoveryClient is the run's cached discovery, its requests bound to
// the operation's context (helm reads the server's version and API groups
// for every operation).
func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.kube.DiscoveryFor(g.ctx), nil
}

// ToRESTMapper is the run's RESTMapper, its discovery requests bound to
// the operation's context; a kind it does not find is looked up again
// once after discovery is refreshed (a chart's CRD just Established).
func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.kube.MapperFor(g.ctx), nil }

func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	var base clientcmd.ClientConfig = clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{})
	if g.kube.Getter != nil {
		base = g.kube.Getter.ToRawKubeConfigLoader()
	}
	cfg, _ := g.ToRESTConfig()
	return &namespacedConfig{base: base, cfg: cfg, namespace: g.namespace}
}

// namespacedConfig is a kubeconfig loader that answers the operation's
// namespace and the run's REST config.
type namespacedConfig struct {
	base      clientcmd.ClientConfig
	cfg       *rest.Config
	namespace string
}

func (n *namespacedConfig) RawConfig() (clientcmdapi.Config, error) { return n.base.RawConfig() }

func (n *namespacedConfig) ConfigAccess() clientcmd.ConfigAccess { return n.base.ConfigAccess() }

func (n *namespacedConfig) ClientConfig() (*rest.Config, error) { return rest.CopyConfig(n.cfg), nil }

func (n *namespacedConfig) Namespace() (string, bool, error) { return n.namespace, true, nil }

// helmLog is the slog.Handler of Helm's log: it records the last
// resource Helm's wait saw not ready (and the one seen when a wait first
// failed: a rollback's wait that follows logs lines of its own), and the
// last error of a failed deletion. Nothing else of Helm's log is kept.
type helmLog struct {
	mu        sync.Mutex
	notReady  string
	atFailure string
	lastErr   string
}

func (l *helmLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *helmLog) WithAttrs([]slog.Attr) slog.Handler { return l }

func (l *helmLog) WithGroup(string) slog.Handler { return l }

func (l *helmLog) Handle(_ context.Context, r slog.Record) error {
	if !recorded(r.Message) {
		return nil // most of helm's log (a debug line per object): not formatted
	}
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	l.record(r.Message, attrs)
	return nil
}

// recorded reports whether record keeps anything of a message.
func recorded(msg string) bool {
	return msg == "waiting for resource" || msg == "wait failed" ||
		strings.HasPrefix(msg, "wait for resources failed") || strings.HasPrefix(msg, "uninstall: Failed to delete release")
}

func (l *helmLog) record(msg string, attrs map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case msg == "waiting for resource": // the status watcher's observer
		l.notReady = fmt.Sprintf("%s %s/%s is %s", attrs["kind"], attrs["namespace"], attrs["name"], attrs["actualStatus"])
	case strings.HasPrefix(msg, "wait for resources failed"), msg == "wait failed":
		if l.atFailure == "" {
			l.atFailure = l.notReady
		}
	case strings.HasPrefix(msg, "uninstall: Failed to delete release"):
		l.lastErr = strings.TrimPrefix(msg, "uninstall: ")
		if e := attrs["error"]; e != "" {
			l.lastErr += ": " + e
		}
	}
}

// lastNotReady is the last resource seen not ready when a wait failed (or
// at all, when no wait failed).
func (l *helmLog) lastNotReady() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.atFailure != "" {
		return l.atFailure
	}
	return l.notReady
}

func (l *helmLog) lastError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// budget is how long Helm may block: until ctx's deadline (or fallback
// when ctx has none), less a margin so that Helm's own timeout fires first
// and it records the outcome (a failed release, an atomic rollback) before
// ctx ends.
func budget(ctx context.Context, fallback time.Duration) time.Duration {
	d := fallback
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
		if d <= 0 {
			return time.Millisecond // ctx is done: Helm's calls fail at once
		}
	} else if d <= 0 {
		d = 5 * time.Minute
	}
	margin := min(max(d/10, time.Second), 10*time.Second)
	if d-margin < time.Second {
		return max(d/2, 100*time.Millisecond)
	}
	return d - margin
}
