// Package diagnose says why an object is not ready, in the cluster's own
// words: it walks down from the object to what it owns and what it needs
// (a Deployment to its current ReplicaSet and that ReplicaSet's Pods; a
// StatefulSet, DaemonSet, ReplicaSet or Job to its Pods; a Pod to its
// PersistentVolumeClaims and to the ServiceAccount, ConfigMaps and Secrets
// it references), reads what the cluster reports on the way (failure
// conditions, container states, Warning events) and picks the most
// specific cause: a missing object or a claim that cannot be provisioned
// before a container's failure, that before the scheduler's or a
// controller's refusal, that before the symptom above it (a Deployment
// past its progress deadline, a failed Job). The cause names the object it
// comes from and how many Pods share it; a crashing container's last log
// lines come with it when asked for.
//
// Every wait (core/waiter) diagnoses what it waits on when it has made no
// progress for a while and when it times out; nothing here runs while
// objects progress. Reads are bounded: Pods are listed by label selector
// with a limit, events by the object's UID, referenced objects one by one
// and only for a Pod that says nothing else, and one diagnosis makes at
// most maxRequests requests.
package diagnose

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"khook.io/core/kube"
)

// Bounds of one diagnosis.
const (
	// maxObjects: the not-ready objects of one wait looked at.
	maxObjects = 5
	// maxPods: the Pods listed for one owner (a DaemonSet of 1,000 Pods is
	// not listed whole).
	maxPods = 100
	// maxEventPods: the Pods whose events are read when their status says
	// nothing specific.
	maxEventPods = 3
	// maxEvents: the events read for one object.
	maxEvents = 50
	// maxRefs: the referenced objects (claims, ConfigMaps, Secrets, the
	// ServiceAccount) checked for one Pod.
	maxRefs = 8
	// maxRequests: every request of one diagnosis.
	maxRequests = 24
)

// Cause is why an object is not ready.
type Cause struct {
	// Object names what the cluster says it of: "Pod ns/web-5d9-x2k4q",
	// "ReplicaSet ns/web-5d9", "PersistentVolumeClaim ns/data".
	Object string
	// Reason is the cluster's reason (ErrImagePull, Unschedulable,
	// FailedCreate, ProvisioningFailed, Unhealthy), "" when it gives none.
	Reason string
	// Text says what is wrong, in the cluster's words: "container app:
	// ErrImagePull: failed to pull ...", "Unschedulable: 0/1 nodes are
	// available: ...".
	Text string
	// Pods is how many of the Of Pods looked at share the cause (0 when it
	// is not about Pods); Cut says Of stopped at the listing's limit.
	Pods, Of int
	Cut      bool
	// Logs is the crashing container's last log lines ("; last 2 log
	// lines:\n    ..."), or why there are none, when they were asked for.
	Logs string
	// Warning: the cluster reports a failure (an error, a refusal, a
	// Warning event), not only that something is not ready yet.
	Warning bool
}

// String is the cause on one line, without its log lines:
// "Pod ns/web-x: container app: ErrImagePull: ...", or
// "2 of 3 pods (Pod ns/web-x and 1 more): Unschedulable: ...".
func (c *Cause) String() string {
	if c == nil {
		return ""
	}
	if count, pods := c.pods(); count != "" {
		return count + " (" + pods + "): " + c.Text
	}
	return c.Object + ": " + c.Text
}

// Brief is the cause on one line with what is wrong first and the object
// last, for a line cut to a terminal's width: "container app:
// ErrImagePull: ... (2 of 3 pods: Pod ns/web-x and 1 more)".
func (c *Cause) Brief() string {
	if c == nil {
		return ""
	}
	if count, pods := c.pods(); count != "" {
		return c.Text + " (" + count + ": " + pods + ")"
	}
	return c.Text + " (" + c.Object + ")"
}

// pods says how many Pods share a Pod's cause ("2 of 3 pods") and names
// them ("Pod ns/web-x and 1 more"); "" when the cause is one Pod's of one,
// or not a Pod's.
func (c *Cause) pods() (count, pods string) {
	if c.Pods == 0 || c.Of <= 1 && !c.Cut || !strings.HasPrefix(c.Object, "Pod ") {
		return "", ""
	}
	of := fmt.Sprint(c.Of)
	if c.Cut {
		of = "the first " + of
	}
	pods = c.Object
	if c.Pods > 1 {
		pods += fmt.Sprintf(" and %d more", c.Pods-1)
	}
	return fmt.Sprintf("%d of %s pods", c.Pods, of), pods
}

