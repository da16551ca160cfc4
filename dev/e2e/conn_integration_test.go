//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"khook.io/core/testing/testcluster"
)

// A bound for what should happen at once: only a failing test waits it
// out (no timing is asserted).
const failAfter = 90 * time.Second

// kubeconfigWith writes the test cluster's kubeconfig with its user
// replaced by user (named name, in a context named context).
func kubeconfigWith(t *testing.T, context, name string, user *clientcmdapi.AuthInfo) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(testcluster.Get(t).Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var cluster string
	for n := range cfg.Clusters {
		cluster = n
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[cluster] = cfg.Clusters[cluster]
	out.AuthInfos[name] = user
	out.Contexts[context] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: name}
	out.CurrentContext = context
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*out, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanRefusesAnUnusableCluster: plan without --offline plans live when
// a cluster is configured; when that cluster cannot be used it fails
// (exit 1) and says precisely why, instead of a warning and an offline
// plan that would pass a CI check. Only no kubeconfig at all plans offline.
func TestPlanRefusesAnUnusableCluster(t *testing.T) {
	c := testcluster.Get(t)
	const badToken = "khook-planted-bad-token-0123456789"
	tokenKC := kubeconfigWith(t, "ci", "deployer", &clientcmdapi.AuthInfo{Token: badToken})
	expiredKC := filepath.Join(t.TempDir(), "expired.kubeconfig")
	expiry := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	if err := c.IssueKubeconfig(expiredKC, "old-admin@khook-test", "old-admin", expiry.Add(-48*time.Hour), expiry, "system:masters"); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing-kubeconfig")
	empty := filepath.Join(t.TempDir(), "empty-kubeconfig")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := "examples/quickstart.yaml"
	for _, p := range []struct {
		name, bin, ctxFlag string
	}{{"kubectl khook", bins.Kubectl, "--context"}, {"helm khook", bins.Helm, "--kube-context"}} {
		for _, tc := range []struct {
			name string
			env  []string
			args []string
			want []string
		}{
			{"a missing kubeconfig file", []string{"KUBECONFIG=" + missing}, nil,
				[]string{"kubeconfig file " + missing, "does not exist"}},
			{"a missing --kubeconfig file", []string{"KUBECONFIG=" + c.Kubeconfig}, []string{"--kubeconfig", missing},
				[]string{"kubeconfig file " + missing, "--kubeconfig", "does not exist"}},
			{"a token the server rejects", []string{"KUBECONFIG=" + tokenKC}, nil,
				[]string{`the credentials of user "deployer" in context "ci" were rejected`, c.Server, "401"}},
			{"an expired client certificate", []string{"KUBECONFIG=" + expiredKC}, nil,
				[]string{`the credentials of user "old-admin" in context "old-admin@khook-test" were rejected`, "client certificate expired on " + expiry.UTC().Format(time.RFC3339)}},
			{"an unknown context", []string{"KUBECONFIG=" + c.Kubeconfig}, []string{p.ctxFlag, "staging"},
				[]string{`context "staging" is not in the kubeconfig`, c.Kubeconfig}},
			{"an unreachable server", []string{"KUBECONFIG=" + writeKubeconfig(t, "https://127.0.0.1:1")}, nil,
				[]string{"cannot reach the cluster at https://127.0.0.1:1"}},
		} {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				res := run(t, p.bin, tc.env, "", append([]string{"plan", "-f", spec}, tc.args...)...)
				if res.Code != 1 {
					t.Errorf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
				}
				if strings.Contains(res.Stdout, "Plan for") {
					t.Errorf("no plan may print:\n%s", res.Stdout)
				}
				for _, w := range tc.want {
					if !strings.Contains(res.Stderr, w) {
						t.Errorf("stderr lacks %q:\n%s", w, res.Stderr)
					}
				}
				if strings.Contains(res.Stdout+res.Stderr, badToken) {
					t.Errorf("the token was printed:\n%s", res.Stderr)
				}
			})
		}
		t.Run(p.name+"/no kubeconfig at all plans offline", func(t *testing.T) {
			res := run(t, p.bin, []string{"KUBECONFIG=" + empty}, "", "plan", "-f", spec)
			if res.Code != 0 || !strings.Contains(res.Stdout, "Plan for quickstart (offline)") {
				t.Errorf("exit %d:\n%s%s", res.Code, res.Stdout, res.Stderr)
			}
		})
	}
}

