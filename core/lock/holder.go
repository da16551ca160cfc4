package lock

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations of the Lease.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "khook"

	annUser    = "khook.io/holder-user"
	annHost    = "khook.io/holder-host"
	annPID     = "khook.io/holder-pid"
	annVersion = "khook.io/holder-version"
	annCommand = "khook.io/holder-command"
	annContext = "khook.io/holder-context"
	// annBroken names the run whose lock force-unlock broke.
	annBroken = "khook.io/broken-run"
)

// Holder is who holds, or asks for, a lock.
type Holder struct {
	// ID is the run's id, the Lease's holderIdentity.
	ID      string
	User    string // the operating-system user, user@host in messages
	Host    string
	PID     int
	Version string // khook's
	Command string // apply, destroy
	// Context is the kubeconfig context the run connected through, if any.
	Context string
	// Acquired and Renewed are the Lease's acquireTime and renewTime
	// (zero for a Holder not read from a Lease): the holder's clock, for
	// messages only.
	Acquired, Renewed time.Time
}

// NewHolder describes this process as a holder of a run of command, with
// a new random run id.
func NewHolder(command, version, kubeContext string) Holder {
	h := Holder{ID: NewID(), PID: os.Getpid(), Version: version, Command: command, Context: kubeContext}
	if u, err := user.Current(); err == nil && u.Username != "" {
		h.User = u.Username
	} else if v := os.Getenv("USER"); v != "" {
		h.User = v
	} else {
		h.User = "uid " + strconv.Itoa(os.Getuid())
	}
	if host, err := os.Hostname(); err == nil {
		h.Host = host
	}
	return h
}

// NewID is a new random run id: 16 hexadecimal digits, fit for a label
// value.
func NewID() string { return fmt.Sprintf("%016x", rand.Uint64()) }

// Describe says who the holder is in one phrase: "alice@ci-7 (pid 42,
// khook v0.1.0, apply, run 3f2a...)".
func (h Holder) Describe() string {
	who := h.User
	if h.Host != "" {
		who += "@" + h.Host
	}
	if who == "" {
		who = "an unknown holder"
	}
	s := fmt.Sprintf("%s (", who)
	if h.PID > 0 {
		s += fmt.Sprintf("pid %d, ", h.PID)
	}
	if h.Version != "" {
		s += "khook " + h.Version + ", "
	}
	if h.Command != "" {
		s += h.Command + ", "
	}
	if h.Context != "" {
		s += "context " + h.Context + ", "
	}
	return s + "run " + h.ID + ")"
}

// Since says when the holder started and last renewed, relative to now:
// "started 40s ago, last renewed 2s ago" (the holder's clock against
// now's: a message, never a decision).
func (h Holder) Since(now time.Time) string {
	return fmt.Sprintf("started %s ago, last renewed %s ago", ago(now, h.Acquired), ago(now, h.Renewed))
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return max(now.Sub(t), 0).Round(time.Second).String()
}

// Stale reports whether, by now (this machine's clock), the holder seems
// to have stopped renewing: its renewTime is more than LeaseDuration old.
// Clocks differ between machines: this only chooses words in messages
// (plan's note); whether a lock may be taken over is decided by what a
// taker observed (Acquire).
func (h Holder) Stale(now time.Time) bool {
	return !h.Renewed.IsZero() && now.Sub(h.Renewed) > LeaseDuration
}

// fresh is the Lease held by this run: cur taken over (its name and
// version kept), or a new one.
func (l *Lock) fresh(cur *coordinationv1.Lease) *coordinationv1.Lease {
	now := metav1.NewMicroTime(l.clock.Now())
	secs := int32(LeaseDuration / time.Second)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.loc.Name, Namespace: l.loc.Namespace}}
	if cur != nil {
		lease = cur.DeepCopy()
	}
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	for k, v := range l.labels {
		lease.Labels[k] = v
	}
	lease.Labels[ManagedByLabel] = ManagedBy
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	delete(lease.Annotations, annBroken)
	lease.Annotations["khook.io/description"] = "khook run lock of the state record of the same name: held by the run that may write it"
	lease.Annotations[annUser] = l.me.User
	lease.Annotations[annHost] = l.me.Host
	lease.Annotations[annPID] = strconv.Itoa(l.me.PID)
	lease.Annotations[annVersion] = l.me.Version
	lease.Annotations[annCommand] = l.me.Command
	lease.Annotations[annContext] = l.me.Context
	transitions := int32(0)
	if lease.Spec.LeaseTransitions != nil {
		transitions = *lease.Spec.LeaseTransitions
	}
	if cur != nil && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.me.ID) {
		transitions++
	}
	id := l.me.ID
	lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now, LeaseTransitions: &transitions}
	return lease
}

// holderOf reads a Lease's holder; ID is empty for a released Lease.
func holderOf(lease *coordinationv1.Lease) Holder {
	var h Holder
	if lease.Spec.HolderIdentity != nil {
		h.ID = *lease.Spec.HolderIdentity
	}
	a := lease.Annotations
	h.User, h.Host, h.Version, h.Command, h.Context = a[annUser], a[annHost], a[annVersion], a[annCommand], a[annContext]
	h.PID, _ = strconv.Atoi(a[annPID])
	if t := lease.Spec.AcquireTime; t != nil {
		h.Acquired = t.Time
	}
	if t := lease.Spec.RenewTime; t != nil {
		h.Renewed = t.Time
	}
	return h
}