// Detail is String with the log lines, which span lines.
func (c *Cause) Detail() string {
	if c == nil {
		return ""
	}
	return c.String() + c.Logs
}

// Options tune one diagnosis.
type Options struct {
	// Logs reads the last log lines of a crashing container (for a
	// failure's report; a progress line goes without).
	Logs bool
	// Redact masks secrets in the log output before it is cut to its
	// bounds (nil: none).
	Redact func(string) string
}

// Diagnoser finds causes with a run's clients. It is safe for concurrent
// use.
type Diagnoser struct {
	c *kube.Clients
	// meta reads referenced objects' metadata only (a Secret's data is
	// never fetched); built at first use.
	meta     func() (metadata.Interface, error)
	requests func() // counts every request (tests)
}

// New returns a Diagnoser over c.
func New(c *kube.Clients) *Diagnoser {
	return &Diagnoser{c: c, meta: sync.OnceValues(func() (metadata.Interface, error) { return metadata.NewForConfig(c.Config) })}
}

// Diagnose says why objs (objects a wait found not ready) are not ready:
// the most specific cause found under any of them (the first maxObjects),
// or nil when the cluster reports nothing but that they are on their way.
// ctx bounds it; whatever cannot be read is left out.
func (d *Diagnoser) Diagnose(ctx context.Context, objs []*unstructured.Unstructured, opts Options) *Cause {
	if d == nil || d.c == nil {
		return nil
	}
	w := &walk{d: d, ctx: ctx, budget: maxRequests}
	for i, o := range objs {
		if i == maxObjects || ctx.Err() != nil {
			break
		}
		w.object(o)
	}
	best := w.best()
	if best == nil {
		return nil
	}
	c := best.cause
	if opts.Logs && best.logs != nil {
		c.Logs = w.logs(best.logs, opts.Redact)
	}
	return &c
}

// finding is one candidate cause.
type finding struct {
	cause Cause
	rank  int // how specific: the highest wins (see the rank constants)
	depth int // how far below a waited-on object: the deeper wins a tie
	logs  *container
}

// container names a container whose logs explain a cause.
type container struct{ ns, pod, name string }

// Ranks, most specific first.
const (
	rankMissing   = 60 // a referenced object is missing, a claim cannot be provisioned, a volume cannot be mounted
	rankContainer = 50 // a container cannot start, crashes or exited with an error
	rankProbe     = 45 // a probe fails; a Pod failed (evicted)
	rankRefused   = 40 // the scheduler or a controller refuses (Unschedulable, FailedCreate)
	rankEvent     = 30 // another Warning event
	rankCompleted = 25 // a failed Job's container that exited 0
	rankFailed    = 20 // the waited-on object failed (progress deadline, a Job's backoff limit)
	rankPending   = 15 // a claim that is not bound yet
	rankNotReady  = 10 // a Pod that is not ready or not scheduled yet, and says no more
)

// walk is one diagnosis.
type walk struct {
	d        *Diagnoser
	ctx      context.Context
	budget   int
	findings []finding
}

func (w *walk) add(f finding) { w.findings = append(w.findings, f) }

// spend takes one request from the budget; false when it is spent.
func (w *walk) spend() bool {
	if w.budget <= 0 || w.ctx.Err() != nil {
		return false
	}
	w.budget--
	if w.d.requests != nil {
		w.d.requests()
	}
	return true
}

// best picks the most specific finding: the highest rank, then a
// Warning, then the deepest, then the one most Pods share.
func (w *walk) best() *finding {
	if len(w.findings) == 0 {
		return nil
	}
	fs := w.findings
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		switch {
		case a.rank != b.rank:
			return a.rank > b.rank
		case a.cause.Warning != b.cause.Warning:
			return a.cause.Warning
		case a.depth != b.depth:
			return a.depth > b.depth
		}
		return a.cause.Pods > b.cause.Pods
	})
	return &fs[0]
}

