package kube

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
)

func TestConfiguredNeverFallsBackToLocalhost(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	// no KUBECONFIG and no ~/.kube/config: nothing configured (a
	// KUBECONFIG naming a missing file is an error: TestLoadConfig)
	t.Setenv("KUBECONFIG", "")
	flags := genericclioptions.NewConfigFlags(false)
	if Configured(flags) {
		t.Fatal("no kubeconfig and no --server must not count as configured")
	}
	if _, err := New(flags, Options{}); !errors.Is(err, ErrNoKubeconfig) {
		t.Fatalf("want ErrNoKubeconfig, got %v", err)
	}
	server := "https://10.0.0.1:6443"
	flags.APIServer = &server
	if !Configured(flags) {
		t.Fatal("an explicit --server counts as configured")
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://10.0.0.2:6443}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kc)
	if !Configured(genericclioptions.NewConfigFlags(false)) {
		t.Fatal("a kubeconfig with a cluster counts as configured")
	}
}

func TestStripCredentials(t *testing.T) {
	if got := StripCredentials("https://admin:hunter2@10.0.0.1:6443/path"); got != "https://10.0.0.1:6443/path" {
		t.Fatal(got)
	}
}

// TestNewRateLimits: khook's high defaults, replaced by what the
// connection's flags set (helm's --qps and --burst-limit).
func TestNewRateLimits(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://10.0.0.2:6443}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kc)
	for _, tc := range []struct {
		opts      Options
		qps       float32
		burst     int
		timeoutIn string
	}{
		{Options{}, DefaultQPS, DefaultBurst, ""},
		{Options{QPS: 3, Burst: 4}, 3, 4, ""},
		{Options{QPS: -1}, -1, DefaultBurst, ""},
		{Options{}, DefaultQPS, DefaultBurst, "7s"},
	} {
		flags := genericclioptions.NewConfigFlags(false)
		if tc.timeoutIn != "" {
			flags.Timeout = &tc.timeoutIn
		}
		c, err := New(flags, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if c.Config.QPS != tc.qps || c.Config.Burst != tc.burst {
			t.Errorf("%+v: QPS %v burst %d, want %v and %d", tc.opts, c.Config.QPS, c.Config.Burst, tc.qps, tc.burst)
		}
		if tc.timeoutIn != "" && c.Config.Timeout.String() != tc.timeoutIn {
			t.Errorf("--request-timeout %s: the clients' timeout is %s", tc.timeoutIn, c.Config.Timeout)
		}
	}
}
