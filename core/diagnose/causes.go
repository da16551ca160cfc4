package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Every cause a diagnosis knows is a value in this file: the conditions
// (conditionCauses), a Pod's status (podCauses), its containers' states
// (containerCauses) and Warning events (eventRanks), each with what it
// matches and its rank; a new cause is one entry. What the walk reads
// besides (a missing claim or referenced object, a claim not bound yet)
// ranks by the constants below.

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

// The kinds the walk reads by their types.
var (
	deploymentKind  = schema.GroupKind{Group: appsv1.GroupName, Kind: "Deployment"}
	replicaSetKind  = schema.GroupKind{Group: appsv1.GroupName, Kind: "ReplicaSet"}
	statefulSetKind = schema.GroupKind{Group: appsv1.GroupName, Kind: "StatefulSet"}
	daemonSetKind   = schema.GroupKind{Group: appsv1.GroupName, Kind: "DaemonSet"}
	jobKind         = schema.GroupKind{Group: batchv1.GroupName, Kind: "Job"}
	podKind         = schema.GroupKind{Kind: "Pod"}
	claimKind       = schema.GroupKind{Kind: "PersistentVolumeClaim"}
)

// conditionCause is a cause a status condition reports.
type conditionCause struct {
	// kind is the object's; the zero GroupKind stands for every kind the
	// walk has no reader of its own for.
	kind   schema.GroupKind
	types  []string // the condition's
	status string   // the condition's status that reports the cause
	rank   int
	// warning: the condition reports a failure, not only that the object
	// is not ready yet
	warning bool
	// named: the text names the condition ("Stalled=True: reason:
	// message"), and a condition with neither reason nor message says
	// nothing
	named bool
}

// conditionCauses are the conditions that report a cause. A condition
// reports the first that matches it.
var conditionCauses = []conditionCause{
	// the Pods it cannot create, in the admission's words
	{kind: deploymentKind, types: []string{string(appsv1.DeploymentReplicaFailure)}, status: string(corev1.ConditionTrue), rank: rankRefused, warning: true},
	// past its progress deadline
	{kind: deploymentKind, types: []string{string(appsv1.DeploymentProgressing)}, status: string(corev1.ConditionFalse), rank: rankFailed, warning: true},
	{kind: replicaSetKind, types: []string{string(appsv1.ReplicaSetReplicaFailure)}, status: string(corev1.ConditionTrue), rank: rankRefused, warning: true},
	// its backoff limit, its deadline
	{kind: jobKind, types: []string{string(batchv1.JobFailed), string(batchv1.JobFailureTarget)}, status: string(corev1.ConditionTrue), rank: rankFailed, warning: true},
	// any other kind: a condition that says it failed, or is not ready
	{types: []string{"Stalled", "Failed", "Degraded"}, status: "True", rank: rankFailed, warning: true, named: true},
	{types: []string{"Ready", "Available"}, status: "False", rank: rankFailed, named: true},
}

// condition is a status condition of any kind.
type condition struct{ typ, status, reason, message string }

// conditionsOf reads typed conditions as conditions.
func conditionsOf[C any](cs []C, read func(C) condition) []condition {
	out := make([]condition, len(cs))
	for i, c := range cs {
		out[i] = read(c)
	}
	return out
}

// cause is the cause c reports of the object name of kind gk, false when
// it reports none.
func (c condition) cause(gk schema.GroupKind, name string) (finding, bool) {
	for _, cc := range conditionCauses {
		if cc.kind != gk || cc.status != c.status || !slices.Contains(cc.types, c.typ) {
			continue
		}
		text := ReasonMessage(c.reason, c.message)
		if cc.named {
			if c.reason == "" && c.message == "" {
				return finding{}, false
			}
			text = c.typ + "=" + c.status + ": " + text
		}
		return finding{cause: Cause{Object: name, Reason: c.reason, Text: text, Warning: cc.warning}, rank: cc.rank}, true
	}
	return finding{}, false
}

// podVerdict is what one of podCauses makes of a Pod.
type podVerdict int

const (
	podNext    podVerdict = iota // it says nothing of the Pod: the next one reads it
	podFine                      // the Pod is ready, has completed, or is being deleted
	podPending                   // the Pod is not ready: the state says why
)

