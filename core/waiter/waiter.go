// Package waiter blocks until Kubernetes objects meet a wait.for condition
// (kubectl wait's grammar: condition=, jsonpath=, delete), using watches so
// a wait ends promptly once the condition holds. apply's waitFor, the wait
// step, delete (waiting until gone), rollout and job all wait through it.
//
// Semantics:
//   - a target naming one object waits for it to exist and meet the
//     condition (for delete: to be gone, or to be replaced by an object of
//     another UID);
//   - a target by type (with or without selectors) waits until at least one
//     object matches and every matching object meets the condition (for
//     delete: until none matches);
//   - conditions decide each object as kubectl wait does: a missing
//     JSONPath means "not yet", and what kubectl wait refuses (a JSONPath
//     with several results, a map or list compared with a value) ends the
//     wait at once with kubectl's reason;
//   - ctx bounds the wait; on expiry the error says which objects were not
//     ready and why (their current value of the condition).
//
// Every target is watched by a client-go Reflector of its own (a list,
// then a watch that is resumed or re-listed when it drops); the objects
// are evaluated after every event, so a wait returns within milliseconds
// of the condition holding. While the API server cannot be reached, the
// watches retry about once a second (retry) rather than client-go's
// default of up to a minute, and progress says the server is unreachable,
// so a wait resumes within about a second of the server's return.
//
// A wait that makes no progress (no change of the objects it watches) for
// StallAfter asks core/diagnose why, and again every RediagnoseEvery while
// it stays so; progress gets one line ("stuck: <cause>", what is wrong
// first, then the object it comes from) when the cause the
// cluster reports appears or changes. A timeout, and an object that can
// never become ready, are diagnosed once more, with a crashing container's
// last log lines: the error ends with "; cause: <cause>". Nothing is
// diagnosed while the objects change, nor for a wait for deletion.
package waiter

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"khook.io/core/diagnose"
	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/spec"
)

// When a wait looks for why it makes no progress (see the package
// documentation).
const (
	// DefaultStallAfter: no change of the watched objects for this long
	// starts the first diagnosis.
	DefaultStallAfter = 5 * time.Second
	// RediagnoseEvery: while the objects still do not change, the
	// diagnosis is repeated this often, so a cause that changes is shown.
	RediagnoseEvery = 10 * time.Second
	// DefaultFinalDiagnosis bounds the diagnosis of a wait that ended
	// (timed out, or an object that failed): the step's deadline has
	// passed or is near.
	DefaultFinalDiagnosis = 3 * time.Second
)

// Target is what to wait on: one object (Name set) or every object of a
// type in a scope.
type Target struct {
	Mapping       *meta.RESTMapping
	Namespace     string // ignored for cluster-scoped kinds and with AllNamespaces
	Name          string
	AllNamespaces bool
	LabelSelector string
	FieldSelector string
	// UID, when set with Name and a delete condition, treats an object of
	// the same name but another UID as gone (it was re-created).
	UID types.UID
	// Deleted, when set on a named target, decides it once it no longer
	// exists: by last, its final state (the delete event's object) when
	// it was deleted while watched, or nil when the wait never saw it. A
	// Job with ttlSecondsAfterFinished is deleted as soon as it finishes,
	// often before a wait has looked at its last state. Unset: a target
	// that does not exist is waited for (it may yet be created). Unused
	// with Options.Gone.
	Deleted CheckFunc
}

// Until blocks until every target meets cond, ctx ends, or an API error
// makes waiting pointless (forbidden, unknown type). progress, when not
// nil, receives a short line when the set of not-yet-ready objects or
// their current values change ("waiting for condition Ready on 2 of 3
// pods: Pod ns/a: status False (ContainersNotReady) (and 1 more)").
func Until(ctx context.Context, c *kube.Clients, targets []Target, cond spec.WaitFor, progress func(string)) error {
	opts, err := ForCondition(targets, cond, progress)
	if err != nil {
		return err
	}
	return Wait(ctx, c, opts)
}

// ForCondition is the wait Until waits: for cond on targets.
func ForCondition(targets []Target, cond spec.WaitFor, progress func(string)) (Options, error) {
	opts := Options{Targets: targets, What: Describe(cond), Progress: progress}
	if cond.Kind == spec.ForDelete {
		opts.Gone = true
		return opts, nil
	}
	cc, err := NewCondition(cond)
	if err != nil {
		return Options{}, err
	}
	opts.Check = cc.Check
	return opts, nil
}

