// Command kubectl-khook is khook as a kubectl plugin: `kubectl khook ...`.
// It builds the cluster connection from kubectl's own flags
// (--kubeconfig, --context, -n, ...) and runs the shared command tree.
package main

import (
	"context"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"khook.io/core/cli"
	"khook.io/core/steps/builtin"
)

// kubectlConnection is kubectl's connection flags.
type kubectlConnection struct {
	flags *genericclioptions.ConfigFlags
}

func (c kubectlConnection) AddFlags(fs *pflag.FlagSet) { c.flags.AddFlags(fs) }

func (c kubectlConnection) RESTClientGetter() genericclioptions.RESTClientGetter { return c.flags }

func main() {
	// signals first: the first Ctrl-C (or SIGTERM) cancels the command,
	// a second one exits at once
	ctx, stop := cli.NotifyContext(context.Background(), os.Stderr, os.Exit)
	code := cli.Execute(ctx, cli.Config{
		Name:       "kubectl khook",
		Connection: kubectlConnection{flags: genericclioptions.NewConfigFlags(true)},
		Steps:      builtin.Registry,
		// klog and the standard logger are this process's: client-go's
		// log lines go through the run's redacting standard error
		Logs: cli.RouteProcessLogs,
	}, os.Args[1:])
	stop()
	os.Exit(code)
}
