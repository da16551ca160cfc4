package diagnose

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

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

// events adds the object's most telling Warning event; false when it has
// none (or they cannot be read).
func (w *walk) events(name, ns string, uid types.UID, depth int) bool {
	ev, ok := w.warning(ns, uid)
	if ok {
		w.add(finding{cause: Cause{Object: name, Reason: ev.Reason, Text: ReasonMessage(ev.Reason, ev.Message), Warning: true}, rank: eventRank(ev.Reason), depth: depth})
	}
	return ok
}

// eventTime is when an event was last seen.
func eventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