// object diagnoses one waited-on object.
func (w *walk) object(u *unstructured.Unstructured) {
	gk := u.GroupVersionKind().GroupKind()
	switch gk {
	case schema.GroupKind{Group: appsv1.GroupName, Kind: "Deployment"}:
		var d appsv1.Deployment
		if convert(u, &d) {
			w.deployment(&d)
		}
	case schema.GroupKind{Group: appsv1.GroupName, Kind: "ReplicaSet"}:
		var rs appsv1.ReplicaSet
		if convert(u, &rs) {
			w.replicaSet(&rs, 0)
		}
	case schema.GroupKind{Group: appsv1.GroupName, Kind: "StatefulSet"}:
		var s appsv1.StatefulSet
		if convert(u, &s) {
			w.controller(kindName("StatefulSet", s.Namespace, s.Name), s.Namespace, s.UID, s.Spec.Selector, false, 0)
		}
	case schema.GroupKind{Group: appsv1.GroupName, Kind: "DaemonSet"}:
		var s appsv1.DaemonSet
		if convert(u, &s) {
			w.controller(kindName("DaemonSet", s.Namespace, s.Name), s.Namespace, s.UID, s.Spec.Selector, false, 0)
		}
	case schema.GroupKind{Group: batchv1.GroupName, Kind: "Job"}:
		var j batchv1.Job
		if convert(u, &j) {
			w.job(&j)
		}
	case schema.GroupKind{Kind: "Pod"}:
		var p corev1.Pod
		if convert(u, &p) {
			w.pods([]corev1.Pod{p}, false, 0, false)
		}
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		var pvc corev1.PersistentVolumeClaim
		if convert(u, &pvc) {
			w.claim(&pvc, 0)
		}
	default:
		w.generic(u)
	}
}

func convert(u *unstructured.Unstructured, into any) bool {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into) == nil
}

// kindName names an object in causes: "Pod ns/name".
func kindName(kind, ns, name string) string {
	if ns == "" {
		return kind + " " + name
	}
	return kind + " " + ns + "/" + name
}

// deployment: its ReplicaFailure and progress deadline, then its current
// ReplicaSet.
func (w *walk) deployment(d *appsv1.Deployment) {
	name := kindName("Deployment", d.Namespace, d.Name)
	for _, c := range d.Status.Conditions {
		switch {
		case c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue:
			w.add(finding{cause: Cause{Object: name, Reason: c.Reason, Text: ReasonMessage(c.Reason, c.Message), Warning: true}, rank: rankRefused})
		case c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse:
			w.add(finding{cause: Cause{Object: name, Reason: c.Reason, Text: ReasonMessage(c.Reason, c.Message), Warning: true}, rank: rankFailed})
		}
	}
	rs := w.currentReplicaSet(d)
	if rs == nil {
		w.events(name, d.Namespace, d.UID, 0)
		return
	}
	w.replicaSet(rs, 1)
}

// currentReplicaSet is the ReplicaSet of the Deployment's current
// revision, else its newest; nil when it has none (or it cannot be read).
func (w *walk) currentReplicaSet(d *appsv1.Deployment) *appsv1.ReplicaSet {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !w.spend() {
		return nil
	}
	list, err := w.d.c.Typed.AppsV1().ReplicaSets(d.Namespace).List(w.ctx, metav1.ListOptions{LabelSelector: sel.String(), Limit: maxPods})
	if err != nil {
		return nil
	}
	const revision = "deployment.kubernetes.io/revision"
	var current *appsv1.ReplicaSet
	for i := range list.Items {
		rs := &list.Items[i]
		if !ownedBy(rs.OwnerReferences, d.UID) {
			continue
		}
		if rev := d.Annotations[revision]; rev != "" && rs.Annotations[revision] == rev {
			return rs
		}
		if current == nil || current.CreationTimestamp.Before(&rs.CreationTimestamp) {
			current = rs
		}
	}
	return current
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// replicaSet: its ReplicaFailure (the Pods it cannot create, in the
// admission's words), then its Pods.
func (w *walk) replicaSet(rs *appsv1.ReplicaSet, depth int) {
	name := kindName("ReplicaSet", rs.Namespace, rs.Name)
	failed := false
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			failed = true
			w.add(finding{cause: Cause{Object: name, Reason: c.Reason, Text: ReasonMessage(c.Reason, c.Message), Warning: true}, rank: rankRefused, depth: depth})
		}
	}
	w.controller(name, rs.Namespace, rs.UID, rs.Spec.Selector, failed, depth)
}

