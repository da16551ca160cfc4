package helm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	helmkube "helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"khook.io/core/kube"
	"khook.io/core/waiter"
)

// readinessWaiter chooses who decides that a release's resources are
// ready, for wait: and atomic: "khook" (core/waiter: one watch per type
// and namespace over the run's shared clients, each object judged by
// kstatus) or "helm" (Helm 4's status watcher, kube.StatusWatcherStrategy:
// the same kstatus verdicts through its own informers, REST mapper and
// status readers, built anew for every wait). Both follow watch events;
// bench/charts.sh measures them side by side (it sets this with
// -ldflags -X) and decision 101 records the figures. Hooks are always
// waited for by Helm's status watcher.
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
	return &readyWaiter{helm: helms, hooksOnly: hooksOnly, clients: k.clients, ctx: ctx, log: k.log}, nil
}

// readyWaiter waits for a release's resources with core/waiter and
// kstatus; hooks (WatchUntilReady) and deletions are left to Helm's
// status watcher.
type readyWaiter struct {
	helm func() (helmkube.Waiter, error)
	// hooksOnly: Wait and WaitWithJobs wait for nothing (the hook-only
	// strategy, used without wait).
	hooksOnly bool
	clients   *kube.Clients
	ctx       context.Context
	log       func(format string, args ...any)
}

func (w *readyWaiter) WatchUntilReady(resources helmkube.ResourceList, timeout time.Duration) error {
	hw, err := w.helm()
	if err != nil {
		return err
	}
	return hw.WatchUntilReady(resources, timeout)
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
		if paused(info.Object) {
			continue
		}
		targets = append(targets, waiter.Target{Mapping: info.Mapping, Namespace: info.Namespace, Name: info.Name})
	}
	ctx := w.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	progress := func(line string) { w.log("%s", line) }
	err := waiter.Wait(ctx, w.clients, waiter.Options{Targets: targets, Check: waiter.KStatus, What: "readiness", Progress: progress})
	if err != nil && ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return err
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
