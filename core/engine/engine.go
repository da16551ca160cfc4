// Package engine is khook's engine as a library, as helm's pkg/action is
// helm's: the run of a loaded spec on one cluster (connect, take the
// state record's run lock, read the record, decide every step's fate,
// run, write the record, release) and plan, diff, status and destroy's
// plan on the same decisions. It has no flags and prints nothing: what
// happens goes out as events (event.Sink) and notes (Note), which the
// caller renders, redacted; results and errors are typed values.
//
// The CLI (core/cli) and the Terraform provider are its callers: the CLI
// parses flags and renders; the provider maps its resource to the same
// calls. Dispose (fate.go) is the one place a step's fate is decided.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	"khook.io/core/event"
	"khook.io/core/fetch"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
)

// CheckTimeout bounds the up-front check of the cluster (credential
// plugins included) and the other calls made before the steps run, unless
// the connection sets a request timeout (kubectl's --request-timeout).
const CheckTimeout = kube.DefaultCheckTimeout

// Engine is what every run of khook shares: the step executors, the run's
// redactor and the connection's client settings. It holds no cluster:
// Connect makes one.
type Engine struct {
	// Steps builds the step executors (the entrypoint registers them);
	// nil: the cluster operations are unavailable.
	Steps func() (*step.Registry, error)
	// Redactor is the run's: it knows every secret the spec uses.
	Redactor *redact.Redactor
	// BeforeClients, when set, is called before clients are built (the
	// CLI routes client-go's logs then).
	BeforeClients func()
	// QPS and Burst replace khook's client-side rate limits when set
	// (kube.Options).
	QPS   float32
	Burst int
	// ReleaseNotes: the NOTES of the releases helm steps install or
	// upgrade are notes (NoteRelease); the CLI's -v 1.
	ReleaseNotes bool
}

// Target is one cluster to connect to, and where what the engine says
// about it goes.
type Target struct {
	// Getter is the cluster's connection; nil: none (kube.ErrNoKubeconfig).
	Getter genericclioptions.RESTClientGetter
	// Warnings receives the API server's warnings (kube.Options); nil
	// drops them.
	Warnings io.Writer
	// Notes receives the notes of operations on the cluster; nil drops
	// them.
	Notes func(Note)
	// Events receives every event of the cluster's runs besides the
	// progress sink Execute is given, from the start: the phases of the
	// run lock and the state record too, which come before Execute (the
	// CLI's trace). Nil drops them.
	Events event.Sink
}

// Options are the day-2 settings of one command on a cluster.
type Options struct {
	// Selection is the selection settings resolved against the spec
	// (Resolve); nil: every step.
	Selection *Selection
	// FieldManager is the field manager of every write the steps make
	// ("": khook's, and helm's for helm's writes).
	FieldManager string
	// ForceCRDs deletes a CRD the spec created even when its kind has
	// custom resources the spec did not create (destroy).
	ForceCRDs bool
	// TraceID is the id of the trace the command's run belongs to
	// (OpenTelemetry, hex), kept in the state record; "": none.
	TraceID string
	// Spelling is how the caller spells the settings the command's
	// messages name (nil: neutrally).
	Spelling Spelling
}

// Cluster is one spec connected to one cluster: what plan, diff, status
// and the runs of apply and destroy work on.
type Cluster struct {
	red       *redact.Redactor
	doc       *load.Document
	clients   *kube.Clients
	registry  *step.Registry
	http      *http.Client
	namespace string // where the spec leaves a namespace to its default
	opts      Options
	notes     func(Note)
	// releaseNotes: NOTES of releases are notes
	releaseNotes bool
	// events receives the run's events besides the progress (Target.Events;
	// never nil)
	events event.Sink
	warned sync.Map // step name + "\x00" + text → struct{}
}

