// Package testcluster runs a real, throwaway Kubernetes control plane for
// khook's integration tests: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok (one fake node that makes pods Ready and Job pods
// Succeeded), all on loopback, each cluster in a directory of its own with
// ports picked at start. The binaries are built from Go modules by
// `make testbin` (hack/testbin); no container runtime is involved.
//
// Integration tests (build tag integration) use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
//
// and testcluster.Get(t) in each test. See docs/test-cluster.md.
package testcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"khook.io/core/testing/testenv"
)

// Environment variables.
const (
	// EnvCluster names a cluster directory written by `khook-testcluster up`
	// (hack/with-cluster.sh sets it): Main attaches to that cluster instead
	// of starting one.
	EnvCluster = "KHOOK_TEST_CLUSTER"
	// EnvTestbin overrides the directory of the component binaries
	// (default: <repo root>/.cache/testbin/bin).
	EnvTestbin = "KHOOK_TESTBIN"
)

// Options configure Start.
type Options struct {
	// Dir is the cluster directory. Empty: a new temporary directory. An
	// existing directory must be empty or hold a cluster of a previous run,
	// whose processes still running are stopped (reaped) first.
	Dir string
	// BinDir holds the component binaries. Empty: $KHOOK_TESTBIN, else
	// <repo root>/.cache/testbin/bin (the repo root holds go.work).
	BinDir string
	// Detached starts the components in a session of their own, without a
	// parent-death signal, so the cluster outlives the calling process
	// (khook-testcluster up). Otherwise they die with the calling process.
	Detached bool
	// Timeout bounds the start, readiness included. Zero: 2 minutes.
	Timeout time.Duration
	// Log receives progress lines. Nil: discarded.
	Log io.Writer
}

// Cluster is a running test cluster.
type Cluster struct {
	// Dir is the cluster directory: pki/, conf/, logs/, etcd/, kubeconfigs.
	Dir string `json:"dir"`
	// Kubeconfig is the admin kubeconfig (group system:masters).
	Kubeconfig string `json:"kubeconfig"`
	// LimitedKubeconfig is the kubeconfig of the least-privilege user
	// khook-limited: namespaced verbs in LimitedNamespace only, nothing
	// cluster-scoped. Its context's namespace is LimitedNamespace.
	LimitedKubeconfig string `json:"limitedKubeconfig"`
	// LimitedNamespace is the one namespace the least-privilege user may use.
	LimitedNamespace string `json:"limitedNamespace"`
	// Server is the apiserver's URL (https://127.0.0.1:<port>).
	Server string `json:"server"`
	// LogDir holds one log file per component.
	LogDir string `json:"logDir"`
	// Detached tells whether the cluster was started to outlive its starter.
	Detached bool `json:"detached"`
	// Ports are the loopback ports of the components.
	Ports Ports `json:"ports"`

	mu       sync.Mutex
	procs    []*proc
	launcher *launcher // nil when detached or loaded
	keep     bool
	stopped  bool
	log      io.Writer
}

// Start starts a cluster and returns once it is ready: etcd healthy,
// apiserver /readyz, controller-manager and scheduler /healthz, the kwok
// node Ready and schedulable, and the `default` ServiceAccount and
// kube-root-ca.crt ConfigMap present. On error, everything started is
// stopped and the directory (with the logs) is kept; the error says where.
//
// ctx bounds only the start; stop the cluster with Stop.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := platformSupported(); err != nil {
		return nil, err
	}
	binDir, err := findBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", privateDirPrefix); err != nil {
			return nil, fmt.Errorf("create cluster directory: %w", err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	if err := prepareDir(dir, opts.Log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, dir, binDir, opts)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == 3 {
			return nil, err
		}
		fmt.Fprintf(opts.Log, "testcluster: %v; retrying with other ports\n", err)
		if err := wipeDir(dir, true); err != nil {
			return nil, err
		}
	}
}

// Load returns the cluster in dir, as written by Start: the way to reach a
// cluster started by another process (`khook-testcluster up`). Its Stop
// stops the processes by PID.
func Load(dir string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, fileState))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no test cluster in %s (start one with `make cluster-up`)", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read cluster state: %w", err)
	}
	c := &Cluster{log: io.Discard}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, fileState), err)
	}
	if c.Dir != dir {
		return nil, fmt.Errorf("%s describes a cluster in %s, not %s", fileState, c.Dir, dir)
	}
	if c.procs, err = readPIDs(dir); err != nil {
		return nil, err
	}
	return c, nil
}

