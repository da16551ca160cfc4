package helm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	helmkube "helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/redact"
	"khook.io/core/waiter"
)

// readinessWaiter chooses who decides that a release's resources are
// ready, for wait: and atomic: "khook" (core/waiter: one watch per type
// and namespace over the run's shared clients, each object judged by
// kstatus) or "helm" (Helm 4's status watcher, kube.StatusWatcherStrategy:
// the same kstatus verdicts through its own informers, REST mapper and
// status readers, built anew for every wait). Both follow watch events;
// bench/charts.sh measures them side by side (it sets this with
// -ldflags -X) and decision 101 records the figures. Hooks are waited for
// by khook's waiter with the "khook" choice too (hookCheck), so a hook Job
// that fails or times out is diagnosed like every other wait.
var readinessWaiter = "khook"

// waitStrategy is how Helm waits in an operation: with wait, for every
// resource of the release to be ready (see readinessWaiter); without,
// only for hooks. Every wait of Helm's ends with ctx.
func (cfg *configuration) waitStrategy(ctx context.Context, wait bool) (helmkube.WaitStrategy, []helmkube.WaitOption) {
	cfg.kube.ctx = ctx
	opts := []helmkube.WaitOption{helmkube.WithWaitContext(ctx)}
	if !wait {
		return helmkube.HookOnlyStrategy, opts
	}
	return helmkube.StatusWatcherStrategy, opts
}

// kubeClient is Helm's Kubernetes client with khook's readiness waits:
// for the status watcher strategy, Wait and WaitWithJobs are khook's
// (when readinessWaiter says so); for the hook-only strategy they wait for
// nothing, as Helm's do; waits for hooks and deletions are Helm's. An
// install's creates are khook's too (create.go).
type kubeClient struct {
	*helmkube.Client
	clients *kube.Clients
	// log reports a wait's progress.
	log func(format string, args ...any)
	// ctx bounds khook's waits: the operation's context (set by
	// configuration.waitStrategy before Helm runs).
	ctx context.Context
	// clientSideCreates: the operation applies client-side, so Create
	// creates without Helm's process-wide lock (see Create).
	clientSideCreates bool
	// red masks secrets in what a wait's error carries: Helm keeps that
	// error in the release record.
	red *redact.Redactor
}

var _ helmkube.InterfaceWaitOptions = (*kubeClient)(nil)

func (k *kubeClient) GetWaiter(ws helmkube.WaitStrategy) (helmkube.Waiter, error) {
	return k.GetWaiterWithOptions(ws)
}

func (k *kubeClient) GetWaiterWithOptions(ws helmkube.WaitStrategy, opts ...helmkube.WaitOption) (helmkube.Waiter, error) {
	hooksOnly := ws == helmkube.HookOnlyStrategy
	if !hooksOnly && (ws != helmkube.StatusWatcherStrategy || readinessWaiter != "khook") {
		return k.Client.GetWaiterWithOptions(ws, opts...)
	}
	ctx := k.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	// Helm's own waiter (a REST mapper and an HTTP client of its own,
	// every time) is built only when a hook or a deletion is waited for:
	// most releases have no hooks.
	helms := sync.OnceValues(func() (helmkube.Waiter, error) { return k.Client.GetWaiterWithOptions(ws, opts...) })
	return &readyWaiter{helm: helms, hooksOnly: hooksOnly, clients: k.clients, ctx: ctx, log: k.log, red: k.red}, nil
}

// readyWaiter waits for a release's resources with core/waiter and
// kstatus, and for its hooks (WatchUntilReady) with core/waiter and
// hookCheck; deletions are left to Helm's status watcher.
type readyWaiter struct {
	helm func() (helmkube.Waiter, error)
	// hooksOnly: Wait and WaitWithJobs wait for nothing (the hook-only
	// strategy, used without wait).
	hooksOnly bool
	clients   *kube.Clients
	ctx       context.Context
	log       func(format string, args ...any)
	red       *redact.Redactor
}