// Connect builds the clients of t's cluster, checking it up front (a
// missing kubeconfig or an unreachable server is one clear error before
// anything runs), for doc.
func (e *Engine) Connect(ctx context.Context, doc *load.Document, t Target, o Options) (*Cluster, error) {
	clients, err := e.Clients(ctx, t)
	if err != nil {
		return nil, err
	}
	if e.Steps == nil {
		return nil, errors.New("this build of khook has no step executors")
	}
	reg, err := e.Steps()
	if err != nil {
		return nil, err
	}
	return &Cluster{red: e.redactor(), doc: doc, clients: clients, registry: reg, http: fetch.NewClient(), namespace: defaultNamespace(t.Getter),
		opts: o, notes: t.Notes, releaseNotes: e.ReleaseNotes, events: event.Tee(t.Events)}, nil
}

// Attach is Connect with clients built and checked already (a caller's
// own, a test's fake clientset): nothing is checked.
func (e *Engine) Attach(doc *load.Document, clients *kube.Clients, t Target, o Options) *Cluster {
	return &Cluster{red: e.redactor(), doc: doc, clients: clients, registry: e.Registry(), http: fetch.NewClient(), namespace: "default",
		opts: o, notes: t.Notes, releaseNotes: e.ReleaseNotes, events: event.Tee(t.Events)}
}

// Clients builds and checks the clients of t's cluster.
func (e *Engine) Clients(ctx context.Context, t Target) (*kube.Clients, error) {
	if t.Getter == nil {
		return nil, kube.ErrNoKubeconfig
	}
	if e.BeforeClients != nil {
		e.BeforeClients()
	}
	cl, err := kube.New(t.Getter, kube.Options{Warnings: t.Warnings, QPS: e.QPS, Burst: e.Burst})
	if err != nil {
		return nil, err
	}
	if err := cl.Check(ctx, CheckTimeout); err != nil {
		return nil, err
	}
	return cl, nil
}

// Registry is the step executors, or nil when there are none (the offline
// commands name what a step's hash cannot see with them).
func (e *Engine) Registry() *step.Registry {
	if e == nil || e.Steps == nil {
		return nil
	}
	reg, err := e.Steps()
	if err != nil {
		return nil
	}
	return reg
}

func (e *Engine) redactor() *redact.Redactor {
	if e.Redactor == nil {
		e.Redactor = redact.New()
	}
	return e.Redactor
}

// Doc is the spec the cluster runs.
func (c *Cluster) Doc() *load.Document { return c.doc }

// Clients are the cluster's clients.
func (c *Cluster) Clients() *kube.Clients { return c.clients }

// Name names the cluster in reports: its kubeconfig context, else its
// server.
func (c *Cluster) Name() string {
	if n := c.clients.Identity.Context; n != "" {
		return n
	}
	return c.clients.Server
}

// ID reads the cluster's identity (kube.ClusterID), bounded as the
// up-front check is.
func (c *Cluster) ID(ctx context.Context) (kube.ClusterID, error) {
	ctx, cancel := c.preflight(ctx)
	defer cancel()
	return c.clients.ClusterID(ctx)
}

// note emits a note.
func (c *Cluster) note(kind NoteKind, format string, args ...any) {
	if c.notes != nil {
		c.notes(Note{Kind: kind, Text: fmt.Sprintf(format, args...)})
	}
}

// warn reports a step's warning text once per step, redacted, as kubectl
// reports the API server's ("Warning: ..."), naming the step.
func (c *Cluster) warn(stepName string) func(string) {
	if c.notes == nil {
		return nil
	}
	return func(text string) {
		text = strings.TrimSpace(c.red.String(text))
		if text == "" {
			return
		}
		if _, seen := c.warned.LoadOrStore(stepName+"\x00"+text, struct{}{}); seen {
			return
		}
		c.notes(Note{Kind: NoteStepWarning, Subject: stepName, Text: text})
	}
}

// releaseNotesFunc reports a release's NOTES, redacted; nil unless the
// engine reports them.
func (c *Cluster) releaseNotesFunc() func(release, text string) {
	if !c.releaseNotes || c.notes == nil {
		return nil
	}
	return func(release, text string) {
		text = strings.TrimRight(c.red.String(text), "\n")
		if strings.TrimSpace(text) == "" {
			return
		}
		c.notes(Note{Kind: NoteRelease, Subject: release, Text: text})
	}
}