// controller: the Pods an owner made; with none (and no condition saying
// why), its Warning events (FailedCreate).
func (w *walk) controller(name, ns string, uid types.UID, selector *metav1.LabelSelector, explained bool, depth int) {
	n := len(w.findings)
	if pods, cut, ok := w.ownedPods(ns, uid, selector); ok && len(pods) > 0 {
		w.pods(pods, cut, depth+1, false)
	}
	// no Pod, or none that says why: the owner's own events (a
	// StatefulSet that cannot create its next Pod while the others run)
	if !explained && !w.failureSince(n) {
		w.events(name, ns, uid, depth)
	}
}

// failureSince reports whether a finding added after the first n is a
// failure the cluster reports.
func (w *walk) failureSince(n int) bool {
	for _, f := range w.findings[n:] {
		if f.cause.Warning {
			return true
		}
	}
	return false
}

// ownedPods lists the Pods of selector in ns that uid owns, at most
// maxPods; cut says the list stopped there.
func (w *walk) ownedPods(ns string, uid types.UID, selector *metav1.LabelSelector) ([]corev1.Pod, bool, bool) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || sel.Empty() || !w.spend() {
		return nil, false, false
	}
	list, err := w.d.c.Typed.CoreV1().Pods(ns).List(w.ctx, metav1.ListOptions{LabelSelector: sel.String(), Limit: maxPods})
	if err != nil {
		return nil, false, false
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if ownedBy(p.OwnerReferences, uid) {
			pods = append(pods, p)
		}
	}
	return pods, list.Continue != "", true
}

// job: its Failed condition, then its Pods (how each container ended, for
// a failed Job); with no Pod, its FailedCreate events.
func (w *walk) job(j *batchv1.Job) {
	name := kindName("Job", j.Namespace, j.Name)
	failed := false
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
			failed = true
			w.add(finding{cause: Cause{Object: name, Reason: c.Reason, Text: ReasonMessage(c.Reason, c.Message), Warning: true}, rank: rankFailed})
		}
	}
	pods, cut, ok := w.ownedPods(j.Namespace, j.UID, j.Spec.Selector)
	if ok && len(pods) > 0 {
		w.pods(pods, cut, 1, failed)
		return
	}
	w.events(name, j.Namespace, j.UID, 0)
}

// podState is what a Pod's status says.
type podState struct {
	rank    int
	reason  string
	text    string
	warning bool
	logs    *container
	// claims: the scheduler waits for a claim to be bound.
	claims bool
}

// pods diagnoses Pods of one owner (or one Pod) and counts the Pods that
// share each cause. Pods whose status says nothing specific have their
// events read, a few of them; the first of those that says nothing still
// has its claims and references checked.
func (w *walk) pods(pods []corev1.Pod, cut bool, depth int, jobFailed bool) {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	type group struct {
		f    finding
		pods int
	}
	groups := map[string]*group{}
	var order []string
	add := func(f finding) {
		key := fmt.Sprintf("%d\x00%s\x00%s", f.rank, f.cause.Reason, f.cause.Text)
		if !strings.HasPrefix(f.cause.Object, "Pod ") {
			key += "\x00" + f.cause.Object // a claim several Pods wait for
		}
		g := groups[key]
		if g == nil {
			g = &group{f: f}
			groups[key] = g
			order = append(order, key)
		}
		g.pods++
	}
	var quiet []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		st, ok := podStatus(p, jobFailed)
		if !ok {
			continue // ready, done, or going away
		}
		f := finding{cause: Cause{Object: kindName("Pod", p.Namespace, p.Name), Reason: st.reason, Text: st.text, Warning: st.warning}, rank: st.rank, depth: depth, logs: st.logs}
		if st.rank <= rankNotReady || st.claims {
			quiet = append(quiet, p)
			if st.claims {
				add(f)
			}
			continue
		}
		add(f)
	}
	// the Pods that say nothing specific: the events of a few of them
	// (and their claims); then what they reference, checked once for
	// every Pod of the same references (the Pods of one owner share them)
	refs := map[string]*finding{}
	for i, p := range quiet {
		name := kindName("Pod", p.Namespace, p.Name)
		st, _ := podStatus(p, jobFailed)
		found := false
		if i < maxEventPods {
			// the scheduler waits for claims: its events say no more
			if !st.claims {
				if ev, ok := w.warning(p.Namespace, p.UID); ok {
					found = true
					add(finding{cause: Cause{Object: name, Reason: ev.Reason, Text: ReasonMessage(ev.Reason, ev.Message), Warning: failing(p, ev)}, rank: eventRank(ev.Reason), depth: depth})
				}
			}
			if st.claims || p.Status.Phase == corev1.PodPending {
				if f, ok := w.podClaims(p, depth+1); ok {
					found = true
					add(f)
				}
			}
		}
		if !found {
			pr := podRefs(p)
			key := refsKey(pr)
			f, checked := refs[key]
			if !checked && len(refs) < maxEventPods {
				if rf, ok := w.references(p, pr, depth); ok {
					f = &rf
				}
				refs[key] = f
			}
			if f != nil {
				found = true
				rf := *f
				rf.cause.Object = name
				add(rf)
			}
		}
		if !found && !st.claims {
			add(finding{cause: Cause{Object: name, Reason: st.reason, Text: st.text, Warning: st.warning}, rank: st.rank, depth: depth})
		}
	}
	for _, key := range order {
		g := groups[key]
		f := g.f
		f.cause.Pods, f.cause.Of, f.cause.Cut = g.pods, len(pods), cut
		w.add(f)
	}
}