// WatchUntilReady waits for a hook's resources as Helm 4's status watcher
// does (hookCheck: its Jobs complete, its Pods succeed, anything else at
// once), through core/waiter, whose diagnosis then says why a hook Job
// failed or hangs. timeout 0 is Helm's default.
func (w *readyWaiter) WatchUntilReady(resources helmkube.ResourceList, timeout time.Duration) error {
	var targets []waiter.Target
	for _, info := range resources {
		if hookKinds[info.Mapping.GroupVersionKind.GroupKind().String()] {
			targets = append(targets, waiter.Target{Mapping: info.Mapping, Namespace: info.Namespace, Name: info.Name, Deleted: hookDeleted})
		}
	}
	if timeout <= 0 {
		timeout = helmkube.DefaultStatusWatcherTimeout
	}
	return w.run(targets, timeout, "completion of the hook", event.PhaseHook, hookCheck)
}

// hookDeleted judges a hook's Job or Pod that is gone (a Job's
// ttlSecondsAfterFinished, as ingress-nginx's admission Jobs set to 0,
// deletes it the moment it finishes): by its final state when the wait saw
// it deleted, so that a Job deleted Failed fails the hook; done otherwise,
// as Helm 3 ended a hook's wait on its delete event (Helm 4's status
// watcher waits for a deleted hook until its timeout).
func hookDeleted(last *unstructured.Unstructured) (bool, string, error) {
	if last != nil {
		if _, _, err := hookCheck(last); err != nil {
			return false, "", err
		}
	}
	return true, "deleted", nil
}

// finishedAreDeleted reports whether obj is a Job the TTL controller
// deletes once it finishes (spec.ttlSecondsAfterFinished set).
func finishedAreDeleted(obj runtime.Object) bool {
	var ttl bool
	switch j := obj.(type) {
	case *batchv1.Job:
		ttl = j.Spec.TTLSecondsAfterFinished != nil
	case *unstructured.Unstructured:
		_, ttl, _ = unstructured.NestedFieldNoCopy(j.Object, "spec", "ttlSecondsAfterFinished")
		ttl = ttl && j.GetKind() == "Job"
	}
	return ttl
}

// ttlJobDeleted judges a release's Job that the TTL controller deleted
// (it deletes only finished Jobs) while the release was waited for: by
// its final state when the wait saw it deleted (Failed fails the wait, as
// when it is seen Failed), done otherwise.
func ttlJobDeleted(last *unstructured.Unstructured) (bool, string, error) {
	if last != nil {
		if _, _, err := waiter.KStatus(last); err != nil {
			return false, "", err
		}
	}
	return true, "deleted", nil
}

// finalDiagnosis bounds the diagnosis of a wait that timed out. It is
// taken from the wait's own timeout, so that the margin Helm's timeout
// leaves before the step's deadline (budget) stays the operation's, to
// record the failure (and, with atomic, to roll back).
const finalDiagnosis = 500 * time.Millisecond

// hookKinds are the kinds a hook's wait waits for; Helm 4 takes every
// other kind as ready at once.
var hookKinds = map[string]bool{"Job.batch": true, "Pod": true}

// hookCheck judges a hook's Job or Pod as Helm 4's hook status readers
// do: a Job is done when Complete and fails the wait when Failed; a Pod
// when Succeeded, and fails it when Failed.
func hookCheck(u *unstructured.Unstructured) (bool, string, error) {
	name := u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
	if u.GetKind() == "Pod" {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		switch phase {
		case "Succeeded":
			return true, "Succeeded", nil
		case "Failed":
			reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
			msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
			if rm := waiter.ReasonMessage(reason, msg); rm != "" {
				return false, "", fmt.Errorf("%s failed: %s", name, rm)
			}
			return false, "", fmt.Errorf("%s failed", name)
		case "":
			return false, "no phase yet", nil
		}
		return false, phase, nil
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		c, _ := raw.(map[string]any)
		if c["status"] != "True" {
			continue
		}
		switch c["type"] {
		case "Complete":
			return true, "Complete", nil
		case "Failed":
			reason, _ := c["reason"].(string)
			msg, _ := c["message"].(string)
			return false, "", fmt.Errorf("%s failed: %s", name, waiter.ReasonMessage(reason, msg))
		}
	}
	active, _, _ := unstructured.NestedInt64(u.Object, "status", "active")
	return false, fmt.Sprintf("%d active", active), nil
}

func (w *readyWaiter) WaitForDelete(resources helmkube.ResourceList, timeout time.Duration) error {
	hw, err := w.helm()
	if err != nil {
		return err
	}
	return hw.WaitForDelete(resources, timeout)
}