// Options is a wait in its general form: Until with a condition of the
// caller's (a rollout's status viewer, a Job's outcome).
type Options struct {
	Targets []Target
	// Check decides whether one object is ready. Unused with Gone.
	Check CheckFunc
	// Gone waits for the targets to disappear instead: a named target
	// until it is gone (or has another UID than Target.UID), a type target
	// until nothing matches.
	Gone bool
	// What names what is waited for in messages: "condition Available",
	// "rollout", "completion".
	What string
	// Progress receives a line when the set of not-ready objects, or the
	// current value of one, changes, and when the cause a diagnosis finds
	// appears or changes.
	Progress func(string)
	// Phase is the phase of the step's attempt the wait is reported as
	// (event.Phase): event.PhaseWait when empty, event.PhaseHook for a
	// chart's hook.
	Phase string
	// StallAfter is how long the watched objects may go without a change
	// before the wait is diagnosed; zero is DefaultStallAfter.
	StallAfter time.Duration
	// FinalDiagnosis bounds the diagnosis of a wait that timed out, past
	// its deadline (zero: DefaultFinalDiagnosis); when it finds nothing in
	// time, the last diagnosis since the objects last changed is used.
	FinalDiagnosis time.Duration
	// Redact masks secrets in a crashing container's log lines before
	// they are cut to their bounds, so that no part of a secret is left
	// (nil: the lines are kept as read).
	Redact func(string) string
}

// finalDiagnosis is FinalDiagnosis, or its default.
func (o Options) finalDiagnosis() time.Duration {
	if o.FinalDiagnosis <= 0 {
		return DefaultFinalDiagnosis
	}
	return o.FinalDiagnosis
}

// diagnosis is how a failure's diagnosis reads: with the logs, redacted.
func (o Options) diagnosis() diagnose.Options {
	return diagnose.Options{Logs: true, Redact: o.Redact}
}

