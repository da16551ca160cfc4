package diagnose

import (
	"sort"
)

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
