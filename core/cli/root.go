// Package cli is the command tree both plugins share: `kubectl khook` and
// `helm khook` differ only in how they build their cluster connection (see
// Connection) and in the name their help text shows. Commands follow
// kubectl's shape: a constructor (NewCmdPlan), a Flags struct bound to
// pflag, Flags.ToOptions taking every input explicitly (IOStreams, the
// spec's sources, the way to clusters) and Options.Run(ctx); a test
// builds any command's Options without the command tree.
//
// Everything a command prints goes through the run's secret redactor.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
	"khook.io/core/engine/fleet"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/step"
)

// Connection is how a plugin reaches the cluster: kubectl's ConfigFlags
// for kubectl khook, helm's plugin environment for helm khook.
type Connection interface {
	// AddFlags adds the connection flags (--kubeconfig, --context, ...).
	AddFlags(fs *pflag.FlagSet)
	// RESTClientGetter builds clients from the flags and environment.
	RESTClientGetter() genericclioptions.RESTClientGetter
}

// Debugger is a Connection that has a debug switch of its own (helm's
// --debug, which reaches a plugin as HELM_DEBUG): when it is on and -v is
// not given, client-go logs every request, as with -v=6.
type Debugger interface {
	Debug() bool
}

// RateLimited is a Connection whose flags set client-side rate limits
// (helm's --qps and --burst-limit, HELM_QPS and HELM_BURST_LIMIT): a
// non-zero value replaces khook's default (kube.DefaultQPS and
// kube.DefaultBurst); a negative QPS turns client-side throttling off.
type RateLimited interface {
	RateLimits() (qps float32, burst int)
}

// client-go log levels: what a Debugger's switch means, and the most -v
// allows. Above 7 client-go logs request and response bodies, truncated
// and quoted, so a secret in them may be cut or escaped where the
// redactor cannot recognise it: khook refuses those levels.
const (
	debugVerbosity = 6
	maxVerbosity   = 7
)

// Config is what an entrypoint hands the command tree.
type Config struct {
	// Name is how users invoke the plugin: "kubectl khook" or "helm khook".
	Name string
	// Connection builds cluster clients; nil means offline only.
	Connection Connection
	// In, Out and ErrOut default to the process's standard streams.
	In          io.Reader
	Out, ErrOut io.Writer
	// Environ is the environment variables are read from (os.Environ()
	// when nil).
	Environ []string
	// Steps builds the step executors this binary runs (the entrypoint
	// registers them explicitly), which are also the step kinds a spec may
	// use; nil means every command that reads a spec is unavailable.
	Steps func() (*step.Registry, error)
	// Logs routes the process's loggers (klog, which client-go logs
	// through, and the standard log package) to errOut, the run's
	// redacting standard error, at client-go log level verbosity (-v),
	// and returns what undoes it. It is called once per run, before the
	// run's first clients are built; restore when the run ends. The
	// loggers are the process's, so only an entrypoint sets it (to
	// RouteProcessLogs); nil leaves them alone, and -v has no effect.
	Logs func(errOut io.Writer, verbosity int) (restore func())
}

// Exit codes.
const (
	ExitOK      = 0
	ExitFailed  = 1 // execution failure
	ExitInvalid = 2 // invalid spec or flags
	// ExitDrift: with --detailed-exitcode, the command succeeded (diff:
	// without differences) and found drift that the drift policy leaves
	// as it is (drift mode warn).
	ExitDrift = 4
)

// DetailedExitCodeFlag registers --detailed-exitcode on plan, diff and
// apply.
func DetailedExitCodeFlag(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, "detailed-exitcode", false, "exit 4 when the command succeeds (diff: without differences) but finds drift its drift policy leaves as it is (drift mode warn), so that CI can tell")
}

// driftExit is the error of a command that succeeded and found drift
// left as it is, under --detailed-exitcode; nil without the flag or the
// drift.
func driftExit(detailed, drifted bool) error {
	if !detailed || !drifted {
		return nil
	}
	return &ExitError{Code: ExitDrift, Silent: true}
}

