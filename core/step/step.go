// Package step is the contract between the engine and the step kinds. An
// Executor runs one step kind and describes it to the spec (Kind: its
// action key, its block's shape, validation and summary); the entrypoint
// registers every executor explicitly (no init(), no switch over kinds
// anywhere else), and the Registry built from them is what the loader,
// the schema, the input hash and the run ask. Optional capabilities are
// separate interfaces an executor may implement: Planner (live plan),
// Destroyer (destroy), Differ (diff), InputDeclarer (what the state
// record's input hash reads). docs/step-kinds.md says how to add a kind.
package step

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/kube"
	"khook.io/core/objects"
	"khook.io/core/redact"
	"khook.io/core/spec"
)

// Request is everything an executor needs for one attempt of one step.
type Request struct {
	Step     *spec.Step
	SpecName string
	// BaseDir anchors the spec's local paths (the spec file's folder).
	BaseDir string
	// Attempt is 1 for the first try.
	Attempt int
	// Timeout bounds this attempt; ctx carries the same deadline.
	Timeout time.Duration
	// DefaultNamespace replaces "default" wherever the spec leaves a
	// namespace to its default (kubectl's -n, helm's --namespace).
	DefaultNamespace string
	Kube             *kube.Clients
	// FieldManager is the field manager of every write the step makes;
	// empty means objects.DefaultFieldManager ("khook").
	FieldManager string
	// HTTP fetches url: sources (manifests, values).
	HTTP *http.Client
	// Redactor masks secrets. An executor masks nothing it returns: the
	// engine calls it through RunStep, PlanStep, DiffStep, DestroyStep
	// and PlanDestroyStep, which mask all of it, and masks what it
	// reports through Log, Warn and Notes. An executor uses it where it
	// must mask before it cuts or compares (a log excerpt, a diff).
	Redactor *redact.Redactor
	// Log reports progress ("waiting for 2 pods"). Safe for concurrent use.
	Log func(format string, args ...any)
	// Warn reports a warning of the step (the API server's, helm's, one
	// kubectl's apply would print), redacted by Warnf; each is shown once
	// per step, on standard error. Nil drops them. Safe for concurrent use.
	Warn func(text string)
	// Notes receives what a helm step's release prints after an install or
	// upgrade (NOTES.txt), headed by the release's name; nil (the default:
	// -v 1 sets it) drops them.
	Notes func(release, text string)
	// Run identifies the khook run the step belongs to; the zero Run is
	// a run that knows nothing of other runs.
	Run RunInfo
	// ForceCRDs lets destroy delete a CRD the spec created whose kind has
	// custom resources the spec did not create (--force-crds).
	ForceCRDs bool
	// ForceCRDsSetting is how the caller spells that setting, for the
	// reason of a refusal ("--force-crds"; "": neutrally).
	ForceCRDsSetting string
	// Replace: --replace names the step, so it runs even where it would
	// find nothing to do (Terraform's -replace): a helm release deployed
	// with the same chart, values and objects is upgraded all the same (a
	// new revision, hooks run). Executors that always write ignore it.
	Replace bool
	// DriftDefaults is the spec's defaults.drift: the drift policy of
	// every step that compares its objects with the cluster (helm:,
	// apply:), under the step's own drift: block (DriftPolicy).
	DriftDefaults *spec.Drift
	// Planned is, for Destroy, the step's destroy plan as it was shown
	// and confirmed (its PlanDestroy's, with the run lock held): Destroy
	// carries out exactly it, an object changed since refused, and plans
	// nothing again. Nil: Destroy plans now and carries out that plan
	// (destroy --yes, the provider).
	Planned *DestroyPlan
}

// DriftPolicy is the drift policy of the request's step, whose own
// drift: block is own: the spec's defaults.drift merged with it
// (spec.MergeDrift), read.
func (r *Request) DriftPolicy(own *spec.Drift) (objects.Policy, error) {
	return objects.NewPolicy(spec.MergeDrift(r.DriftDefaults, own))
}

