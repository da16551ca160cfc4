// Command khook-testcluster starts, stops and inspects a khook test cluster
// that outlives the command (make cluster-up / cluster-down,
// hack/with-cluster.sh):
//
//	khook-testcluster up     --dir DIR [--timeout 2m]  # start (or reuse a healthy one); last line: export KUBECONFIG=...
//	khook-testcluster down   --dir DIR [--remove]      # stop every process by PID; keep the logs unless --remove
//	khook-testcluster status --dir DIR                 # exit 0 when running and healthy
//	khook-testcluster ready  --dir DIR --namespace NS --count N  # when N Deployments in NS are Current (bench/charts.sh)
//
// Progress goes to stderr; `up` prints only the export line on stdout, so
// `eval "$(khook-testcluster up --dir DIR)"` works.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"khook.io/core/testing/testcluster"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: khook-testcluster up|down|status --dir DIR [flags]
  up      start a cluster in DIR (reused when one is running and healthy); the last line printed is "export KUBECONFIG=<path>"
  down    stop every process of the cluster in DIR by PID; keeps DIR/logs unless --remove
  status  show the cluster in DIR; exit 0 when it runs and is healthy
  ready   watch the Deployments of --namespace until --count of them are Current by kstatus; print when (Unix ms) the first was seen and the last turned Current
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("khook-testcluster "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", os.Getenv(testcluster.EnvCluster), "cluster directory (default $"+testcluster.EnvCluster+")")
	timeout := fs.Duration("timeout", 2*time.Minute, "up: how long to wait for the cluster to be ready; ready: for the Deployments")
	remove := fs.Bool("remove", false, "down: remove the whole directory, logs included")
	namespace := fs.String("namespace", "", "ready: the namespace of the Deployments")
	count := fs.Int("count", 0, "ready: how many Deployments")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintf(stderr, "khook-testcluster %s: --dir is required\n", cmd)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd {
	case "up":
		err = up(ctx, *dir, *timeout, stdout, stderr)
	case "down":
		err = testcluster.Down(*dir, *remove, stderr)
	case "status":
		err = status(ctx, *dir, stdout)
	case "ready":
		err = ready(ctx, *dir, *namespace, *count, *timeout, stdout)
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "khook-testcluster %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func up(ctx context.Context, dir string, timeout time.Duration, stdout, stderr io.Writer) error {
	if c, err := testcluster.Load(dir); err == nil {
		herr := c.Healthy(ctx)
		if herr == nil {
			fmt.Fprintf(stderr, "khook-testcluster: reusing the running, healthy cluster in %s (%s)\n", c.Dir, c.Server)
			describe(c, stderr)
			fmt.Fprintf(stdout, "export KUBECONFIG=%s\n", c.Kubeconfig)
			return nil
		}
		fmt.Fprintf(stderr, "khook-testcluster: the cluster in %s is not healthy (%v): starting a new one\n", c.Dir, herr)
	}
	began := time.Now()
	c, err := testcluster.Start(ctx, testcluster.Options{Dir: dir, Detached: true, Timeout: timeout, Log: stderr})
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return fmt.Errorf("interrupted: %w", err)
		}
		return err
	}
	fmt.Fprintf(stderr, "khook-testcluster: cluster ready in %.1fs\n", time.Since(began).Seconds())
	describe(c, stderr)
	fmt.Fprintf(stdout, "export KUBECONFIG=%s\n", c.Kubeconfig)
	return nil
}

func describe(c *testcluster.Cluster, w io.Writer) {
	fmt.Fprintf(w, "  server:             %s\n", c.Server)
	fmt.Fprintf(w, "  admin kubeconfig:   %s\n", c.Kubeconfig)
	fmt.Fprintf(w, "  limited kubeconfig: %s (user khook-limited, namespace %s only)\n", c.LimitedKubeconfig, c.LimitedNamespace)
	fmt.Fprintf(w, "  logs:               %s\n", c.LogDir)
	fmt.Fprintf(w, "  stop it with:       make cluster-down CLUSTER_DIR=%s\n", c.Dir)
}

func status(ctx context.Context, dir string, stdout io.Writer) error {
	c, err := testcluster.Load(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cluster in %s\n", c.Dir)
	describe(c, stdout)
	for _, p := range c.Processes() {
		state := "running"
		if !p.Running {
			state = "NOT RUNNING"
		}
		fmt.Fprintf(stdout, "  %-24s pid %-7d %s\n", p.Name, p.PID, state)
	}
	if err := c.Healthy(ctx); err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	fmt.Fprintln(stdout, "healthy")
	return nil
}