// Wait blocks until every target is ready by opts, ctx ends, an API error
// makes waiting pointless (forbidden, unknown type), or opts.Check returns
// an error.
func Wait(ctx context.Context, c *kube.Clients, opts Options) (err error) {
	if len(opts.Targets) == 0 {
		return nil
	}
	if !opts.Gone && opts.Check == nil {
		return errors.New("waiter: no check given")
	}
	if opts.What == "" {
		opts.What = "readiness"
		if opts.Gone {
			opts.What = "deletion"
		}
	}
	// the wait is a phase of the step's attempt, and the cause its
	// failure ends with that attempt's cause (the trace, the timeline)
	phase := opts.Phase
	if phase == "" {
		phase = event.PhaseWait
	}
	end := event.Phase(ctx, phase, opts.What)
	defer func() {
		if cause := CauseOf(err); cause != nil {
			event.Cause(ctx, cause.Brief(), true)
		}
		end(err)
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := startWaiting(ctx, c, opts)
	if err != nil {
		return err
	}
	defer w.stop(cancel)
	return w.loop()
}

// waiting is one Wait under way: its watches, its one timer, the
// diagnosis it runs and what it last showed.
type waiting struct {
	ctx     context.Context // ends with the wait
	c       *kube.Clients
	opts    Options
	d       *diagnose.Diagnoser
	conn    *connection
	watches []*targetWatch
	scopes  []*scopeWatch
	changed chan struct{}
	fatal   chan error
	running sync.WaitGroup // the watches and the diagnosis

	stallAfter time.Duration
	// the one timer of a wait: when to look for why it makes no progress
	// (never for a wait for deletion)
	stall     *time.Timer
	diagnosis chan *diagnose.Cause // the running diagnosis's result, nil when none runs
	stopDiag  context.CancelFunc
	shown     string          // the cause progress shows, "" when none
	found     *diagnose.Cause // the last diagnosis since the objects last changed

	last                  evaluation
	lastKey, lastProgress string
	wasDown               bool
	synced                bool // every watch has listed its objects
	// absent: by watch index, the named targets the API server itself
	// said do not exist (confirmAbsent)
	absent map[int]bool
}

// startWaiting starts the watches of opts's targets and the stall timer.
func startWaiting(ctx context.Context, c *kube.Clients, opts Options) (*waiting, error) {
	w := &waiting{ctx: ctx, c: c, opts: opts, changed: make(chan struct{}, 1), fatal: make(chan error, len(opts.Targets)), absent: map[int]bool{}}
	w.conn = &connection{notify: w.notify}
	var err error
	keepGone := false
	for _, t := range opts.Targets {
		keepGone = keepGone || t.Deleted != nil && !opts.Gone
	}
	w.watches, w.scopes, err = newWatches(c, opts.Targets, w.notify, w.fatal, w.conn, keepGone)
	if err != nil {
		return nil, err
	}
	// The reflectors' log lines (a watch ended by the cancel that ends the
	// wait, a transient error) would be noise: errors reach the caller
	// through fatal, progress and the timeout message instead.
	quiet := klog.NewContext(ctx, logr.Discard())
	for _, sw := range w.scopes {
		w.running.Go(func() { sw.run(quiet) })
	}
	w.d = diagnose.New(c)
	w.stallAfter = opts.StallAfter
	if w.stallAfter <= 0 {
		w.stallAfter = DefaultStallAfter
	}
	w.stall = time.NewTimer(w.stallAfter)
	if opts.Gone {
		w.stall.Stop()
	}
	return w, nil
}

// notify wakes the loop: a watched object changed.
func (w *waiting) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// stop ends the wait's diagnosis, its timer and (cancel) its watches, and
// waits for them: no watch nor diagnosis outlives the wait.
func (w *waiting) stop(cancel context.CancelFunc) {
	w.cancelDiag()
	w.stall.Stop()
	cancel()
	w.running.Wait()
}

// cancelDiag stops the running diagnosis: a change of the objects makes
// its result past, and it is never received.
func (w *waiting) cancelDiag() {
	if w.stopDiag != nil {
		w.stopDiag()
		w.stopDiag, w.diagnosis = nil, nil
	}
}

// loop looks at the objects after every change until they are ready, the
// wait fails or its context ends.
func (w *waiting) loop() error {
	for {
		w.connectionChange()
		if w.synced = w.allSynced(); w.synced {
			if done, err := w.look(); done {
				return err
			}
		}
		select {
		case <-w.changed:
		case <-w.stall.C:
			w.stalled()
		case cause := <-w.diagnosis:
			w.diagnosed(cause)
		case err := <-w.fatal:
			return err
		case <-w.ctx.Done():
			w.cancelDiag()
			return expired(w.ctx, w.d, w.scopes, w.last, w.synced, w.conn, w.opts, w.found)
		}
	}
}

// connectionChange says when the API server goes away or comes back.
func (w *waiting) connectionChange() {
	down, since, why := w.conn.state()
	if down == w.wasDown {
		return
	}
	w.wasDown = down
	if w.opts.Progress != nil {
		w.opts.Progress(connectionLine(w.c, w.opts.What, down, since, why))
	}
	if !down {
		w.lastKey = "" // say again what is pending once it is back
	}
}

func (w *waiting) allSynced() bool {
	for _, sw := range w.scopes {
		if !sw.hasSynced() {
			return false
		}
	}
	return true
}

// look evaluates the objects: done when they are ready (nil) or one can
// never be (its error). Otherwise it says what is pending when that
// changes, and restarts the stall timer when the objects progress.
func (w *waiting) look() (done bool, err error) {
	found := snapshot(w.watches)
	w.confirmAbsent(found)
	ev, err := evaluate(found, w.opts)
	if err != nil {
		return true, failed(w.ctx, w.d, err, w.opts)
	}
	if ev.ready() {
		return true, nil
	}
	w.last = ev
	if key := ev.key(); key != w.lastKey {
		w.lastKey = key
		w.shown = ""
		if w.opts.Progress != nil {
			w.opts.Progress(ev.progressLine(w.opts.What))
		}
	}
	if pk := ev.progressKey(); pk != w.lastProgress {
		// progress: what a diagnosis found may be past; look
		// again only once the objects stop changing
		w.lastProgress = pk
		w.found = nil
		w.cancelDiag()
		if !w.opts.Gone {
			resetTimer(w.stall, w.stallAfter)
		}
	}
	return false, nil
}

// confirmAbsent reads from the API server a named target that its
// gone-judgement (Target.Deleted) would take as never there: a watch's
// first list may come from the API server's watch cache, a moment behind
// a create that has just returned (a hook Job Helm created), which must
// not read as a Job already finished and deleted. Read, it is judged as
// found; not found, it is gone (and not read again); unreadable (the
// server is down), it is waited for, until a relist looks again.
func (w *waiting) confirmAbsent(found []targetObjects) {
	for i := range found {
		to := &found[i]
		if w.opts.Gone || to.t.Deleted == nil || to.t.Name == "" || len(to.objs) > 0 || to.last != nil || w.absent[i] {
			continue
		}
		// without the clients' retries: an outage is said by the watches
		u, err := w.c.Resource(to.t.Mapping, to.t.Namespace).Get(kube.WithoutRetries(w.ctx), to.t.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			u.SetManagedFields(nil)
			to.objs = []*unstructured.Unstructured{u}
		case apierrors.IsNotFound(err):
			w.absent[i] = true
		default:
			to.unconfirmed = true
		}
	}
}

// stalled starts a diagnosis of the objects that made no progress.
func (w *waiting) stalled() {
	if down, _, _ := w.conn.state(); down || !w.synced || w.last.ready() {
		resetTimer(w.stall, w.stallAfter)
		return
	}
	dctx, stop := context.WithTimeout(w.ctx, RediagnoseEvery)
	w.stopDiag, w.diagnosis = stop, make(chan *diagnose.Cause, 1)
	out, objs, d := w.diagnosis, w.last.objects(), w.d
	w.running.Go(func() { out <- d.Diagnose(dctx, objs, diagnose.Options{}) }) // nor a diagnosis
}

// diagnosed shows the cause a diagnosis found when it appears, changes or
// goes.
func (w *waiting) diagnosed(cause *diagnose.Cause) {
	w.cancelDiag()
	resetTimer(w.stall, RediagnoseEvery)
	if down, _, _ := w.conn.state(); down {
		return // the API server went away: what it could not read is not gone
	}
	w.found = cause
	line := ""
	if cause != nil && cause.Warning {
		line = cause.Brief()
	}
	if line == w.shown {
		return
	}
	w.shown = line
	if w.opts.Progress != nil {
		if line != "" {
			event.Cause(w.ctx, line, false)
			w.opts.Progress("stuck: " + line)
		} else {
			w.opts.Progress(w.last.progressLine(w.opts.What)) // the cause is gone
		}
	}
}

// resetTimer makes t fire after dur from now.
func resetTimer(t *time.Timer, dur time.Duration) {
	t.Stop()
	t.Reset(dur) // Go 1.23+: no stale value is received after Reset
}

// failed is the error of an object that can never become ready (its check
// failed), with the diagnosis of that object.
func failed(ctx context.Context, d *diagnose.Diagnoser, err error, opts Options) error {
	var cf *checkFailure
	if !errors.As(err, &cf) {
		return err
	}
	if cf.obj == nil {
		return cf.err // the object is gone, with no state to diagnose
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.finalDiagnosis()) // the deadline may be near or past
	defer cancel()
	cause := d.Diagnose(dctx, []*unstructured.Unstructured{cf.obj}, opts.diagnosis())
	if cause == nil {
		return cf.err
	}
	return &diagnosedError{err: cf.err, cause: cause}
}

// checkFailure is a check's error on obj, until the wait diagnoses obj.
type checkFailure struct {
	err error
	obj *unstructured.Unstructured
}

func (e *checkFailure) Error() string { return e.err.Error() }
func (e *checkFailure) Unwrap() error { return e.err }

// diagnosedError is an error with the cause a diagnosis found: its
// message ends with "; cause: " and the cause (log lines included).
type diagnosedError struct {
	err   error
	cause *diagnose.Cause
}

func (e *diagnosedError) Error() string { return e.err.Error() + "; cause: " + e.cause.Detail() }
func (e *diagnosedError) Unwrap() error { return e.err }

// CauseOf returns the cause a wait's error carries (a timeout's, or an
// object's that can never become ready), nil when it carries none.
func CauseOf(err error) *diagnose.Cause {
	var de *diagnosedError
	if errors.As(err, &de) {
		return de.cause
	}
	var we *waitError
	if errors.As(err, &we) {
		return we.diagnosis
	}
	return nil
}

// Ready looks once, without watching: it reports whether every target
// meets cond now, and when not, a line naming what is not ready and why
// (for a live plan: no-op or wait). A List error is returned as is (with
// the server's wording).
func Ready(ctx context.Context, c *kube.Clients, targets []Target, cond spec.WaitFor) (bool, string, error) {
	opts := Options{Targets: targets, What: Describe(cond)}
	if cond.Kind == spec.ForDelete {
		opts.Gone = true
	} else {
		cc, err := NewCondition(cond)
		if err != nil {
			return false, "", err
		}
		opts.Check = cc.Check
	}
	return ReadyNow(ctx, c, opts)
}

// ReadyNow is Ready with a caller's check (opts.Progress is unused).
func ReadyNow(ctx context.Context, c *kube.Clients, opts Options) (bool, string, error) {
	var found []targetObjects
	for _, t := range opts.Targets {
		sc, err := newScope(c, t)
		if err != nil {
			return false, "", err
		}
		var lo metav1.ListOptions
		sc.tweak(&lo)
		list, err := sc.ri.List(ctx, lo)
		if err != nil {
			return false, "", fmt.Errorf("list %s: %w", subject(sc.t), err)
		}
		to := targetObjects{t: sc.t, subject: subject(sc.t)}
		for i := range list.Items {
			to.objs = append(to.objs, &list.Items[i])
		}
		found = append(found, to)
	}
	if opts.What == "" {
		opts.What = "readiness"
	}
	ev, err := evaluate(found, opts)
	if err != nil {
		var cf *checkFailure
		if errors.As(err, &cf) {
			err = cf.err
		}
		return false, "", err
	}
	if ev.ready() {
		return true, "", nil
	}
	return false, strings.TrimPrefix(ev.progressLine(opts.What), "waiting for "), nil
}

// targetWatch is one target and the watch that sees it.
type targetWatch struct {
	t       Target
	subject string
	sw      *scopeWatch
	// byName: the watch sees more than this target (a namespace several
	// named targets share); pick the target's object by name.
	byName bool
}

// normalize fills in the namespace a target is looked up in.
func normalize(t Target) Target {
	if t.AllNamespaces || !kube.Namespaced(t.Mapping) {
		t.Namespace = ""
	}
	if kube.Namespaced(t.Mapping) && !t.AllNamespaces && t.Namespace == "" {
		t.Namespace = metav1.NamespaceDefault
	}
	return t
}

// newWatches builds the watches of targets: one per target, except that
// named targets of one type in one namespace (apply's waitFor on many
// objects) share one watch of that namespace.
func newWatches(c *kube.Clients, targets []Target, notify func(), fatal chan<- error, conn *connection, keepGone bool) ([]*targetWatch, []*scopeWatch, error) {
	type key struct {
		gvr string
		ns  string
	}
	keyOf := func(t Target) (key, bool) {
		if t.Name == "" || t.LabelSelector != "" || t.FieldSelector != "" {
			return key{}, false
		}
		return key{gvr: t.Mapping.Resource.String(), ns: t.Namespace}, true
	}
	count := map[key]int{}
	for i := range targets {
		if targets[i].Mapping == nil {
			return nil, nil, errors.New("waiter: target without a mapping")
		}
		if k, ok := keyOf(normalize(targets[i])); ok {
			count[k]++
		}
	}
	shared := map[key]*scopeWatch{}
	var scopes []*scopeWatch
	watches := make([]*targetWatch, 0, len(targets))
	for _, t := range targets {
		t = normalize(t)
		tw := &targetWatch{t: t, subject: subject(t)}
		if k, ok := keyOf(t); ok && count[k] > 1 {
			tw.byName = true
			if tw.sw = shared[k]; tw.sw == nil {
				sw, err := newScopeWatch(c, Target{Mapping: t.Mapping, Namespace: t.Namespace}, notify, fatal, conn, keepGone)
				if err != nil {
					return nil, nil, err
				}
				shared[k], tw.sw = sw, sw
				scopes = append(scopes, sw)
			}
		} else {
			sw, err := newScopeWatch(c, t, notify, fatal, conn, keepGone)
			if err != nil {
				return nil, nil, err
			}
			tw.sw = sw
			scopes = append(scopes, sw)
		}
		watches = append(watches, tw)
	}
	return watches, scopes, nil
}

// scope is how to list and watch one target.
type scope struct {
	t     Target
	ri    dynamic.ResourceInterface
	tweak func(*metav1.ListOptions)
}

func newScope(c *kube.Clients, t Target) (scope, error) {
	if t.Mapping == nil {
		return scope{}, errors.New("waiter: target without a mapping")
	}
	t = normalize(t)
	var ri dynamic.ResourceInterface
	if t.Namespace == "" {
		ri = c.Dynamic.Resource(t.Mapping.Resource)
	} else {
		ri = c.Dynamic.Resource(t.Mapping.Resource).Namespace(t.Namespace)
	}
	fieldSel := t.FieldSelector
	if t.Name != "" {
		byName := fields.OneTermEqualSelector("metadata.name", t.Name)
		if fieldSel != "" {
			sel, err := fields.ParseSelector(fieldSel)
			if err != nil {
				return scope{}, fmt.Errorf("invalid field selector %q: %w", fieldSel, err)
			}
			byName = fields.AndSelectors(byName, sel)
		}
		fieldSel = byName.String()
	}
	tweak := func(o *metav1.ListOptions) {
		o.FieldSelector = fieldSel
		o.LabelSelector = t.LabelSelector
	}
	return scope{t: t, ri: ri, tweak: tweak}, nil
}

// permanent reports errors no retry can cure: the user may not list or
// watch, or the type is not served (any more).
func permanent(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsBadRequest(err)
}

// serverMessage is the API server's own wording of err.
func serverMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if msg := strings.TrimSpace(status.Status().Message); msg != "" {
			return msg
		}
	}
	return err.Error()
}