// hungPlugin writes a kubeconfig whose user's credentials come from an
// exec plugin that never returns. started yields the plugin's PID once it
// runs (the plugin is killed when the test ends).
func hungPlugin(t *testing.T) (kubeconfig string, started <-chan int) {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(dir, "hung-plugin.sh")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho $$ > \"$KHOOK_TEST_FIFO\"\nexec sleep 600 </dev/null >/dev/null 2>&1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig = kubeconfigWith(t, "sso", "sso-user", &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      "client.authentication.k8s.io/v1",
		Command:         plugin,
		Env:             []clientcmdapi.ExecEnvVar{{Name: "KHOOK_TEST_FIFO", Value: fifo}},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}})
	ch := make(chan int, 1)
	go func() {
		f, err := os.Open(fifo) // blocks until the plugin opens it
		if err != nil {
			return
		}
		defer f.Close()
		line, _ := bufio.NewReader(f).ReadString('\n')
		pid, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			return
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		ch <- pid
	}()
	return kubeconfig, ch
}

// background is a plugin binary running in the background.
type background struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	stderr  bytes.Buffer
	stdout  bytes.Buffer
	changed chan struct{} // closed (and replaced) at each write to stderr
	done    chan error
}

func (b *background) Stderr() string { b.mu.Lock(); defer b.mu.Unlock(); return b.stderr.String() }

// waitStderr waits until stderr holds s.
func (b *background) waitStderr(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(failAfter)
	for {
		b.mu.Lock()
		found, changed := strings.Contains(b.stderr.String(), s), b.changed
		b.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("stderr never showed %q:\n%s", s, tail(b.Stderr(), 40))
		}
	}
}

type lockedWriter struct {
	b   *background
	buf *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if l.buf == &l.b.stderr {
		close(l.b.changed)
		l.b.changed = make(chan struct{})
	}
	return l.buf.Write(p)
}

func startBackground(t *testing.T, bin string, env []string, args ...string) *background {
	t.Helper()
	b := &background{done: make(chan error, 1), changed: make(chan struct{})}
	b.cmd = exec.Command(bin, args...)
	b.cmd.Dir = root(t)
	b.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}, env...)
	b.cmd.Stdout = lockedWriter{b, &b.stdout}
	b.cmd.Stderr = lockedWriter{b, &b.stderr}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	t.Cleanup(func() { _ = b.cmd.Process.Kill() })
	return b
}

// exit waits for the process to end and returns its exit code.
func (b *background) exit(t *testing.T, what string) int {
	t.Helper()
	select {
	case err := <-b.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(failAfter):
		_ = b.cmd.Process.Kill()
		t.Fatalf("%s: still running %s later\nstderr:\n%s", what, failAfter, b.Stderr())
		return -1
	}
}

func waitStarted(t *testing.T, started <-chan int, b *background) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(failAfter):
		t.Fatalf("the credential plugin never ran\nstderr:\n%s", b.Stderr())
	}
}

// TestHungCredentialPlugin: a credential plugin that never returns cannot
// hang khook: the first SIGINT or SIGTERM stops it with a line naming the
// plugin (exit 1), and the up-front check gives up after its timeout
// (here kubectl's --request-timeout).
func TestHungCredentialPlugin(t *testing.T) {
	spec := "examples/quickstart.yaml"
	for _, tc := range []struct {
		name    string
		bin     string
		command string
		sig     syscall.Signal
		sigName string
	}{
		{"kubectl khook apply, SIGINT", bins.Kubectl, "apply", syscall.SIGINT, "SIGINT"},
		{"kubectl khook plan, SIGTERM", bins.Kubectl, "plan", syscall.SIGTERM, "SIGTERM"},
		{"helm khook apply, SIGTERM", bins.Helm, "apply", syscall.SIGTERM, "SIGTERM"},
		{"helm khook plan, SIGINT", bins.Helm, "plan", syscall.SIGINT, "SIGINT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc, started := hungPlugin(t)
			b := startBackground(t, tc.bin, []string{"KUBECONFIG=" + kc}, tc.command, "-f", spec)
			waitStarted(t, started, b)
			if err := b.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if code := b.exit(t, "after "+tc.sigName); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, want := range []string{
				"stopped (received " + tc.sigName + ") while the credential plugin",
				`hung-plugin.sh" of user "sso-user" in context "sso" was running`,
			} {
				if !strings.Contains(b.Stderr(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, b.Stderr())
				}
			}
		})
	}
	t.Run("kubectl khook plan --request-timeout", func(t *testing.T) {
		kc, _ := hungPlugin(t)
		res := run(t, bins.Kubectl, []string{"KUBECONFIG=" + kc}, "", "plan", "-f", spec, "--request-timeout", "2s")
		if res.Code != 1 || !strings.Contains(res.Stderr, `of user "sso-user" in context "sso" did not return within 2s`) {
			t.Errorf("exit %d:\n%s", res.Code, res.Stderr)
		}
	})
}

