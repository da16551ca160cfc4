package diagnose

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// containers reads the init containers' and the containers' states: the
// first that cannot start, crashes or exited with an error (or, for a
// failed Job, exited at all): the first of containerCauses that matches.
func containers(p *corev1.Pod, jobFailed bool) (podState, bool) {
	for _, set := range []struct {
		what     string
		statuses []corev1.ContainerStatus
	}{{"init container", p.Status.InitContainerStatuses}, {"container", p.Status.ContainerStatuses}} {
		for _, cs := range set.statuses {
			label := set.what + " " + cs.Name
			for _, c := range containerCauses {
				reason, text, ok := c.match(p, cs, label, jobFailed)
				if !ok {
					continue
				}
				st := podState{rank: c.rank, reason: reason, text: text, warning: c.warning}
				if c.logs {
					st.logs = &container{ns: p.Namespace, pod: p.Name, name: cs.Name}
				}
				return st, true
			}
		}
	}
	return podState{}, false
}

// exitDetail is a container's exit's reason and termination message, in
// parentheses: " (Error: panic: ...)"; "" when it has neither.
func exitDetail(p *corev1.Pod, container string, t *corev1.ContainerStateTerminated) string {
	return optional(ReasonMessage(t.Reason, terminationMessage(p, container, t.Message)))
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