// RunInfo identifies one khook run (one command on one cluster), for what a
// step writes that another run must recognise: a helm release's revision
// carries its ID as the label RunLabel, so a later run can tell a
// revision left pending by a run that is gone from one a live run is
// still working on.
type RunInfo struct {
	// ID is the run's id: the holder identity of its run lock when the
	// spec has a state record, else an id of its own. Empty: unknown.
	ID string
	// Abandoned reports whether the run of id is known to be gone: it held
	// this spec's run lock, stopped renewing it (killed), and this run took
	// the expired lock over. Nil, or false: not known to be gone (it may
	// be running).
	Abandoned func(id string) bool
	// Lock names the run lock the run holds (RunLockLabel's value), ""
	// without one: what another run wrote under it was written by a run
	// that has ended, since this run holds it now.
	Lock string
	// Ops is what the run operates on now (nil: unknown), so that a step
	// does not take what another step of the same run is working on for
	// something this run left behind.
	Ops *Operations
}

// RunLockLabel is the label that names, next to RunLabel, the run lock
// the writing run held.
const RunLockLabel = "khook.io/run-lock"

// Operations counts a run's operations in progress by what they act on
// (a helm release: "namespace/name"). Safe for concurrent use; the nil
// *Operations knows of none.
type Operations struct {
	mu sync.Mutex
	n  map[string]int
}

// Enter marks key as operated on until leave is called; alone reports
// whether no other operation of the run was on it (false for a nil
// *Operations: it cannot tell).
func (o *Operations) Enter(key string) (alone bool, leave func()) {
	if o == nil {
		return false, func() {}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[key]++
	alone = o.n[key] == 1
	var once sync.Once
	return alone, func() {
		once.Do(func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.n[key]--; o.n[key] == 0 {
				delete(o.n, key)
			}
		})
	}
}

// RunLabel is the label that names, on what a run writes for others to
// recognise (a helm release revision), the id of the khook run that wrote
// it.
const RunLabel = "khook.io/run"

// IsAbandoned reports whether the run of id is known to be gone.
func (r RunInfo) IsAbandoned(id string) bool {
	return id != "" && r.Abandoned != nil && r.Abandoned(id)
}

// Logf reports progress with every secret masked (object names and a
// waiter's current values come from manifests); a request without a Log
// drops it.
func (r *Request) Logf(format string, args ...any) {
	if r.Log != nil {
		r.Log("%s", r.Redactor.String(fmt.Sprintf(format, args...)))
	}
}

// Warnf reports a warning with every secret masked; a request without a
// Warn drops it.
func (r *Request) Warnf(format string, args ...any) {
	if r.Warn != nil {
		r.Warn(r.Redactor.String(fmt.Sprintf(format, args...)))
	}
}

// Progress is Logf of one line, for the callbacks of the waiter and the
// object manager.
func (r *Request) Progress(line string) { r.Logf("%s", line) }

// Objects returns the object manager of this request: its clients, field
// manager and redactor. One manager serves one attempt (it remembers the
// kinds the cluster does not serve).
func (r *Request) Objects() *objects.Manager {
	return objects.New(r.Kube, objects.Options{FieldManager: r.FieldManager, Redactor: r.Redactor, CreatedBy: r.SpecName})
}

// redactErr returns err with every secret masked in its message (still
// unwrappable); nil stays nil. An interruption's note is masked too.
func (r *Request) redactErr(err error) error {
	if err == nil {
		return nil
	}
	var ie *interruptedError
	if errors.As(err, &ie) && err == error(ie) {
		return &interruptedError{note: r.Redactor.String(ie.note), err: r.Redactor.Error(ie.err)}
	}
	return r.Redactor.Error(err)
}

// redactOutcome masks every secret in what an executor's Run or Destroy
// returns, in place (an error and a message may quote a manifest, a
// server's answer or a pod's log): RunStep and DestroyStep call it.
func (r *Request) redactOutcome(out *Outcome, err *error) {
	out.Message, out.SkipReason = r.Redactor.String(out.Message), r.Redactor.String(out.SkipReason)
	out.Drift, out.Kept = redactAll(r.Redactor, out.Drift), redactAll(r.Redactor, out.Kept)
	*err = r.redactErr(*err)
}

// redactPrediction is redactOutcome for a Plan: a failed plan returns no
// prediction.
func (r *Request) redactPrediction(p *Prediction, err *error) {
	if *err != nil {
		*p, *err = Prediction{}, r.redactErr(*err)
		return
	}
	*p = p.Redacted(r.Redactor)
}