// podStatus reads a Pod's status: false for a Pod that is ready, has
// completed, or is being deleted.
func podStatus(p *corev1.Pod, jobFailed bool) (podState, bool) {
	if p.DeletionTimestamp != nil {
		return podState{}, false
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		if !jobFailed {
			return podState{}, false
		}
	case corev1.PodFailed:
		if st, ok := containers(p, jobFailed); ok {
			return st, true
		}
		text := "Failed"
		if m := ReasonMessage(p.Status.Reason, p.Status.Message); m != "" {
			text = m
		}
		return podState{rank: rankProbe, reason: p.Status.Reason, text: text, warning: true}, true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			st := podState{rank: rankRefused, reason: c.Reason, text: ReasonMessage(c.Reason, c.Message), warning: c.Reason != ""}
			st.claims = strings.Contains(c.Message, "PersistentVolumeClaim")
			return st, true
		}
	}
	if st, ok := containers(p, jobFailed); ok {
		return st, true
	}
	if p.Status.Phase == corev1.PodSucceeded {
		return podState{}, false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return podState{}, false
			}
			text := ReasonMessage(c.Reason, c.Message)
			if text == "" {
				text = "not ready"
			}
			return podState{rank: rankNotReady, reason: c.Reason, text: text}, true
		}
	}
	if p.Status.Phase == corev1.PodPending || p.Status.Phase == "" {
		return podState{rank: rankNotReady, text: "Pending"}, true
	}
	return podState{}, false
}

// normalWaiting are the waiting reasons of a container on its way.
var normalWaiting = map[string]bool{"": true, "ContainerCreating": true, "PodInitializing": true}

// containers reads the init containers' and the containers' states: the
// first that cannot start, crashes or exited with an error (or, for a
// failed Job, exited at all).
func containers(p *corev1.Pod, jobFailed bool) (podState, bool) {
	for _, set := range []struct {
		what     string
		statuses []corev1.ContainerStatus
	}{{"init container", p.Status.InitContainerStatuses}, {"container", p.Status.ContainerStatuses}} {
		for _, cs := range set.statuses {
			label := set.what + " " + cs.Name
			logs := &container{ns: p.Namespace, pod: p.Name, name: cs.Name}
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff":
				// the back-off's message changes with every restart and names
				// the Pod: the last exit says more
				text := label + ": CrashLoopBackOff"
				if t := cs.LastTerminationState.Terminated; t != nil {
					text += ": last exit code " + fmt.Sprint(t.ExitCode) + optional(ReasonMessage(t.Reason, terminationMessage(p, cs.Name, t.Message)))
				}
				return podState{rank: rankContainer, reason: "CrashLoopBackOff", text: text, warning: true, logs: logs}, true
			case cs.State.Waiting != nil && !normalWaiting[cs.State.Waiting.Reason]:
				return podState{rank: rankContainer, reason: cs.State.Waiting.Reason, text: label + ": " + ReasonMessage(cs.State.Waiting.Reason, cs.State.Waiting.Message), warning: true}, true
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
				t := cs.State.Terminated
				return podState{rank: rankContainer, reason: t.Reason, text: fmt.Sprintf("%s exited with code %d", label, t.ExitCode) + optional(ReasonMessage(t.Reason, terminationMessage(p, cs.Name, t.Message))), warning: true, logs: logs}, true
			case jobFailed && cs.State.Terminated != nil:
				t := cs.State.Terminated
				return podState{rank: rankCompleted, reason: t.Reason, text: fmt.Sprintf("%s exited with code %d", label, t.ExitCode) + optional(ReasonMessage(t.Reason, terminationMessage(p, cs.Name, t.Message))), logs: logs}, true
			case !cs.Ready && cs.State.Running != nil && cs.RestartCount > 0 && cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode != 0:
				t := cs.LastTerminationState.Terminated
				return podState{rank: rankContainer, reason: t.Reason, text: fmt.Sprintf("%s restarted %d times, last exit code %d", label, cs.RestartCount, t.ExitCode) + optional(ReasonMessage(t.Reason, terminationMessage(p, cs.Name, t.Message))), warning: true, logs: logs}, true
			}
		}
	}
	return podState{}, false
}

