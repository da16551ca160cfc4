package cli

import (
	"context"
	"errors"
	"io"
	"os"

	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"khook.io/core/fetch"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/step"
)

// What the commands share is handed to each explicitly, as kubectl hands
// its commands a Factory and IOStreams: the spec's sources (SpecSource),
// the way to the clusters (Clusters) and where progress goes
// (ProgressOutput). A test builds any command's Options from them alone.

// SpecSource is what loading a spec needs besides its flags: standard
// input (for -f -), the environment variables are read from, the run's
// redactor (which learns every secret the spec uses) and the loader.
type SpecSource struct {
	Stdin    io.Reader
	Environ  []string
	Redactor *redact.Redactor
	// Loader loads specs; nil: a new one.
	Loader *load.Loader
}

// SpecOptions load the spec the flags name: once per command run (a
// fleet's once per context).
type SpecOptions struct {
	Options load.Options
	Loader  *load.Loader
}

// Load reads and checks the spec.
func (o *SpecOptions) Load() (*load.Document, error) { return o.load(o.Options) }

// load reads and checks a spec with opts (o's, changed for one context
// of a fleet).
func (o *SpecOptions) load(opts load.Options) (*load.Document, error) {
	if o.Loader == nil {
		o.Loader = &load.Loader{}
	}
	return o.Loader.Load(opts)
}

// Clusters is how a command reaches clusters: the connection flags, the
// step executors and where API warnings go. A nil *Clusters, or one
// without a Connection, reaches none (kube.ErrNoKubeconfig).
type Clusters struct {
	// Connection is the connection flags (kubectl's or helm's).
	Connection Connection
	// Steps builds the step executors; nil: none.
	Steps func() (*step.Registry, error)
	// Redactor is the run's: what steps report goes through it.
	Redactor *redact.Redactor
	// Warnings receives the API server's warnings (standard error).
	Warnings io.Writer
	// BeforeClients, when set, is called before clients are built (the
	// run routes client-go's logs then; see Config.Logs).
	BeforeClients func()
	// Verbosity, when set, is -v: from 1 on, the NOTES of the releases
	// helm steps install or upgrade are written with the warnings.
	Verbosity func() int
}

// connect builds the clients of the connection's cluster, checking it up
// front (a missing kubeconfig or an unreachable server is one clear error
// before anything runs), for doc.
func (c *Clusters) connect(ctx context.Context, doc *load.Document) (*session, error) {
	if c == nil || c.Connection == nil {
		return nil, kube.ErrNoKubeconfig
	}
	return c.newSession(ctx, doc, c.Connection.RESTClientGetter(), c.Warnings)
}

// newSession connects to the cluster getter names (checking it up front)
// for doc; API warnings go to warnings.
func (c *Clusters) newSession(ctx context.Context, doc *load.Document, getter genericclioptions.RESTClientGetter, warnings io.Writer) (*session, error) {
	clients, err := c.clientsFor(ctx, getter, warnings)
	if err != nil {
		return nil, err
	}
	if c.Steps == nil {
		return nil, errors.New("this build of khook has no step executors")
	}
	reg, err := c.Steps()
	if err != nil {
		return nil, err
	}
	s := &session{red: c.Redactor, doc: doc, clients: clients, registry: reg, http: fetch.NewClient(), namespace: defaultNamespace(getter), warnings: warnings}
	if c.Verbosity != nil && c.Verbosity() >= 1 {
		s.notes = warnings
	}
	return s, nil
}

// clients builds and checks the clients of the connection's cluster.
func (c *Clusters) clients(ctx context.Context) (*kube.Clients, error) {
	if c == nil || c.Connection == nil {
		return nil, kube.ErrNoKubeconfig
	}
	return c.clientsFor(ctx, c.Connection.RESTClientGetter(), c.Warnings)
}

// clientsFor builds and checks the clients of the cluster getter names,
// with the connection's client settings; API warnings go to warnings.
func (c *Clusters) clientsFor(ctx context.Context, getter genericclioptions.RESTClientGetter, warnings io.Writer) (*kube.Clients, error) {
	if c.BeforeClients != nil {
		c.BeforeClients()
	}
	opts := kube.Options{Warnings: warnings}
	if l, ok := c.Connection.(RateLimited); ok {
		opts.QPS, opts.Burst = l.RateLimits()
	}
	cl, err := kube.New(getter, opts)
	if err != nil {
		return nil, err
	}
	if err := cl.Check(ctx, checkTimeout); err != nil {
		return nil, err
	}
	return cl, nil
}

// contextFlag is the name of the connection's flag for one context.
func (c *Clusters) contextFlag() string {
	if c != nil {
		if f, ok := c.Connection.(ContextFlagger); ok {
			return f.ContextFlag()
		}
	}
	return "context"
}

// ProgressOutput is where a run's progress goes: standard error, live
// when it is a terminal.
type ProgressOutput struct {
	// ErrOut is the redacting standard error.
	ErrOut io.Writer
	// Terminal is standard error as the process has it: an *os.File that
	// is a terminal makes progress live.
	Terminal io.Writer
	// Console is standard error beneath ErrOut, shared with a live block.
	Console  *render.Console
	Redactor *redact.Redactor
	Environ  []string
}

// options are how progress renders on standard error, and the writer it
// renders to: live on a terminal (its size, colors unless NO_COLOR,
// attached to the console so that other lines go above it).
func (p ProgressOutput) options(verb string) (render.ProgressOptions, io.Writer) {
	opts := render.ProgressOptions{Verb: verb, Redactor: p.Redactor}
	if f, ok := p.Terminal.(*os.File); ok && p.Console != nil && term.IsTerminal(int(f.Fd())) {
		opts.Live = true
		opts.Color = os.Getenv("NO_COLOR") == "" && envLookup(p.Environ, "NO_COLOR") == ""
		if w, h, err := term.GetSize(int(f.Fd())); err == nil {
			opts.Width, opts.Height = w, h
		}
		// warnings and client logs written meanwhile go above the block
		opts.Console = p.Console
		return opts, p.Redactor.Writer(p.Console.Terminal())
	}
	return opts, p.ErrOut
}

// progress returns the renderer of a run of doc's steps in order.
func (p ProgressOutput) progress(verb string, doc *load.Document, order []int) *render.Progress {
	opts, w := p.options(verb)
	return render.NewProgress(w, stepInfos(doc, order), opts)
}

func envLookup(environ []string, key string) string {
	for _, kv := range environ {
		if len(kv) > len(key) && kv[:len(key)] == key && kv[len(key)] == '=' {
			return kv[len(key)+1:]
		}
	}
	return ""
}