// redactDiff is redactOutcome for a Diff, an *UnavailableError's reason
// included: a failed diff returns no objects.
func (r *Request) redactDiff(d *Diff, err *error) {
	var un *UnavailableError
	switch {
	case errors.As(*err, &un):
		*d, *err = Diff{}, &UnavailableError{Reason: r.Redactor.String(un.Reason)}
	case *err != nil:
		*d, *err = Diff{}, r.redactErr(*err)
	default:
		*d = d.Redacted(r.Redactor)
	}
}

// WithCause is an error whose message is msg (which already says what
// cause means) and which unwraps to cause, so errors.Is/As still see it.
func WithCause(msg string, cause error) error { return &causeError{msg: msg, err: cause} }

type causeError struct {
	msg string
	err error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.err }

// Interrupted is the error of an attempt the run's interruption (Ctrl-C)
// cut short, saying what the step left behind, such as "deleted Job x,
// which was still running" or "Job x left running: ...". It unwraps to
// err; the scheduler reports the step interrupted with the note.
func Interrupted(note string, err error) error { return &interruptedError{note: note, err: err} }

type interruptedError struct {
	note string
	err  error
}

func (e *interruptedError) Error() string         { return e.note + ": " + e.err.Error() }
func (e *interruptedError) Unwrap() error         { return e.err }
func (e *interruptedError) InterruptNote() string { return e.note }

// Namespace returns ns, or the request's default namespace when ns is
// empty, or "default".
func (r *Request) Namespace(ns string) string {
	switch {
	case ns != "":
		return ns
	case r.DefaultNamespace != "":
		return r.DefaultNamespace
	}
	return "default"
}

// Outcome is what one successful attempt did.
type Outcome struct {
	// Skipped is set when the step's skipIf held: success without work.
	Skipped    bool
	SkipReason string
	// Message summarizes what happened, in one line.
	Message string
	// Changed: the attempt changed something in the cluster (created,
	// configured, upgraded, patched, deleted or restarted something, or ran
	// a Job); what found everything as the spec says (unchanged, already
	// absent, a wait) leaves it false. A step with triggeredBy runs only
	// when one of its triggers changed something in the run.
	Changed bool
	// Drift are the objects the step found drifted and left as they are
	// (drift mode warn), one line each; Kept the fields it left to other
	// writers or ignored ("kept: ConfigMap/inj-ca data.ca (written by
	// cainjector)"). The Message says them too.
	Drift, Kept []string
}

// Executor runs one step kind.
type Executor interface {
	// Kind describes the kind to the spec: its action key (helm, apply,
	// ...), its block, which validates and summarizes itself, and a line
	// about it.
	Kind() spec.StepKind
	// Run makes one attempt. The scheduler handles timeout, retries and
	// onError; Run returns an error that says what failed.
	Run(ctx context.Context, req *Request) (Outcome, error)
}

// Prediction is what a live plan expects a step to do.
type Prediction struct {
	// Action is what the step would do, as its kind declares it (the
	// shared ones: ActionCreate, ...); ActionUnknown comes with a Reason.
	Action  Action
	Reason  string
	Details []string
	// Kept are the fields the step would leave to other writers or
	// ignore, Drift the objects it would find drifted and leave as they
	// are (drift mode warn), one line each (Outcome's).
	Kept, Drift []string
}

// Redacted is p with its reason and details masked by r.
func (p Prediction) Redacted(r *redact.Redactor) Prediction {
	p.Reason = r.String(p.Reason)
	p.Details = redactAll(r, p.Details)
	p.Kept = redactAll(r, p.Kept)
	p.Drift = redactAll(r, p.Drift)
	return p
}

// redactAll masks each of lines with r, in a new slice.
func redactAll(r *redact.Redactor, lines []string) []string {
	if lines == nil {
		return nil
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = r.String(l)
	}
	return out
}

// Planner predicts a step's action against the cluster without changing
// it.
type Planner interface {
	Plan(ctx context.Context, req *Request) (Prediction, error)
}

// Destroyer undoes what a step created; steps without one are skipped by
// destroy with a reason.
type Destroyer interface {
	Destroy(ctx context.Context, req *Request) (Outcome, error)
}

