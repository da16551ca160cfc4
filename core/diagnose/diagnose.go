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
//
// One file per concern: walk.go walks down the object tree; pods.go and
// containers.go read what Pods and their containers report (and what a Pod
// references); events.go reads Warning events; causes.go holds every
// cause as a value (what it matches and its rank: a new cause is one entry
// there) and picks the most specific; logs.go reads a crashing
// container's last lines.
package diagnose

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