// podCauses read a Pod's status, in this order; the first whose verdict
// is not podNext decides (podStatus).
var podCauses = []func(p *corev1.Pod, jobFailed bool) (podState, podVerdict){
	// being deleted
	func(p *corev1.Pod, _ bool) (podState, podVerdict) {
		if p.DeletionTimestamp != nil {
			return podState{}, podFine
		}
		return podState{}, podNext
	},
	// completed, unless its Job failed
	func(p *corev1.Pod, jobFailed bool) (podState, podVerdict) {
		if p.Status.Phase == corev1.PodSucceeded && !jobFailed {
			return podState{}, podFine
		}
		return podState{}, podNext
	},
	// failed: a container's state, else the Pod's reason (Evicted)
	func(p *corev1.Pod, jobFailed bool) (podState, podVerdict) {
		if p.Status.Phase != corev1.PodFailed {
			return podState{}, podNext
		}
		if st, ok := containers(p, jobFailed); ok {
			return st, podPending
		}
		text := "Failed"
		if m := ReasonMessage(p.Status.Reason, p.Status.Message); m != "" {
			text = m
		}
		return podState{rank: rankProbe, reason: p.Status.Reason, text: text, warning: true}, podPending
	},
	// not scheduled: the scheduler's reason (it may wait for claims)
	func(p *corev1.Pod, _ bool) (podState, podVerdict) {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				st := podState{rank: rankRefused, reason: c.Reason, text: ReasonMessage(c.Reason, c.Message), warning: c.Reason != ""}
				st.claims = strings.Contains(c.Message, "PersistentVolumeClaim")
				return st, podPending
			}
		}
		return podState{}, podNext
	},
	// a container's state (containerCauses)
	func(p *corev1.Pod, jobFailed bool) (podState, podVerdict) {
		if st, ok := containers(p, jobFailed); ok {
			return st, podPending
		}
		return podState{}, podNext
	},
	// completed, its containers saying nothing of its failed Job
	func(p *corev1.Pod, _ bool) (podState, podVerdict) {
		if p.Status.Phase == corev1.PodSucceeded {
			return podState{}, podFine
		}
		return podState{}, podNext
	},
	// its Ready condition
	func(p *corev1.Pod, _ bool) (podState, podVerdict) {
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodReady {
				continue
			}
			if c.Status == corev1.ConditionTrue {
				return podState{}, podFine
			}
			text := ReasonMessage(c.Reason, c.Message)
			if text == "" {
				text = "not ready"
			}
			return podState{rank: rankNotReady, reason: c.Reason, text: text}, podPending
		}
		return podState{}, podNext
	},
	// pending, and saying no more
	func(p *corev1.Pod, _ bool) (podState, podVerdict) {
		if p.Status.Phase == corev1.PodPending || p.Status.Phase == "" {
			return podState{rank: rankNotReady, text: "Pending"}, podPending
		}
		return podState{}, podNext
	},
}

// containerCause is a cause a container's state reports.
type containerCause struct {
	rank    int
	warning bool // a failure (a failed Job's container that exited 0 is not one)
	logs    bool // the container's log lines explain it
	// match reads the status of the container label ("container app")
	// of p: the cause's reason and text, false when it is not this cause.
	match func(p *corev1.Pod, cs corev1.ContainerStatus, label string, jobFailed bool) (reason, text string, ok bool)
}

// normalWaiting are the waiting reasons of a container on its way.
var normalWaiting = map[string]bool{"": true, "ContainerCreating": true, "PodInitializing": true}

// containerCauses are the container states that report a cause. A
// container reports the first that matches it.
var containerCauses = []containerCause{
	// crashing: the back-off's message changes with every restart and
	// names the Pod: the last exit says more
	{rank: rankContainer, warning: true, logs: true, match: func(p *corev1.Pod, cs corev1.ContainerStatus, label string, _ bool) (string, string, bool) {
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
			return "", "", false
		}
		text := label + ": CrashLoopBackOff"
		if t := cs.LastTerminationState.Terminated; t != nil {
			text += ": last exit code " + fmt.Sprint(t.ExitCode) + exitDetail(p, cs.Name, t)
		}
		return "CrashLoopBackOff", text, true
	}},
	// cannot start (ErrImagePull, CreateContainerConfigError)
	{rank: rankContainer, warning: true, match: func(_ *corev1.Pod, cs corev1.ContainerStatus, label string, _ bool) (string, string, bool) {
		if w := cs.State.Waiting; w != nil && !normalWaiting[w.Reason] {
			return w.Reason, label + ": " + ReasonMessage(w.Reason, w.Message), true
		}
		return "", "", false
	}},
	// exited with an error
	{rank: rankContainer, warning: true, logs: true, match: func(p *corev1.Pod, cs corev1.ContainerStatus, label string, _ bool) (string, string, bool) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return t.Reason, fmt.Sprintf("%s exited with code %d", label, t.ExitCode) + exitDetail(p, cs.Name, t), true
		}
		return "", "", false
	}},
	// exited at all, in a failed Job
	{rank: rankCompleted, logs: true, match: func(p *corev1.Pod, cs corev1.ContainerStatus, label string, jobFailed bool) (string, string, bool) {
		if t := cs.State.Terminated; jobFailed && t != nil {
			return t.Reason, fmt.Sprintf("%s exited with code %d", label, t.ExitCode) + exitDetail(p, cs.Name, t), true
		}
		return "", "", false
	}},
	// running again, not ready, after an exit with an error
	{rank: rankContainer, warning: true, logs: true, match: func(p *corev1.Pod, cs corev1.ContainerStatus, label string, _ bool) (string, string, bool) {
		t := cs.LastTerminationState.Terminated
		if cs.Ready || cs.State.Running == nil || cs.RestartCount <= 0 || t == nil || t.ExitCode == 0 {
			return "", "", false
		}
		return t.Reason, fmt.Sprintf("%s restarted %d times, last exit code %d", label, cs.RestartCount, t.ExitCode) + exitDetail(p, cs.Name, t), true
	}},
}

// eventRanks rank Warning events by their reason; any other reason ranks
// rankEvent.
var eventRanks = map[string]int{
	"FailedMount": rankMissing, "FailedAttachVolume": rankMissing, "FailedMapVolume": rankMissing, "ProvisioningFailed": rankMissing, "FailedBinding": rankMissing,
	"FailedCreatePodSandBox": rankContainer, "FailedPostStartHook": rankContainer, "FailedPreStopHook": rankContainer,
	"Unhealthy": rankProbe, "Evicted": rankProbe, "OOMKilling": rankProbe,
	"FailedCreate": rankRefused, "FailedScheduling": rankRefused, "FailedPlacement": rankRefused,
}

// eventRank ranks a Warning event by its reason.
func eventRank(reason string) int {
	if r, ok := eventRanks[reason]; ok {
		return r
	}
	return rankEvent
}