// ObjectDiff is one object a step would write, before and after: Live as
// it is in the cluster, Merged as apply would leave it (for apply: and
// patch:, what a server-side dry run of the very request apply makes
// returns; for helm:, the object in the release's current and rendered
// manifests). Live is nil for an object apply would create, Merged nil
// for one it would delete (an object a helm upgrade drops). Both may hold
// secret values: whoever prints them masks them first.
type ObjectDiff struct {
	// Name identifies the object for people: "Deployment web/api",
	// "ClusterRole admin".
	Name         string
	Live, Merged *unstructured.Unstructured
	// Unavailable says why this object cannot be diffed yet (its kind or
	// namespace comes from an earlier step); Live and Merged are nil.
	Unavailable string
	// Note qualifies Merged when it is not what the server returned (an
	// object in a namespace this step creates first cannot be dry-run).
	Note string
}

// Diff is what applying a step would change.
type Diff struct {
	// Objects lists the objects the step writes, in the order it writes
	// them, changed or not.
	Objects []ObjectDiff
	// Skip is set, with the reason, when apply would skip the step
	// (skipIf holds); Objects is then empty.
	Skip string
	// Changes reports a change beyond the objects' content: a new Helm
	// revision whose objects are all the same still changes the release.
	Changes bool
	// Notes are lines about the step as a whole ("upgrade release x from
	// revision 3", "namespace y will be created").
	Notes []string
	// Kept and Drift are the Prediction's: fields left to other writers
	// or ignored, objects that drifted and are left (drift mode warn).
	Kept, Drift []string
}

// Redacted is d with its text masked by r: the skip reason, the notes and
// each object's name, unavailability and note. The objects' content is
// masked where it is shown (diff.Prepare).
func (d Diff) Redacted(r *redact.Redactor) Diff {
	d.Skip = r.String(d.Skip)
	d.Notes = redactAll(r, d.Notes)
	d.Kept, d.Drift = redactAll(r, d.Kept), redactAll(r, d.Drift)
	objs := make([]ObjectDiff, len(d.Objects))
	for i, o := range d.Objects {
		o.Name, o.Unavailable, o.Note = r.String(o.Name), r.String(o.Unavailable), r.String(o.Note)
		objs[i] = o
	}
	if d.Objects == nil {
		objs = nil
	}
	d.Objects = objs
	return d
}

// UnavailableError is a step whose diff cannot be computed yet, typically
// because what it writes needs a kind or a namespace only an earlier step
// creates. The reason is one line.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string { return "diff unavailable: " + e.Reason }

// Differ computes what applying a step would change, without changing
// anything: every write is a server-side dry run. A step whose diff
// cannot be computed yet returns an *UnavailableError.
type Differ interface {
	Diff(ctx context.Context, req *Request) (Diff, error)
}

// Registry maps step kinds to their executors, and holds the kinds'
// descriptions (Kinds) in the order they were registered.
type Registry struct {
	byType map[string]Executor
	kinds  *spec.StepKinds
}

// NewRegistry registers executors, in order: two of one kind, or a kind
// the spec refuses (spec.NewStepKinds), is an error.
func NewRegistry(execs ...Executor) (*Registry, error) {
	r := &Registry{byType: make(map[string]Executor, len(execs))}
	kinds := make([]spec.StepKind, len(execs))
	for i, e := range execs {
		kinds[i] = e.Kind()
		r.byType[kinds[i].Name] = e
	}
	k, err := spec.NewStepKinds(kinds...)
	if err != nil {
		return nil, fmt.Errorf("step kinds: %w", err)
	}
	r.kinds = k
	return r, nil
}

// Get returns the executor for a step type.
func (r *Registry) Get(typ string) (Executor, bool) {
	if r == nil {
		return nil, false
	}
	e, ok := r.byType[typ]
	return e, ok
}

// Kinds returns the registered kinds' descriptions, in registration
// order: what a spec's steps may be (package load decodes with them,
// package schema describes them). A nil Registry has none.
func (r *Registry) Kinds() *spec.StepKinds {
	if r == nil {
		return nil
	}
	return r.kinds
}

// Types lists the registered step types, sorted.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.byType))
	for t := range r.byType {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