// The kubelet's bounds of a termination message
// (k8s.io/kubernetes/pkg/kubelet/container): the file's last 4 KiB, the
// log's last 2 KiB (FallbackToLogsOnError), and 12 KiB for a Pod's
// containers together, each status cut to its share at its end.
const (
	termFileBytes = 4 << 10
	termLogBytes  = 2 << 10
	termPodBytes  = 12 << 10
)

// terminationMessage is container's termination message msg without the
// lines the kubelet may have cut: it keeps the end of the file or of the
// log (a message that long may begin inside a line) and cuts each status
// to its share of the Pod's budget at its end (a message that long may
// end inside one). A line cut there may hold part of a secret, which the
// redactor only recognises whole, so it is dropped; the rest is whole
// lines, redacted with everything else when shown.
func terminationMessage(p *corev1.Pod, container, msg string) string {
	n := len(p.Spec.Containers) + len(p.Spec.InitContainers) + len(p.Spec.EphemeralContainers)
	share := termPodBytes / max(n, 1)
	fallback := false
	for _, set := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range set {
			if c.Name == container && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
				fallback = true
			}
		}
	}
	end := len(msg) >= share
	start := len(msg) >= termFileBytes || fallback && len(msg) >= termLogBytes || end && share <= termFileBytes
	if end {
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		} else {
			msg = ""
		}
	}
	if start {
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		} else {
			msg = ""
		}
	}
	return strings.TrimSpace(msg)
}

func optional(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// failing reports whether a Pod's Warning event reports a failure: every
// one does but a failed probe (Unhealthy) seen fewer times than the
// probe's failureThreshold. A container that starts slowly fails its
// readiness probe a few times on its way to ready (a slow but healthy
// rollout), and the kubelet itself acts on a probe only once it failed
// that many times in a row; the kubelet posts the event for every failed
// probe, and the API counts them.
func failing(p *corev1.Pod, ev corev1.Event) bool {
	if ev.Reason != "Unhealthy" {
		return true
	}
	count := ev.Count
	if ev.Series != nil && ev.Series.Count > count {
		count = ev.Series.Count
	}
	return count >= probeThreshold(p, ev)
}

// probeThreshold is the failureThreshold of the probe an Unhealthy event
// is about: the container its field path names ("spec.containers{app}"),
// the probe its message names ("Readiness probe failed: ..."); the API's
// default, 3, when the Pod does not say.
func probeThreshold(p *corev1.Pod, ev corev1.Event) int32 {
	const defaultThreshold = 3
	name := ev.InvolvedObject.FieldPath
	if i := strings.IndexByte(name, '{'); i >= 0 && strings.HasSuffix(name, "}") {
		name = name[i+1 : len(name)-1]
	}
	for _, set := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range set {
			if c.Name != name {
				continue
			}
			var probe *corev1.Probe
			switch {
			case strings.HasPrefix(ev.Message, "Readiness probe"):
				probe = c.ReadinessProbe
			case strings.HasPrefix(ev.Message, "Liveness probe"):
				probe = c.LivenessProbe
			case strings.HasPrefix(ev.Message, "Startup probe"):
				probe = c.StartupProbe
			}
			if probe != nil && probe.FailureThreshold > 0 {
				return probe.FailureThreshold
			}
		}
	}
	return defaultThreshold
}

// eventRank ranks a Warning event by its reason.
func eventRank(reason string) int {
	switch reason {
	case "FailedMount", "FailedAttachVolume", "FailedMapVolume", "ProvisioningFailed", "FailedBinding":
		return rankMissing
	case "FailedCreatePodSandBox", "FailedPostStartHook", "FailedPreStopHook":
		return rankContainer
	case "Unhealthy", "Evicted", "OOMKilling":
		return rankProbe
	case "FailedCreate", "FailedScheduling", "FailedPlacement":
		return rankRefused
	}
	return rankEvent
}