// subject names a target in messages.
func subject(t Target) string {
	kind := t.Mapping.GroupVersionKind.Kind
	if t.Name != "" {
		if t.Namespace != "" {
			return kind + " " + t.Namespace + "/" + t.Name
		}
		return kind + " " + t.Name
	}
	return t.Mapping.Resource.Resource + Scope(t)
}

// Scope describes where a target looks, for messages: " in namespace x",
// " in all namespaces", then its selectors, " (selector app=web)".
func Scope(t Target) string {
	var s string
	switch {
	case t.AllNamespaces:
		s = " in all namespaces"
	case t.Namespace != "":
		s = " in namespace " + t.Namespace
	case t.Mapping != nil && kube.Namespaced(t.Mapping):
		s = " in all namespaces"
	}
	var sels []string
	if t.LabelSelector != "" {
		sels = append(sels, "selector "+t.LabelSelector)
	}
	if t.FieldSelector != "" {
		sels = append(sels, "field selector "+t.FieldSelector)
	}
	if len(sels) > 0 {
		s += " (" + strings.Join(sels, ", ") + ")"
	}
	return s
}

// objectName names one object in messages: "Pod ns/name".
func objectName(kind string, u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return kind + " " + u.GetNamespace() + "/" + u.GetName()
	}
	return kind + " " + u.GetName()
}