func (w *readyWaiter) Wait(resources helmkube.ResourceList, timeout time.Duration) error {
	if w.hooksOnly {
		return nil
	}
	return w.wait(resources, timeout)
}

func (w *readyWaiter) WaitWithJobs(resources helmkube.ResourceList, timeout time.Duration) error {
	if w.hooksOnly {
		return nil
	}
	return w.wait(resources, timeout)
}

// wait waits until every resource is Current by kstatus (a paused
// Deployment is not waited for, as Helm does not), or a Failed one ends it,
// bounded by timeout and ctx. The error names the resources last seen not
// ready, and why.
func (w *readyWaiter) wait(resources helmkube.ResourceList, timeout time.Duration) error {
	targets := make([]waiter.Target, 0, len(resources))
	for _, info := range resources {
		if paused(info.Object) || alwaysReady[info.Mapping.GroupVersionKind.GroupKind().String()] {
			continue
		}
		t := waiter.Target{Mapping: info.Mapping, Namespace: info.Namespace, Name: info.Name}
		if finishedAreDeleted(info.Object) {
			t.Deleted = ttlJobDeleted
		}
		targets = append(targets, t)
	}
	return w.run(targets, timeout, "readiness", event.PhaseWait, waiter.KStatus)
}

// run waits for targets by check, bounded by timeout and ctx; progress
// goes to the operation's log (a stuck wait's cause included) and a
// timeout's error says what was not ready and why.
func (w *readyWaiter) run(targets []waiter.Target, timeout time.Duration, what, phase string, check waiter.CheckFunc) error {
	if len(targets) == 0 {
		return nil
	}
	ctx := w.ctx
	if dl, ok := ctx.Deadline(); ok && timeout > 0 {
		// Helm's timeout was taken from the step's budget when the
		// operation began (budget), and counts from the wait's start:
		// an install that took long to write its objects (a loaded
		// cluster) would wait past the step's deadline, which then
		// interrupts the operation before it says why. The wait ends
		// the same margin before the deadline instead.
		left := time.Until(dl)
		timeout = min(timeout, max(left-min(max(left/10, time.Second), 10*time.Second), left/2))
	}
	if timeout > 0 {
		if timeout > 4*finalDiagnosis {
			timeout -= finalDiagnosis // the diagnosis of a timeout fits in Helm's timeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	progress := func(line string) { w.log("%s", line) }
	err := waiter.Wait(ctx, w.clients, waiter.Options{Targets: targets, Check: check, What: what, Phase: phase, Progress: progress, FinalDiagnosis: finalDiagnosis, Redact: w.red.String})
	if err != nil && ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return w.red.Error(err) // before Helm records it in the release
}

// alwaysReady are the kinds kstatus judges Current whenever they exist
// (its "Resource is always ready", or no status at all): the operation
// has just written them, so their wait would be a watch set up to see
// that they exist. A release's ConfigMaps and Secrets are not watched.
var alwaysReady = map[string]bool{
	"ConfigMap": true, "Secret": true, "CronJob.batch": true, "ServiceAccount": true,
	"Role.rbac.authorization.k8s.io": true, "RoleBinding.rbac.authorization.k8s.io": true,
	"ClusterRole.rbac.authorization.k8s.io": true, "ClusterRoleBinding.rbac.authorization.k8s.io": true,
}

// paused reports whether obj is a Deployment whose rollout is paused.
func paused(obj runtime.Object) bool {
	switch d := obj.(type) {
	case *appsv1.Deployment:
		return d.Spec.Paused
	case *unstructured.Unstructured:
		p, _, _ := unstructured.NestedBool(d.Object, "spec", "paused")
		return p && d.GetKind() == "Deployment"
	}
	return false
}

// logLines keeps the log excerpt of the cause a wait's error carries (a
// crashing container's last lines, see core/diagnose) as lines: oneLine
// folds the message into one line, so the excerpt is moved, unfolded, to
// the end of err's message.
func logLines(err error) error {
	c := waiter.CauseOf(err)
	if c == nil || c.Logs == "" {
		return err
	}
	msg, folded := err.Error(), flatten(c.Logs)
	if !strings.Contains(msg, folded) {
		return err
	}
	return &messageError{msg: strings.Replace(msg, folded, "", 1) + c.Logs, err: err}
}

// messageError is err with another message.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }
