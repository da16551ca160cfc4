package cli

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
	"khook.io/core/engine/fleet"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/step"
	"khook.io/core/tracing"
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
func (o *SpecOptions) Load() (*load.Document, error) { return o.loader().Load(o.Options) }

// loader is the options' loader (a new one when unset).
func (o *SpecOptions) loader() *load.Loader {
	if o.Loader == nil {
		o.Loader = &load.Loader{}
	}
	return o.Loader
}

// ClusterFlags are the flags of the commands that take a spec to
// clusters (plan, diff, status, apply, destroy): the spec, the fleet and
// the selection.
type ClusterFlags struct {
	Spec   SpecFlags
	Fleet  FleetFlags
	Select SelectFlags
}

func newClusterFlags() ClusterFlags {
	return ClusterFlags{Spec: NewSpecFlags(), Fleet: NewFleetFlags()}
}

// AddFlags registers the flags of command; contextFlag is the
// connection's flag for one context.
func (f *ClusterFlags) AddFlags(cmd *cobra.Command, contextFlag, command string) {
	f.Spec.AddFlags(cmd)
	f.Fleet.AddFlags(cmd, contextFlag)
	f.Select.AddFlags(cmd, command)
}

// ClusterOptions are ClusterFlags resolved, and the command's ways to the
// clusters and to the user: the report goes to Streams.Out, warnings and
// progress to Streams.ErrOut, every line through Redactor.
type ClusterOptions struct {
	Spec     *SpecOptions
	Fleet    FleetFlags
	Select   SelectFlags
	Streams  genericiooptions.IOStreams
	Redactor *redact.Redactor
	// Clusters reaches the cluster (each of a fleet's).
	Clusters *Clusters
}

// toOptions checks the flags (after checks, the command's own) and
// resolves them.
func (f *ClusterFlags) toOptions(streams genericiooptions.IOStreams, src SpecSource, clusters *Clusters, checks ...error) (ClusterOptions, error) {
	if err := errors.Join(append([]error{f.Fleet.check(), f.Select.check()}, checks...)...); err != nil {
		return ClusterOptions{}, err
	}
	so, err := f.Spec.ToOptions(src)
	if err != nil {
		return ClusterOptions{}, err
	}
	return ClusterOptions{Spec: so, Fleet: f.Fleet, Select: f.Select, Streams: streams, Redactor: src.Redactor, Clusters: clusters}, nil
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
	// Warnings receives the API server's warnings and the engine's notes
	// (standard error).
	Warnings io.Writer
	// BeforeClients, when set, is called before clients are built (the
	// run routes client-go's logs then; see Config.Logs).
	BeforeClients func()
	// Verbosity, when set, is -v: from 1 on, the NOTES of the releases
	// helm steps install or upgrade are written with the warnings.
	Verbosity func() int
}

// engine is the engine of the command's run.
func (c *Clusters) engine() *engine.Engine {
	if c == nil {
		return &engine.Engine{}
	}
	e := &engine.Engine{Steps: c.Steps, Redactor: c.Redactor, BeforeClients: c.BeforeClients}
	if l, ok := c.Connection.(RateLimited); ok {
		e.QPS, e.Burst = l.RateLimits()
	}
	if c.Verbosity != nil && c.Verbosity() >= 1 {
		e.ReleaseNotes = true
	}
	return e
}

// getter is the connection's, nil without one.
func (c *Clusters) getter() genericclioptions.RESTClientGetter {
	if c == nil || c.Connection == nil {
		return nil
	}
	return c.Connection.RESTClientGetter()
}

// target is the cluster getter names, the API server's warnings going to
// warnings and the engine's notes to notes (both standard error; a
// fleet's cluster's, a buffer of its section).
func target(getter genericclioptions.RESTClientGetter, warnings, notes io.Writer) engine.Target {
	return engine.Target{Getter: getter, Warnings: warnings, Notes: render.Notes(notes)}
}

// connect connects the connection's cluster for doc (checked up front);
// events, when not nil, receives every event of its runs (the trace).
func (c *Clusters) connect(ctx context.Context, doc *load.Document, o engine.Options, events *tracing.Sink) (*engine.Cluster, error) {
	var w io.Writer
	if c != nil {
		w = c.Warnings
	}
	t := target(c.getter(), w, w)
	if events != nil {
		t.Events = events
	}
	return c.engine().Connect(ctx, doc, t, o)
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

// spelling spells a setting the engine's messages name as the CLI's flag,
// the connection's own for one context.
func (c *Clusters) spelling() engine.Spelling {
	flag := "--" + c.contextFlag()
	return func(s engine.Setting) string {
		if s == fleet.SettingContext {
			return flag
		}
		return flagOf(s)
	}
}

// ProgressOutput is where a run's progress goes (render.ProgressOutput).
type ProgressOutput = render.ProgressOutput

func envLookup(environ []string, key string) string {
	for _, kv := range environ {
		if len(kv) > len(key) && kv[:len(key)] == key && kv[len(key)] == '=' {
			return kv[len(key)+1:]
		}
	}
	return ""
}