// notReady is one object (or an absent one) not meeting the wait.
type notReady struct {
	name    string // "Pod ns/a", or a target's subject when nothing matches
	current string
	obj     *unstructured.Unstructured // nil when absent
	state   uint64                     // the object's status, times left out (see stateOf)
}

// evaluation is the state of every target after one look at the stores.
type evaluation struct {
	pending []notReady
	total   int    // objects looked at (plus absent named targets)
	plural  string // a resource name when every target is of one type
}

func (e evaluation) ready() bool { return len(e.pending) == 0 }

// objects are the pending objects that exist, for a diagnosis.
func (e evaluation) objects() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, p := range e.pending {
		if p.obj != nil {
			out = append(out, p.obj)
		}
	}
	return out
}

func (e evaluation) key() string {
	var b strings.Builder
	for _, p := range e.pending {
		b.WriteString(p.name)
		b.WriteByte(0)
		b.WriteString(p.current)
		b.WriteByte(0)
	}
	return b.String()
}

// progressKey changes when the wait progresses: a not-ready object
// appears, goes or becomes ready, or its status changes other than in
// its timestamps (a controller refreshing a condition's lastUpdateTime is
// no progress).
func (e evaluation) progressKey() string {
	var b strings.Builder
	for _, p := range e.pending {
		fmt.Fprintf(&b, "%s\x00%x\x00", p.name, p.state)
	}
	return b.String()
}