// TestVerboseLogsInformerRequests: -v 6 logs every request, the list and
// watch requests of the informers behind waits included.
func TestVerboseLogsInformerRequests(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "verbose")
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: verbose}
steps:
  - name: cm
    apply:
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: watched, namespace: %[1]s}
            data: {ready: "yes"}
  - name: wait
    needs: [cm]
    wait: {for: "jsonpath={.data.ready}=yes", on: configmap/watched, namespace: %[1]s}
`, ns))
	res := run(t, bins.Kubectl, kubeEnv(t), "", "apply", "-f", spec, "-v", "6")
	if res.Code != 0 {
		t.Fatalf("exit %d:\n%s", res.Code, res.Stderr)
	}
	found := false
	for _, line := range strings.Split(res.Stderr, "\n") {
		if strings.Contains(line, `verb="GET"`) && strings.Contains(line, "/namespaces/"+ns+"/configmaps?") &&
			(strings.Contains(line, "watch=true") || strings.Contains(line, "sendInitialEvents=true")) {
			found = true
		}
	}
	if !found {
		t.Errorf("no list/watch request of the wait's informer logged:\n%s", res.Stderr)
	}
}

// TestHelmRateLimitsHonoured: helm's --qps and --burst-limit (and
// HELM_QPS, HELM_BURST_LIMIT) replace khook's client-side limits. With one
// request a second, client-go reports waiting (-v 3); with khook's
// defaults it never waits.
func TestHelmRateLimitsHonoured(t *testing.T) {
	spec := "examples/quickstart.yaml"
	const throttled = "client-side throttling"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want bool
	}{
		{"flags", nil, []string{"--qps", "1", "--burst-limit", "1"}, true},
		{"environment", []string{"HELM_QPS=1", "HELM_BURST_LIMIT=1"}, nil, true},
		{"helm's defaults, as helm hands them to every plugin", []string{"HELM_QPS=0.00", "HELM_BURST_LIMIT=100"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, bins.Helm, kubeEnv(t, tc.env...), "", append([]string{"plan", "-f", spec, "-v", "3"}, tc.args...)...)
			if res.Code != 0 {
				t.Fatalf("exit %d:\n%s", res.Code, res.Stderr)
			}
			if got := strings.Contains(res.Stderr, throttled); got != tc.want {
				t.Errorf("throttled: %v, want %v\n%s", got, tc.want, res.Stderr)
			}
		})
	}
}

// fiftyObjects is a spec applying 50 ConfigMaps to ns in one step (no
// retries:), the 25th labelled for the holding webhook.
func fiftyObjects(t *testing.T, ns string, serverSide bool) string {
	t.Helper()
	var manifests strings.Builder
	for i := 1; i <= 50; i++ {
		labels := ""
		if i == 25 {
			labels = "\n                labels: {" + hookLabel + ": \"true\"}"
		}
		fmt.Fprintf(&manifests, `
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata:
                name: cm-%02d
                namespace: %s%s
            data: {i: "%d"}`, i, ns, labels, i)
	}
	return writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
steps:
  - name: objects
    timeout: 5m
    apply:
      namespace: %[1]s
      createNamespace: true
      serverSide: %[2]v
      manifests:%[3]s
`, ns, serverSide, manifests.String()))
}