// ExitError carries a process exit code. Silent errors were already
// reported to the user.
type ExitError struct {
	Code   int
	Err    error
	Silent bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// invalid marks err as a usage or spec problem (exit 2).
func invalid(err error) error { return &ExitError{Code: ExitInvalid, Err: err} }

// Execute runs the command tree with args and returns the exit code.
// Signals are the caller's: cancel ctx to stop (main uses
// signal.NotifyContext).
func Execute(ctx context.Context, cfg Config, args []string) int {
	if cfg.In == nil {
		cfg.In = os.Stdin
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.ErrOut == nil {
		cfg.ErrOut = os.Stderr
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ()
	}
	// the one redactor of the run: everything printed goes through it
	red := redact.New()
	console := render.NewConsole(cfg.ErrOut)
	out, errOut := red.Writer(cfg.Out), red.Writer(console)
	streams := genericiooptions.IOStreams{In: cfg.In, Out: out, ErrOut: errOut}
	logs := &clientLogs{router: cfg.Logs, errOut: errOut, connection: cfg.Connection}
	defer func() {
		_ = out.Flush()
		_ = errOut.Flush()
	}()
	defer logs.done()

	root := newRootCommand(cfg, streams, red, console, logs)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := exitCode(err, ExitFailed)
	var exitErr *ExitError
	if errors.As(err, &exitErr) && exitErr.Silent {
		return code
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Ctrl-C: whatever the command was doing, it was interrupted
		// (the usual code: a second Ctrl-C exits 130 at once)
		err = errors.New("interrupted")
	}
	fmt.Fprintf(errOut, "Error: %s\n", red.String(err.Error()))
	return code
}

// exitCode is the one map of errors to exit codes: an *ExitError's own
// code; 2 for what the user must fix in the spec or the command (an
// invalid spec, a day-2 flag the spec cannot honour, a fleet invalid for
// some context or naming one cluster twice); otherwise (a failure) code.
func exitCode(err error, otherwise int) int {
	var (
		exitErr    *ExitError
		invalid    *load.InvalidError
		usage      *engine.UsageError
		fleetInv   *fleet.InvalidError
		fleetUsage *fleet.UsageError
	)
	switch {
	case errors.As(err, &exitErr):
		return exitErr.Code
	case errors.As(err, &invalid), errors.As(err, &usage), errors.As(err, &fleetInv), errors.As(err, &fleetUsage):
		return ExitInvalid
	}
	return otherwise
}

// newRootCommand is the command tree of one run: streams are the
// redacting standard streams, console standard error beneath them, logs
// the routing of client-go's logs (-v sets its level).
func newRootCommand(cfg Config, streams genericiooptions.IOStreams, red *redact.Redactor, console *render.Console, logs *clientLogs) *cobra.Command {
	root := &cobra.Command{
		Use:   "khook",
		Short: "Bootstrap a Kubernetes cluster from one declarative spec",
		Long: `khook runs a declarative cluster-bootstrap spec (apiVersion: khook.io/v1,
kind: Khook): helm releases, manifests, deletes, patches, waits, rollouts and
jobs, ordered as a DAG, with variables, secrets that never leak and CEL
conditions.`,
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: cfg.Name},
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return invalid(err) })
	if cfg.Connection != nil {
		cfg.Connection.AddFlags(root.PersistentFlags())
	}
	root.PersistentFlags().IntVarP(&logs.verbosity, "v", "v", 0,
		"client-go's log level, as kubectl's -v: 6 logs every request, 7 their headers (at most 7: bodies could carry secrets past the redactor)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if v := logs.verbosity; v < 0 || v > maxVerbosity {
			return invalid(fmt.Errorf("-v %d: the log level is 0 to %d (above %d client-go logs request bodies, truncated and escaped, where secrets could not be masked reliably)", v, maxVerbosity, maxVerbosity))
		}
		return nil
	}
	src := SpecSource{Stdin: cfg.In, Environ: cfg.Environ, Redactor: red, Loader: &load.Loader{Steps: cfg.Steps}}
	clusters := &Clusters{Connection: cfg.Connection, Steps: cfg.Steps, Redactor: red, Warnings: streams.ErrOut, BeforeClients: logs.route,
		Verbosity: func() int { return logs.verbosity }}
	progress := ProgressOutput{ErrOut: streams.ErrOut, Terminal: cfg.ErrOut, Console: console, Redactor: red,
		NoColor: os.Getenv("NO_COLOR") != "" || envLookup(cfg.Environ, "NO_COLOR") != ""}
	root.AddCommand(
		NewCmdValidate(cfg.Name, streams, src),
		NewCmdPlan(cfg.Name, streams, src, clusters),
		NewCmdApply(cfg.Name, streams, src, clusters, progress),
		NewCmdDestroy(cfg.Name, streams, src, clusters, progress),
		NewCmdDiff(cfg.Name, streams, src, clusters, cfg.Out),
		NewCmdStatus(cfg.Name, streams, src, clusters),
		NewCmdForceUnlock(cfg.Name, streams, src, clusters),
		NewCmdGraph(cfg.Name, streams, src),
		NewCmdSchema(streams, cfg.Steps),
		NewCmdVersion(cfg.Name, streams),
	)
	// unknown subcommands and bad arguments are usage errors (exit 2)
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return invalid(fmt.Errorf("unknown command %q for %q", args[0], cfg.Name))
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return root
}

// runs makes cmd take no arguments and run the options toOptions builds
// from its flags.
func runs[O interface{ Run(context.Context) error }](cmd *cobra.Command, toOptions func() (O, error)) *cobra.Command {
	cmd.Args = noArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		o, err := toOptions()
		if err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
	return cmd
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return invalid(fmt.Errorf("%s takes no arguments, got %q (pass the spec with -f)", cmd.CommandPath(), args[0]))
	}
	return nil
}