// stateOf fingerprints an object's status, leaving out every field named
// like a time (lastTransitionTime, lastUpdateTime, startedAt, ...).
func stateOf(u *unstructured.Unstructured) uint64 {
	h := fnv.New64a()
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				if !strings.HasSuffix(k, "Time") && !strings.HasSuffix(k, "Timestamp") && !strings.HasSuffix(k, "At") {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				_, _ = h.Write([]byte{'{'})
				_, _ = h.Write([]byte(k))
				walk(x[k])
			}
			_, _ = h.Write([]byte{'}'})
		case []any:
			for _, e := range x {
				_, _ = h.Write([]byte{'['})
				walk(e)
			}
			_, _ = h.Write([]byte{']'})
		default:
			fmt.Fprintf(h, "=%v;", x)
		}
	}
	walk(u.Object["status"])
	fmt.Fprintf(h, "g%d", u.GetGeneration())
	return h.Sum64()
}

func (e evaluation) progressLine(what string) string {
	first := e.pending[0]
	var s string
	if len(e.pending) == 1 && e.total <= 1 {
		s = fmt.Sprintf("waiting for %s on %s: %s", what, first.name, first.current)
	} else {
		s = fmt.Sprintf("waiting for %s on %d of %d %s: %s: %s", what, len(e.pending), e.total, e.plural, first.name, first.current)
		if len(e.pending) > 1 {
			s += fmt.Sprintf(" (and %d more)", len(e.pending)-1)
		}
	}
	return s
}