// TestAPIServerRestartMidApply: the API server of a private cluster
// restarts in the middle of a 50-object apply (no retries: in the spec).
// A validating webhook holds the 25th object's create, so the restart
// begins while khook waits for it and khook meets the server down on what
// follows, whatever the machine's speed.
func TestAPIServerRestartMidApply(t *testing.T) {
	c := startPrivateCluster(t)
	hook := newHoldingWebhook(t, c)
	restart := func(t *testing.T, ctx context.Context) {
		t.Helper()
		if err := c.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// apply runs spec with the 25th object held while stop stops the API
	// server; it returns the report once khook ended.
	apply := func(t *testing.T, spec string, stop func(b *background, release func())) (report, int, string) {
		t.Helper()
		held, release := hook.arm()
		b := startBackground(t, bins.Kubectl, []string{"KUBECONFIG=" + c.Kubeconfig}, "apply", "-f", spec, "-o", "json", "-v", "6")
		select {
		case <-held:
		case err := <-b.done:
			t.Fatalf("khook ended (%v) before the 25th object:\n%s", err, b.Stderr())
		case <-time.After(failAfter):
			t.Fatalf("the 25th object never reached the webhook:\n%s", b.Stderr())
		}
		stop(b, release)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		began := time.Now()
		restart(t, ctx)
		t.Logf("the API server was ready again after %s", time.Since(began))
		code := b.exit(t, "after the restart")
		b.mu.Lock()
		stdout := b.stdout.String()
		b.mu.Unlock()
		var r report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("apply -o json: %v\n%s\n%s", err, stdout, b.Stderr())
		}
		return r, code, b.Stderr()
	}
	count := func(t *testing.T, ns string) int {
		t.Helper()
		list, err := privateClient(t, c).CoreV1().ConfigMaps(ns).List(context.Background(), listAll)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, "cm-") {
				n++
			}
		}
		return n
	}
	// succeeded checks that the 50 objects were applied in one attempt of
	// the step, and that a request was retried (-v 6 logs retries)
	succeeded := func(t *testing.T, ns string, r report, code int, stderr, retried string) {
		t.Helper()
		if code != 0 || r.Status != "ok" {
			t.Fatalf("exit %d, status %s: %+v\n%s", code, r.Status, r.Steps, tail(stderr, 40))
		}
		if status, attempts, _, _ := r.step(t, "objects"); status != "ok" || attempts != 1 {
			t.Errorf("the step must succeed at its first attempt: %s after %d", status, attempts)
		}
		if !strings.Contains(stderr, retried) {
			t.Errorf("no retry (%s) logged:\n%s", retried, tail(stderr, 40))
		}
		if n := count(t, ns); n != 50 {
			t.Errorf("%d of 50 ConfigMaps exist", n)
		}
	}
	// kill kills the API server while the 25th object is held, then lets
	// the held request go (its connection is gone with the server)
	kill := func(_ *background, release func()) {
		ctx, cancel := context.WithTimeout(context.Background(), failAfter)
		defer cancel()
		if err := c.KillAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		release()
	}
	const retried = `"Retrying request after a connection failure"`

	// SIGTERM: the API server stops listening and finishes the held create
	// once released (then SIGKILL: it would wait a minute for the
	// components' watches to end); khook's next requests are refused until
	// it is back, and are retried, creates included (never sent)
	t.Run("graceful restart", func(t *testing.T) {
		r, code, stderr := apply(t, fiftyObjects(t, "graceful", false), func(b *background, release func()) {
			began := time.Now()
			stopped := make(chan error, 1)
			go func() { stopped <- c.StopAPIServer(failAfter) }()
			if err := waitRefused(c.Ports.APIServer); err != nil {
				t.Fatal(err)
			}
			t.Logf("the API server stopped listening after %s", time.Since(began))
			release()
			b.waitStderr(t, "ConfigMap/cm-25 created")
			ctx, cancel := context.WithTimeout(context.Background(), failAfter)
			defer cancel()
			if err := c.KillAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			t.Logf("the API server exited after %s", time.Since(began))
		})
		succeeded(t, "graceful", r, code, stderr, retried)
	})

	// SIGKILL while the server-side apply of the 25th object is in flight:
	// its connection breaks; an apply patch is idempotent, so it is sent
	// again once the server is back
	t.Run("killed under a server-side apply", func(t *testing.T) {
		r, code, stderr := apply(t, fiftyObjects(t, "killed-ssa", true), kill)
		succeeded(t, "killed-ssa", r, code, stderr, retried+` verb="PATCH"`)
	})

	// SIGKILL while the create (POST) of the 25th object is in flight: the
	// server may have acted on it; a create of a named object is sent
	// again all the same (a second one cannot make a second object, and an
	// AlreadyExists is checked against what was sent: decision 63)
	t.Run("killed under a create", func(t *testing.T) {
		r, code, stderr := apply(t, fiftyObjects(t, "killed-create", false), kill)
		succeeded(t, "killed-create", r, code, stderr, retried+` verb="POST"`)
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestInterruptedPlanFails: a live plan cut short by SIGINT is no plan: it
// exits 1 instead of printing the predictions it could not finish. A chart
// repository that never answers holds the helm step's assessment.
func TestInterruptedPlanFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	var once sync.Once
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
			once.Do(func() { close(accepted) })
		}
	}()
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: hung-repo}
steps:
  - name: chart
    helm: {chart: app, version: 1.0.0, repo: "http://%s/charts", namespace: default}
`, ln.Addr()))
	b := startBackground(t, bins.Kubectl, kubeEnv(t), "plan", "-f", spec)
	select {
	case <-accepted:
	case err := <-b.done:
		t.Fatalf("plan ended (%v) before asking the repository:\n%s", err, b.Stderr())
	case <-time.After(failAfter):
		t.Fatalf("the plan never asked the chart repository:\n%s", b.Stderr())
	}
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := b.exit(t, "after SIGINT"); code != 1 {
		b.mu.Lock()
		t.Errorf("exit %d, want 1\nstdout:\n%s", code, b.stdout.String())
		b.mu.Unlock()
	}
	if !strings.Contains(b.Stderr(), "plan stopped (received SIGINT)") {
		t.Errorf("stderr:\n%s", b.Stderr())
	}
}