// warning is the object's most telling Warning event: of the highest
// rank, then the most recent.
func (w *walk) warning(ns string, uid types.UID) (corev1.Event, bool) {
	if uid == "" || !w.spend() {
		return corev1.Event{}, false
	}
	list, err := w.d.c.Typed.CoreV1().Events(ns).List(w.ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.uid", string(uid)),
			fields.OneTermEqualSelector("type", corev1.EventTypeWarning),
		).String(),
		Limit: maxEvents,
	})
	if err != nil || len(list.Items) == 0 {
		return corev1.Event{}, false
	}
	best := list.Items[0]
	for _, e := range list.Items[1:] {
		if r, br := eventRank(e.Reason), eventRank(best.Reason); r > br || r == br && eventTime(e).After(eventTime(best)) {
			best = e
		}
	}
	return best, true
}

// events adds the object's most telling Warning event.
func (w *walk) events(name, ns string, uid types.UID, depth int) {
	if ev, ok := w.warning(ns, uid); ok {
		w.add(finding{cause: Cause{Object: name, Reason: ev.Reason, Text: ReasonMessage(ev.Reason, ev.Message), Warning: true}, rank: eventRank(ev.Reason), depth: depth})
	}
}

// podClaims reads the claims of a Pod whose status says nothing specific
// (or that waits for them to be bound): a missing claim, or one that
// cannot be provisioned.
func (w *walk) podClaims(p *corev1.Pod, depth int) (finding, bool) {
	var best *finding
	n := 0
	for _, v := range p.Spec.Volumes {
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claim = p.Name + "-" + v.Name
		default:
			continue
		}
		if n == maxRefs || !w.spend() {
			break
		}
		n++
		pvc, err := w.d.c.Typed.CoreV1().PersistentVolumeClaims(p.Namespace).Get(w.ctx, claim, metav1.GetOptions{})
		var f finding
		switch {
		case apierrors.IsNotFound(err):
			f = finding{cause: Cause{Object: kindName("Pod", p.Namespace, p.Name), Reason: "NotFound", Text: "volume " + v.Name + ": " + kube.Reason(err), Warning: true}, rank: rankMissing, depth: depth}
		case err != nil || pvc.Status.Phase == corev1.ClaimBound:
			continue
		default:
			sub := &walk{d: w.d, ctx: w.ctx, budget: w.budget}
			sub.claim(pvc, depth+1)
			w.budget = sub.budget
			if b := sub.best(); b != nil {
				f = *b
			} else {
				continue
			}
		}
		if best == nil || f.rank > best.rank {
			best = &f
		}
	}
	if best == nil {
		return finding{}, false
	}
	return *best, true
}

// claim: a claim that is not bound, and its Warning events
// (ProvisioningFailed: the storage class does not exist).
func (w *walk) claim(pvc *corev1.PersistentVolumeClaim, depth int) {
	if pvc.Status.Phase == corev1.ClaimBound {
		return
	}
	name := kindName("PersistentVolumeClaim", pvc.Namespace, pvc.Name)
	if ev, ok := w.warning(pvc.Namespace, pvc.UID); ok {
		w.add(finding{cause: Cause{Object: name, Reason: ev.Reason, Text: ReasonMessage(ev.Reason, ev.Message), Warning: true}, rank: eventRank(ev.Reason), depth: depth})
		return
	}
	phase := string(pvc.Status.Phase)
	if phase == "" {
		phase = string(corev1.ClaimPending)
	}
	w.add(finding{cause: Cause{Object: name, Reason: phase, Text: phase}, rank: rankPending, depth: depth})
}

// ref is an object a Pod references.
type ref struct {
	gvr      schema.GroupVersionResource
	kind     string
	name     string
	where    string // "volume cfg", "container app"
	optional bool
}

// references checks, by their metadata only, the ServiceAccount,
// ConfigMaps and Secrets a Pod references (not optionally): the first that
// does not exist.
func (w *walk) references(p *corev1.Pod, refs []ref, depth int) (finding, bool) {
	if len(refs) == 0 {
		return finding{}, false
	}
	mc, err := w.d.meta()
	if err != nil {
		return finding{}, false
	}
	for i, r := range refs {
		if i == maxRefs || !w.spend() {
			break
		}
		_, err := mc.Resource(r.gvr).Namespace(p.Namespace).Get(w.ctx, r.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return finding{cause: Cause{Object: kindName("Pod", p.Namespace, p.Name), Reason: "NotFound", Text: r.where + ": " + kube.Reason(err), Warning: true}, rank: rankMissing, depth: depth}, true
		}
	}
	return finding{}, false
}

