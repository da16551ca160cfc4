package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

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
