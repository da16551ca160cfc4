// Command helm-khook is khook as a helm plugin: `helm khook ...`. helm
// exports its global settings to plugins through the environment
// (HELM_KUBECONTEXT, HELM_NAMESPACE, KUBECONFIG, ...); helm's own settings
// type reads them, and accepts the same flags when the binary is run
// directly.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"helm.sh/helm/v3/pkg/cli"
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

// Debug is helm's --debug (HELM_DEBUG under helm).
func (c helmConnection) Debug() bool { return c.settings.Debug }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// the first Ctrl-C interrupts the run (which still reports); the
	// signals' default action comes back, so a second one kills
	go func() { <-ctx.Done(); stop() }()
	code := khookcli.Execute(ctx, khookcli.Config{
		Name:       "helm khook",
		Connection: helmConnection{settings: cli.New()},
		Steps:      builtin.Registry,
	}, os.Args[1:])
	stop()
	os.Exit(code)
}