// targetObjects is what one look at a target found.
type targetObjects struct {
	t       Target
	subject string
	objs    []*unstructured.Unstructured
	lastErr error
	// last is a named target's final state when it was deleted while
	// watched (Target.Deleted).
	last *unstructured.Unstructured
	// unconfirmed: the target is in no store and the API server could
	// not say whether it exists (confirmAbsent): it is waited for.
	unconfirmed bool
}

// snapshot reads every target's store.
func snapshot(watches []*targetWatch) []targetObjects {
	out := make([]targetObjects, len(watches))
	for i, w := range watches {
		out[i] = targetObjects{t: w.t, subject: w.subject, lastErr: w.sw.lastErr.get()}
		key := w.t.Name
		if w.t.Namespace != "" {
			key = w.t.Namespace + "/" + w.t.Name
		}
		if w.t.Name != "" {
			out[i].last = w.sw.store.lastOf(key)
		}
		if w.byName {
			if o, ok, _ := w.sw.store.GetByKey(key); ok {
				if u, ok := o.(*unstructured.Unstructured); ok {
					out[i].objs = append(out[i].objs, u)
				}
			}
			continue
		}
		for _, o := range w.sw.store.List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				out[i].objs = append(out[i].objs, u)
			}
		}
	}
	return out
}

// evaluate decides every target by the objects found.
func evaluate(targets []targetObjects, opts Options) (evaluation, error) {
	var ev evaluation
	plurals := map[string]bool{}
	for _, to := range targets {
		plurals[to.t.Mapping.Resource.Resource] = true
		kind := to.t.Mapping.GroupVersionKind.Kind
		objs := to.objs
		sort.Slice(objs, func(i, j int) bool { return objKey(objs[i]) < objKey(objs[j]) })
		matched := 0
		for _, u := range objs {
			if opts.Gone && to.t.Name != "" && to.t.UID != "" && u.GetUID() != to.t.UID {
				continue // re-created: the one we wait for is gone
			}
			matched++
			ev.total++
			if opts.Gone {
				ev.pending = append(ev.pending, notReady{name: objectName(kind, u), current: stillExists(u)})
				continue
			}
			ok, cur, err := opts.Check(u)
			if err != nil {
				return ev, &checkFailure{err: err, obj: u}
			}
			if !ok {
				ev.pending = append(ev.pending, notReady{name: objectName(kind, u), current: cur, obj: u, state: stateOf(u)})
			}
		}
		if matched == 0 && !opts.Gone && to.t.Deleted != nil && to.t.Name != "" && !to.unconfirmed {
			ok, cur, err := to.t.Deleted(to.last)
			if err != nil {
				return ev, &checkFailure{err: err, obj: to.last}
			}
			ev.total++
			if !ok {
				ev.pending = append(ev.pending, notReady{name: to.subject, current: cur})
			}
			continue
		}
		if matched == 0 && !opts.Gone {
			ev.total++
			cur := "does not exist"
			if to.t.Name == "" {
				cur = "none found"
			}
			if to.lastErr != nil {
				cur += " (last error: " + to.lastErr.Error() + ")"
			}
			ev.pending = append(ev.pending, notReady{name: to.subject, current: cur})
		}
	}
	if len(plurals) == 1 {
		for p := range plurals {
			ev.plural = p
		}
	} else {
		ev.plural = "objects"
	}
	return ev, nil
}