// Down stops every process recorded in dir by PID, whether or not that
// cluster ever became ready (SIGTERM, then SIGKILL after a grace period), and
// waits until they are gone. It then removes the etcd data and, with remove,
// the whole directory; otherwise the logs, PKI and kubeconfigs stay. A
// missing directory or one without running processes is not an error.
func Down(dir string, remove bool, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("cluster directory: %w", err)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(log, "testcluster: no cluster in %s\n", dir)
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, fileMarker)); err != nil {
		return fmt.Errorf("%s is not a test cluster directory", dir)
	}
	running, err := runningPIDs(dir)
	if err != nil {
		return err
	}
	if len(running) == 0 {
		fmt.Fprintf(log, "testcluster: no running cluster in %s\n", dir)
	} else {
		fmt.Fprintf(log, "testcluster: stopping %d processes in %s\n", len(running), dir)
		if err := stopProcs(running, 5*time.Second); err != nil {
			return err
		}
	}
	if err := wipeDir(dir, !remove); err != nil {
		return err
	}
	if !remove {
		fmt.Fprintf(log, "testcluster: logs kept in %s\n", filepath.Join(dir, dirLogs))
	}
	return nil
}

// RESTConfigE returns a client configuration of the admin user, with a QPS
// high enough for tests.
func (c *Cluster) RESTConfigE() (*rest.Config, error) { return restConfig(c.Kubeconfig) }

// LimitedRESTConfigE returns a client configuration of the least-privilege
// user.
func (c *Cluster) LimitedRESTConfigE() (*rest.Config, error) { return restConfig(c.LimitedKubeconfig) }

func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// Keep makes Stop keep the cluster directory (logs, PKI, kubeconfigs; the
// etcd data is always removed). Main calls it when a test failed.
func (c *Cluster) Keep() {
	c.mu.Lock()
	c.keep = true
	c.mu.Unlock()
}

// Stop stops every process of the cluster by PID (SIGTERM, then SIGKILL
// after a grace period) and waits until they are gone. It then removes the
// cluster directory, unless Keep was called or a component had exited on its
// own: then it keeps the logs and says where on the Options.Log writer.
// Stop is idempotent.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	keep := c.keep
	for _, p := range c.procs {
		if !p.alive() {
			fmt.Fprintf(c.log, "testcluster: %s (pid %d) had exited before Stop\n", p.Name, p.PID)
			keep = true
		}
	}
	err := stopProcs(c.procs, 5*time.Second)
	if c.launcher != nil {
		c.launcher.close()
	}
	keep = keep || err != nil
	if rerr := wipeDir(c.Dir, keep); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if keep {
		fmt.Fprintf(c.log, "testcluster: logs of the cluster are kept in %s\n", c.LogDir)
	}
	return err
}

// Healthy checks that every process of the cluster runs and that the
// apiserver is ready.
func (c *Cluster) Healthy(ctx context.Context) error {
	c.mu.Lock()
	procs := c.procs
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return errors.New("cluster stopped")
	}
	if len(procs) == 0 {
		return errors.New("no processes recorded")
	}
	for _, p := range procs {
		if !p.alive() {
			return fmt.Errorf("%s (pid %d) is not running", p.Name, p.PID)
		}
	}
	cfg, err := c.RESTConfigE()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return fmt.Errorf("apiserver not ready: %w", err)
	}
	return nil
}

// Processes lists the processes of the cluster and whether each still runs.
func (c *Cluster) Processes() []ProcessInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ProcessInfo, 0, len(c.procs))
	for _, p := range c.procs {
		out = append(out, ProcessInfo{Name: p.Name, PID: p.PID, Running: p.alive()})
	}
	return out
}

// ProcessInfo describes one process of a cluster.
type ProcessInfo struct {
	Name    string
	PID     int
	Running bool
}

// findBinDir returns the directory of the component binaries, checking that
// all are there.
func findBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(EnvTestbin)
	}
	if dir == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			return "", fmt.Errorf("find the test cluster binaries: %w (set %s to their directory)", err, EnvTestbin)
		}
		dir = filepath.Join(root, ".cache", "testbin", "bin")
	}
	for _, b := range binaries() {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("test cluster binary %s not found in %s: run `make testbin` in the repository root (builds them, about 11 minutes the first time)", b, dir)
		}
	}
	return dir, nil
}

const privateDirPrefix = "khook-testcluster-"

