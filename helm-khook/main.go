// Command helm-khook is khook as a helm plugin: `helm khook ...`. helm
// exports its global settings to plugins through the environment
// (HELM_KUBECONTEXT, HELM_NAMESPACE, KUBECONFIG, ...); helm's own settings
// type reads them, and accepts the same flags when the binary is run
// directly.
package main

import (
	"context"
	"os"

	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/cli"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	khookcli "khook.io/core/cli"
	"khook.io/core/steps/builtin"
)

// helmConnection is helm's plugin environment.
type helmConnection struct {
	settings *cli.EnvSettings
}

func (c helmConnection) AddFlags(fs *pflag.FlagSet) { c.settings.AddFlags(fs) }

func (c helmConnection) RESTClientGetter() genericclioptions.RESTClientGetter {
	return c.settings.RESTClientGetter()
}

// ContextFlag is helm's flag for one kubeconfig context, --kube-context
// (HELM_KUBECONTEXT under helm): a fleet run (--contexts) refuses it.
func (c helmConnection) ContextFlag() string { return "kube-context" }

// Debug is helm's --debug (HELM_DEBUG under helm).
func (c helmConnection) Debug() bool { return c.settings.Debug }

// helmDefaultBurstLimit is helm's default --burst-limit. helm hands every
// plugin HELM_BURST_LIMIT and HELM_QPS, set or not, so only a value other
// than helm's default says the user chose one.
const helmDefaultBurstLimit = 100

// RateLimits are helm's --qps and --burst-limit (HELM_QPS and
// HELM_BURST_LIMIT under helm), when set to other than helm's defaults (0
// and 100): khook's own limits are higher than helm's defaults.
func (c helmConnection) RateLimits() (qps float32, burst int) {
	if c.settings.BurstLimit != helmDefaultBurstLimit {
		burst = c.settings.BurstLimit
	}
	return c.settings.QPS, burst
}

func main() {
	// signals first: the first Ctrl-C (or SIGTERM) cancels the command,
	// a second one exits at once
	ctx, stop := khookcli.NotifyContext(context.Background(), os.Stderr, os.Exit)
	code := khookcli.Execute(ctx, khookcli.Config{
		Name:       "helm khook",
		Connection: helmConnection{settings: cli.New()},
		Steps:      builtin.Registry,
		// klog and the standard logger are this process's: client-go's
		// log lines go through the run's redacting standard error
		Logs: khookcli.RouteProcessLogs,
	}, os.Args[1:])
	stop()
	os.Exit(code)
}