func objKey(u *unstructured.Unstructured) string {
	return u.GetNamespace() + "/" + u.GetName()
}

func stillExists(u *unstructured.Unstructured) string {
	if u.GetDeletionTimestamp() == nil {
		return "still exists"
	}
	s := "being deleted"
	if f := u.GetFinalizers(); len(f) > 0 {
		s += ", waiting for finalizers " + strings.Join(f, ", ")
	}
	return s
}

// maxListed bounds the objects a timeout error lists.
const maxListed = 5

// expired builds the error for a wait whose ctx ended: what was not ready
// and, for a timeout, why (a diagnosis, briefly, past the deadline).
func expired(ctx context.Context, d *diagnose.Diagnoser, scopes []*scopeWatch, last evaluation, synced bool, conn *connection, opts Options, found *diagnose.Cause) error {
	verb := "timed out"
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		verb = "cancelled"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s waiting for %s on ", verb, opts.What)
	if !synced {
		var subjects []string
		for _, w := range scopes {
			if !w.hasSynced() {
				s := w.subject + ": not listed yet"
				if err := w.lastErr.get(); err != nil {
					s = w.subject + ": " + err.Error()
				}
				subjects = append(subjects, s)
			}
		}
		b.WriteString(strings.Join(subjects, "; "))
	} else if len(last.pending) == 1 && last.total <= 1 {
		fmt.Fprintf(&b, "%s: %s", last.pending[0].name, last.pending[0].current)
	} else {
		fmt.Fprintf(&b, "%d of %d %s: ", len(last.pending), last.total, last.plural)
		for i, p := range last.pending {
			if i == maxListed {
				fmt.Fprintf(&b, "; and %d more", len(last.pending)-maxListed)
				break
			}
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s: %s", p.name, p.current)
		}
	}
	down, since, why := conn.state()
	if down {
		fmt.Fprintf(&b, " (the API server has been unreachable for the last %s: %s)", time.Since(since).Round(time.Second), kube.Reason(why))
	}
	e := &waitError{msg: b.String(), cause: ctx.Err()}
	if objs := last.objects(); verb == "timed out" && synced && !down && len(objs) > 0 {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.finalDiagnosis())
		defer cancel()
		if e.diagnosis = d.Diagnose(dctx, objs, opts.diagnosis()); e.diagnosis == nil {
			e.diagnosis = found
		}
	} else if down {
		e.diagnosis = found // what the cluster said before it went away
	}
	return e
}

// connectionLine is the progress line when the watches lose the API
// server (down) or reach it again.
func connectionLine(c *kube.Clients, what string, down bool, since time.Time, why error) string {
	server := "API server"
	if c.Server != "" {
		server += " " + c.Server
	}
	if down {
		return fmt.Sprintf("%s unreachable (%s): still waiting for %s, retrying every second", server, kube.Reason(why), what)
	}
	return fmt.Sprintf("%s reachable again after %s: watching again", server, time.Since(since).Round(100*time.Millisecond))
}

// waitError is a wait ended by its context: the message says what was not
// ready, and why when a diagnosis found it; errors.Is finds
// context.DeadlineExceeded or context.Canceled.
type waitError struct {
	msg       string
	cause     error
	diagnosis *diagnose.Cause
}

func (e *waitError) Error() string {
	if e.diagnosis == nil {
		return e.msg
	}
	return e.msg + "; cause: " + e.diagnosis.Detail()
}
func (e *waitError) Unwrap() error { return e.cause }

// errorBox holds the last transient error of a target's watch.
type errorBox struct {
	mu  sync.Mutex
	err error
}

func (b *errorBox) set(err error) {
	b.mu.Lock()
	b.err = err
	b.mu.Unlock()
}

func (b *errorBox) get() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}