// prepareDir makes dir an empty cluster directory: it stops the processes
// of a stale cluster recorded there and wipes what that left. It refuses a
// non-empty directory that is not a cluster directory.
func prepareDir(dir string, log io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create cluster directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read cluster directory: %w", err)
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, fileMarker)); err != nil {
			return fmt.Errorf("directory %s is not empty and holds no test cluster: refusing to use it", dir)
		}
		running, err := runningPIDs(dir)
		if err != nil {
			return err
		}
		if len(running) > 0 {
			fmt.Fprintf(log, "testcluster: stopping %d processes of a stale cluster in %s\n", len(running), dir)
			if err := stopProcs(running, 5*time.Second); err != nil {
				return fmt.Errorf("stop the stale cluster in %s: %w", dir, err)
			}
		}
		if err := wipeDir(dir, false); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cluster directory: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, fileMarker), []byte("khook test cluster directory: `khook-testcluster up` may wipe it\n"), 0o644); err != nil {
		return fmt.Errorf("mark cluster directory: %w", err)
	}
	return nil
}

// wipeDir removes a stopped cluster's directory; with keep, it removes only
// the etcd data and the files that describe a running cluster, and keeps the
// logs, PKI and kubeconfigs.
func wipeDir(dir string, keep bool) error {
	if !keep {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove cluster directory: %w", err)
		}
		return nil
	}
	for _, name := range []string{dirEtcdData, fileState, filePIDs, fileOwner} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("clean cluster directory: %w", err)
		}
	}
	return nil
}

// errPortInUse marks a start that failed because another process took one
// of the picked ports in the meantime.
var errPortInUse = errors.New("a picked port was taken by another process")

// starter holds the state of one start attempt.
type starter struct {
	c      *Cluster
	binDir string
	opts   Options
	began  time.Time
	cancel context.CancelCauseFunc
}

func (s *starter) logf(format string, args ...any) {
	fmt.Fprintf(s.opts.Log, "testcluster: [%5.1fs] %s\n", time.Since(s.began).Seconds(), fmt.Sprintf(format, args...))
}

func start(ctx context.Context, dir, binDir string, opts Options) (_ *Cluster, err error) {
	ports, err := pickPorts()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Dir:               dir,
		Kubeconfig:        filepath.Join(dir, fileKubeconfig),
		LimitedKubeconfig: filepath.Join(dir, fileLimitedConfig),
		LimitedNamespace:  limitedNamespace,
		Server:            "https://127.0.0.1:" + strconv.Itoa(ports.APIServer),
		LogDir:            filepath.Join(dir, dirLogs),
		Detached:          opts.Detached,
		Ports:             ports,
		log:               opts.Log,
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s := &starter{c: c, binDir: binDir, opts: opts, began: time.Now(), cancel: cancel}
	defer func() {
		if err == nil {
			return
		}
		c.Keep()
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop after failed start: %w", serr))
		}
		err = fmt.Errorf("start test cluster in %s: %w (component logs in %s)", dir, err, c.LogDir)
	}()
	if !opts.Detached {
		c.launcher = newLauncher()
		if err := writeOwner(dir); err != nil {
			return nil, err
		}
	}
	if err := s.writeFiles(); err != nil {
		return nil, err
	}
	s.logf("PKI and configuration written to %s", dir)

	if err := s.run(ctx, compEtcd); err != nil {
		return nil, err
	}
	// The apiserver retries its etcd connection: no need to wait for etcd.
	if err := s.run(ctx, compAPIServer); err != nil {
		return nil, err
	}
	if err := s.waitHTTP(ctx, compEtcd, "http://127.0.0.1:"+strconv.Itoa(ports.EtcdClient)+"/health", `"health":"true"`); err != nil {
		return nil, err
	}
	cfg, err := c.RESTConfigE()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	if err := s.waitReadyz(ctx, cs); err != nil {
		return nil, err
	}
	// kwok serves pod logs from its CRDs, which must exist before it starts
	if err := installCRDs(ctx, cfg); err != nil {
		return nil, err
	}
	for _, name := range []string{compKCM, compScheduler, compKwok} {
		if err := s.run(ctx, name); err != nil {
			return nil, err
		}
	}
	if err := s.setupObjects(ctx, cs); err != nil {
		return nil, err
	}
	err = parallel(ctx,
		func(ctx context.Context) error {
			return s.waitHTTP(ctx, compKCM, "https://127.0.0.1:"+strconv.Itoa(ports.KCM)+"/healthz", "ok")
		},
		func(ctx context.Context) error {
			return s.waitHTTP(ctx, compScheduler, "https://127.0.0.1:"+strconv.Itoa(ports.Scheduler)+"/healthz", "ok")
		},
		func(ctx context.Context) error { return s.waitNode(ctx, cs) },
		func(ctx context.Context) error { return s.waitNamespaceReady(ctx, cs, "default", true) },
		func(ctx context.Context) error { return s.waitNamespaceReady(ctx, cs, limitedNamespace, false) },
	)
	if err != nil {
		return nil, err
	}
	if err := writeState(c); err != nil {
		return nil, err
	}
	s.logf("cluster ready: %s", c.Server)
	return c, nil
}

