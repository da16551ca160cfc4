package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// current is the cluster of this test binary, set by Main.
var current struct {
	sync.Mutex
	c *Cluster
}

func setCurrent(c *Cluster) {
	current.Lock()
	current.c = c
	current.Unlock()
}

// Main runs the tests of a package against a cluster; call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
//
// With $KHOOK_TEST_CLUSTER set (hack/with-cluster.sh, `make
// test-integration`), it attaches to that cluster and leaves it running.
// Otherwise it starts a private cluster for this test binary and stops it
// after m.Run: the directory is removed when every test passed, and kept
// with the component logs otherwise (the path is printed). SIGINT and
// SIGTERM stop the private cluster too; if the test binary dies any other
// way, the components die with it (parent-death signal).
func Main(m *testing.M) int {
	if dir := os.Getenv(EnvCluster); dir != "" {
		c, err := Load(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testcluster: %s=%s: %v\n", EnvCluster, dir, err)
			return 1
		}
		setCurrent(c)
		return m.Run()
	}

	sweepStale(os.TempDir())
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	began := time.Now()
	c, err := Start(sigCtx, Options{Log: os.Stderr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "testcluster: private cluster ready in %.1fs in %s\n", time.Since(began).Seconds(), c.Dir)
	setCurrent(c)

	finished := make(chan struct{})
	interrupted := make(chan struct{})
	go func() {
		select {
		case <-sigCtx.Done():
			close(interrupted)
			fmt.Fprintln(os.Stderr, "testcluster: interrupted: stopping the cluster")
			c.Keep()
			if err := c.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
			}
			os.Exit(2)
		case <-finished:
		}
	}()

	code := m.Run()
	close(finished)
	select {
	case <-interrupted:
		select {} // the signal goroutine stops the cluster and exits
	default:
	}
	for _, p := range c.Processes() {
		if !p.Running {
			fmt.Fprintf(os.Stderr, "testcluster: %s (pid %d) exited during the tests\n", p.Name, p.PID)
			if code == 0 {
				code = 1
			}
		}
	}
	if code != 0 {
		c.Keep()
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: stop: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// sweepStale cleans private clusters left in tmp by test processes that died
// without stopping them: it stops any of their processes still running
// (there should be none: parent-death signal) and removes their etcd data,
// keeping their logs.
func sweepStale(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, privateDirPrefix+"*"))
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, fileOwner)); err != nil || ownerAlive(dir) {
			continue
		}
		procs, err := readPIDs(dir)
		if err != nil {
			continue
		}
		if err := stopProcs(procs, 5*time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster: stale cluster in %s: %v\n", dir, err)
			continue
		}
		_ = wipeDir(dir, true)
	}
}

// Get returns the cluster of this test binary (see Main); it fails the test
// when there is none.
func Get(t testing.TB) *Cluster {
	t.Helper()
	current.Lock()
	c := current.c
	current.Unlock()
	if c == nil {
		t.Fatal("testcluster: no cluster: call os.Exit(testcluster.Main(m)) from TestMain")
	}
	return c
}

// RESTConfig returns a fresh client configuration of the admin user.
func (c *Cluster) RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := c.RESTConfigE()
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return cfg
}

// LimitedRESTConfig returns a fresh client configuration of the
// least-privilege user (rights in LimitedNamespace only).
func (c *Cluster) LimitedRESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := c.LimitedRESTConfigE()
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return cfg
}

// NewNamespace creates a namespace named prefix plus a random suffix,
// waits until its `default` ServiceAccount exists (so pods can be created
// at once), and deletes it in t.Cleanup without waiting for the deletion.
func (c *Cluster) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.RESTConfig(t))
	if err != nil {
		t.Fatalf("testcluster: create client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: namespacePrefix(prefix),
		Annotations:  map[string]string{"khook.io/test": t.Name()},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testcluster: create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		bg := metav1.DeletePropagationBackground
		err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testcluster: delete namespace %s: %v", ns.Name, err)
		}
	})
	if err := waitServiceAccount(ctx, cs, ns.Name); err != nil {
		t.Fatalf("testcluster: namespace %s: %v", ns.Name, err)
	}
	return ns.Name
}

// namespacePrefix turns prefix into a valid GenerateName: lowercase
// alphanumerics and '-', starting with a letter, at most 40 characters,
// ending in '-'.
func namespacePrefix(prefix string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(prefix) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "test-" + s
	}
	if len(s) > 40 {
		s = s[:40]
	}
	return strings.TrimRight(s, "-") + "-"
}

// NewLossyLink starts a lossy link to the cluster's API server (see
// LossyLink) for t: it is closed when t ends, and what it did (requests
// forwarded, answers cut, requests held) goes to t's log then.
func (c *Cluster) NewLossyLink(t testing.TB, opts LossyOptions) *LossyLink {
	t.Helper()
	l, err := c.LossyLink(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	t.Cleanup(func() {
		t.Logf("lossy link (seed %d): %s", opts.Seed, l.Counts())
		_ = l.Close()
	})
	return l
}

// RESTConfig is a fresh admin client configuration through the link.
func (l *LossyLink) RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := restConfig(l.Kubeconfig)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return cfg
}