// refsKey identifies a Pod's references.
func refsKey(refs []ref) string {
	var b strings.Builder
	for _, r := range refs {
		b.WriteString(r.gvr.Resource + "/" + r.name + "/" + r.where + "\x00")
	}
	return b.String()
}

var (
	configMaps      = corev1.SchemeGroupVersion.WithResource("configmaps")
	secrets         = corev1.SchemeGroupVersion.WithResource("secrets")
	serviceAccounts = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
)

// podRefs lists what a Pod references, each once, in the order a kubelet
// needs them: the ServiceAccount, the volumes, the containers'
// environment.
func podRefs(p *corev1.Pod) []ref {
	var out []ref
	seen := map[string]bool{}
	add := func(r ref) {
		key := r.gvr.Resource + "/" + r.name
		if r.optional || r.name == "" || seen[key] {
			return
		}
		seen[key] = true
		out = append(out, r)
	}
	if sa := p.Spec.ServiceAccountName; sa != "" {
		add(ref{gvr: serviceAccounts, kind: "ServiceAccount", name: sa, where: "service account " + sa})
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add(ref{gvr: configMaps, kind: "ConfigMap", name: v.ConfigMap.Name, where: "volume " + v.Name, optional: v.ConfigMap.Optional != nil && *v.ConfigMap.Optional})
		case v.Secret != nil:
			add(ref{gvr: secrets, kind: "Secret", name: v.Secret.SecretName, where: "volume " + v.Name, optional: v.Secret.Optional != nil && *v.Secret.Optional})
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add(ref{gvr: configMaps, kind: "ConfigMap", name: s.ConfigMap.Name, where: "volume " + v.Name, optional: s.ConfigMap.Optional != nil && *s.ConfigMap.Optional})
				}
				if s.Secret != nil {
					add(ref{gvr: secrets, kind: "Secret", name: s.Secret.Name, where: "volume " + v.Name, optional: s.Secret.Optional != nil && *s.Secret.Optional})
				}
			}
		}
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		where := "container " + c.Name
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add(ref{gvr: configMaps, kind: "ConfigMap", name: e.ConfigMapRef.Name, where: where, optional: e.ConfigMapRef.Optional != nil && *e.ConfigMapRef.Optional})
			}
			if e.SecretRef != nil {
				add(ref{gvr: secrets, kind: "Secret", name: e.SecretRef.Name, where: where, optional: e.SecretRef.Optional != nil && *e.SecretRef.Optional})
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				add(ref{gvr: configMaps, kind: "ConfigMap", name: r.Name, where: where + " env " + e.Name, optional: r.Optional != nil && *r.Optional})
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				add(ref{gvr: secrets, kind: "Secret", name: r.Name, where: where + " env " + e.Name, optional: r.Optional != nil && *r.Optional})
			}
		}
	}
	return out
}

// generic: any other kind: a condition that says it failed or is not
// ready, with a message; else its Warning events.
func (w *walk) generic(u *unstructured.Unstructured) {
	name := kindName(u.GetKind(), u.GetNamespace(), u.GetName())
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		c, _ := raw.(map[string]any)
		typ, _ := c["type"].(string)
		status, _ := c["status"].(string)
		reason, _ := c["reason"].(string)
		msg, _ := c["message"].(string)
		bad := (typ == "Stalled" || typ == "Failed" || typ == "Degraded") && status == "True" ||
			(typ == "Ready" || typ == "Available") && status == "False"
		if bad && (reason != "" || msg != "") {
			w.add(finding{cause: Cause{Object: name, Reason: reason, Text: typ + "=" + status + ": " + ReasonMessage(reason, msg), Warning: typ != "Ready" && typ != "Available"}, rank: rankFailed})
		}
	}
	w.events(name, u.GetNamespace(), u.GetUID(), 0)
}

// ReasonMessage is a condition's or container state's reason and message
// as one phrase, "Reason: message", either part left out when empty.
func ReasonMessage(reason, msg string) string {
	switch {
	case reason == "":
		return msg
	case msg == "":
		return reason
	}
	return reason + ": " + msg
}
