package helm

import (
	"context"

	helmkube "helm.sh/helm/v4/pkg/kube"
)

// waitStrategy is how Helm waits: with wait, for every resource of the
// release to be ready, judged by kstatus from watch events (Helm 4's
// status watcher); without, only for hooks. Helm's waits end with ctx.
func waitStrategy(ctx context.Context, wait bool) (helmkube.WaitStrategy, []helmkube.WaitOption) {
	opts := []helmkube.WaitOption{helmkube.WithWaitContext(ctx)}
	if !wait {
		return helmkube.HookOnlyStrategy, opts
	}
	return helmkube.StatusWatcherStrategy, opts
}