// writeFiles writes the PKI, the kubeconfigs and kwok's configuration.
func (s *starter) writeFiles() error {
	dir := s.c.Dir
	for _, d := range []string{"conf", dirLogs} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	p, err := newPKI(net.ParseIP(advertiseIP))
	if err != nil {
		return err
	}
	if err := p.write(dir); err != nil {
		return err
	}
	configs := []struct {
		file, user string
		kp         *keyPair
		namespace  string
	}{
		{fileKubeconfig, adminUser, p.Admin, ""},
		{fileLimitedConfig, limitedUser, p.Limited, limitedNamespace},
		{fileKCMConfig, kcmUser, p.ControllerMgr, ""},
		{fileSchedulerConfig, schedulerUser, p.Scheduler, ""},
		{fileKwokKubeconfig, kwokUser, p.Kwok, ""},
	}
	for _, k := range configs {
		if err := writeKubeconfig(filepath.Join(dir, k.file), s.c.Server, p.CA.CertPEM, k.user, k.kp, k.namespace); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, fileKwokConfig), renderKwokConfig(s.c.Ports.Kwok), 0o644); err != nil {
		return fmt.Errorf("write kwok configuration: %w", err)
	}
	return nil
}

// run starts one component and records it.
func (s *starter) run(ctx context.Context, name string) error {
	if ctx.Err() != nil {
		return ctxErr(ctx, "the start of "+name)
	}
	args, err := componentArgs(name, s.c.Dir, s.c.Ports)
	if err != nil {
		return err
	}
	var launch func(func() error) error
	if s.c.launcher != nil {
		launch = s.c.launcher.run
	}
	p, err := startProc(name, filepath.Join(s.binDir, name), args, componentEnv(s.c.Dir), filepath.Join(s.c.LogDir, name+".log"), s.opts.Detached, launch)
	if err != nil {
		return err
	}
	s.c.mu.Lock()
	s.c.procs = append(s.c.procs, p)
	s.c.mu.Unlock()
	if err := appendPID(s.c.Dir, p); err != nil {
		return err
	}
	// A component that exits during the start fails it at once.
	go func() {
		<-p.done
		logPath := filepath.Join(s.c.LogDir, name+".log")
		tail := logTail(logPath, 15)
		err := fmt.Errorf("%s exited during start (%v); last lines of %s:\n%s", name, p.waitErr, logPath, tail)
		if strings.Contains(tail, "address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		s.cancel(err)
	}()
	s.logf("%s started (pid %d)", name, p.PID)
	return nil
}

// ctxErr returns why ctx ended: a component's exit, the timeout, or the
// caller's cancellation.
func ctxErr(ctx context.Context, what string) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, context.DeadlineExceeded) {
		return fmt.Errorf("timed out waiting for %s", what)
	}
	return cause
}

// poll calls check every interval until it reports done or ctx ends.
func poll(ctx context.Context, interval time.Duration, what string, check func(context.Context) bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if check(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctxErr(ctx, what)
		case <-t.C:
		}
	}
}

// waitHTTP polls a health endpoint until it answers 200 with a body holding
// want. The controller-manager and scheduler serve with a self-signed
// certificate made in memory, hence no verification (loopback only).
func (s *starter) waitHTTP(ctx context.Context, name, url, want string) error {
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health check of a self-signed component
	}
	defer client.CloseIdleConnections()
	err := poll(ctx, 50*time.Millisecond, name+" health", func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), want)
	})
	if err != nil {
		return err
	}
	s.logf("%s healthy", name)
	return nil
}

func (s *starter) waitReadyz(ctx context.Context, cs kubernetes.Interface) error {
	err := poll(ctx, 100*time.Millisecond, "kube-apiserver /readyz", func(ctx context.Context) bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		return err == nil
	})
	if err != nil {
		return err
	}
	s.logf("kube-apiserver ready")
	return nil
}

// writeState records the ready cluster in cluster.json (what Load reads).
func writeState(c *Cluster) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cluster state: %w", err)
	}
	tmp := filepath.Join(c.Dir, fileState+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.Dir, fileState)); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return nil
}

// parallel runs fns concurrently and returns the first error; the first
// failure cancels the others.
func parallel(ctx context.Context, fns ...func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(func() {
			if err := fn(ctx); err != nil {
				cancel(err) // only the first cause is kept
			}
		})
	}
	wg.Wait()
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}