// preflight bounds the calls made before the steps run (the state record
// is read and marked) as the up-front check is bounded.
func (c *Cluster) preflight(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := CheckTimeout
	if c.clients != nil && c.clients.Config != nil && c.clients.Config.Timeout > 0 {
		timeout = c.clients.Config.Timeout
	}
	return context.WithTimeout(ctx, timeout)
}

// defaultNamespace is the connection's namespace (-n, else the kubeconfig
// context's, else "default"), as kubectl and helm use it.
func defaultNamespace(getter genericclioptions.RESTClientGetter) string {
	ns, _, err := getter.ToRawKubeConfigLoader().Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}

// phase reports a phase of the run itself (the run lock, the state
// record) to the run's events; the function it returns ends it.
func (c *Cluster) phase(phase, detail string) func(error) {
	c.events.Emit(event.Event{Kind: event.PhaseStarted, Time: time.Now(), Phase: phase, Detail: detail})
	return func(err error) {
		e := event.Event{Kind: event.PhaseEnded, Time: time.Now(), Phase: phase, Detail: detail}
		if err != nil {
			e.Message = err.Error()
		}
		c.events.Emit(e)
	}
}

// driftDefaults is the spec's defaults.drift, nil when it has none.
func (c *Cluster) driftDefaults() *spec.Drift {
	if d := c.doc.Spec.Defaults; d != nil {
		return d.Drift
	}
	return nil
}

// executor is step i's executor.
func (c *Cluster) executor(i int) (step.Executor, error) {
	typ := c.doc.Spec.Steps[i].Type()
	exec, ok := c.registry.Get(typ)
	if !ok {
		return nil, fmt.Errorf("this build of khook has no executor for %s steps", typ)
	}
	return exec, nil
}

// stepCall bounds ctx by step i's timeout and builds the request of its
// one call (attempt 1) with fate d, progress lines going to sink: what a
// plan, a diff and a destroy plan ask of an executor. cancel ends the
// call's context.
func (c *Cluster) stepCall(ctx context.Context, i int, d Disposition, k call) (context.Context, *step.Request, context.CancelFunc) {
	timeout := c.doc.Settings(i).Timeout.Duration()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, c.request(i, 1, timeout, d, k), cancel
}

// call is what one command's calls of the executors share, kept with the
// command, never on the Cluster: where their progress lines go, and the
// run they belong to (zero for plan, diff and a destroy preview, which
// are no run).
type call struct {
	sink event.Sink
	run  step.RunInfo
}

// quiet is the call of a command that shows no progress and is no run.
var quiet = call{sink: event.Discard}

// request builds the request for step i, attempt n, with fate d: Dispose
// alone says whether --replace forces it.
func (c *Cluster) request(i, attempt int, timeout time.Duration, d Disposition, k call) *step.Request {
	st := &c.doc.Spec.Steps[i]
	return &step.Request{
		Step:             st,
		SpecName:         c.doc.Spec.Metadata.Name,
		BaseDir:          c.doc.BaseDir,
		Attempt:          attempt,
		Timeout:          timeout,
		DefaultNamespace: c.namespace,
		Kube:             c.clients,
		HTTP:             c.http,
		Redactor:         c.red,
		Run:              k.run,
		ForceCRDs:        c.opts.ForceCRDs,
		ForceCRDsSetting: c.opts.Spelling.Of(SettingForceCRDs),
		Replace:          d.Fate == FateForced,
		DriftDefaults:    c.driftDefaults(),
		FieldManager:     c.opts.FieldManager,
		Warn:             c.warn(st.Name),
		Notes:            c.releaseNotesFunc(),
		Log: func(format string, args ...any) {
			k.sink.Emit(event.Event{Kind: event.StepProgress, Time: time.Now(), Step: st.Name, Type: st.Type(), Message: c.red.String(fmt.Sprintf(format, args...))})
		},
	}
}

// redacting is sink with the text of every event masked by red: what an
// executor emits deep inside its attempt (its phases, the causes of its
// waits) passes through it, as what it returns passes through the step
// package's RunStep.
func redacting(sink event.Sink, red *redact.Redactor) event.Sink {
	return event.SinkFunc(func(e event.Event) {
		e.Message, e.Detail = red.String(e.Message), red.String(e.Detail)
		sink.Emit(e)
	})
}
