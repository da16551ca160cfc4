package testcluster

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
)

func TestPickPortsDistinctAndBindable(t *testing.T) {
	p, err := pickPorts()
	if err != nil {
		t.Fatal(err)
	}
	all := []int{p.EtcdClient, p.EtcdPeer, p.EtcdMetrics, p.APIServer, p.KCM, p.Scheduler}
	seen := map[int]bool{}
	for _, port := range all {
		if port <= 0 || port > 65535 {
			t.Fatalf("bad port %d in %+v", port, p)
		}
		if seen[port] {
			t.Fatalf("port %d picked twice: %+v", port, p)
		}
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("picked port %d is not free: %v", port, err)
		}
		l.Close()
	}
	// Component arguments carry the picked ports and nothing else binds.
	args := strings.Join(slices.Concat(etcdArgs("/d", p), apiServerArgs("/d", p), kcmArgs("/d", p), schedulerArgs("/d", p)), " ")
	for _, port := range all {
		if !strings.Contains(args, strconv.Itoa(port)) {
			t.Errorf("port %d not used in the component arguments", port)
		}
	}
}

func TestKubeconfigRoundTrip(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(path, "https://127.0.0.1:6443", p.CA.CertPEM, limitedUser, p.Limited, limitedNamespace); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig mode: %v %v", fi.Mode(), err)
	}
	loader := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loader, &clientcmd.ConfigOverrides{})
	ns, _, err := cc.Namespace()
	if err != nil || ns != limitedNamespace {
		t.Errorf("namespace %q (%v), want %q", ns, err, limitedNamespace)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("host %q", cfg.Host)
	}
	if string(cfg.CAData) != string(p.CA.CertPEM) || string(cfg.CertData) != string(p.Limited.CertPEM) || string(cfg.KeyData) != string(p.Limited.KeyPEM) {
		t.Error("CA or client credentials not embedded")
	}
	raw, err := cc.RawConfig()
	if err != nil {
		t.Fatal(err)
	}
	if raw.CurrentContext != limitedUser+"@"+clusterName {
		t.Errorf("current context %q", raw.CurrentContext)
	}
}

func TestKwokConfig(t *testing.T) {
	dec := yaml.NewDecoder(strings.NewReader(string(renderKwokConfig(10250))))
	var stages []string
	var options map[string]any
	for {
		var doc struct {
			Kind     string `yaml:"kind"`
			Metadata struct{ Name string }
			Options  map[string]any `yaml:"options"`
		}
		if err := dec.Decode(&doc); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatal(err)
		}
		switch doc.Kind {
		case "KwokConfiguration":
			options = doc.Options
		case "Stage":
			stages = append(stages, doc.Metadata.Name)
		default:
			t.Errorf("unexpected kind %q", doc.Kind)
		}
	}
	for _, k := range []string{"nodeLeaseParallelism", "podPlayStageParallelism", "nodePlayStageParallelism"} {
		if v, _ := options[k].(int); v <= 0 {
			t.Errorf("%s = %v: kwok refuses 0", k, options[k])
		}
	}
	// kwok serves pod logs on the port picked for this cluster, never a
	// fixed one (two clusters must not collide)
	if options["nodePort"] != 10250 || options["serverAddress"] != "127.0.0.1:10250" || options["enableDebuggingHandlers"] != true {
		t.Errorf("nodePort %v, serverAddress %v, enableDebuggingHandlers %v: want the rendered port and handlers on",
			options["nodePort"], options["serverAddress"], options["enableDebuggingHandlers"])
	}
	if strings.Contains(string(renderKwokConfig(10250)), "@KWOK_PORT@") {
		t.Error("a placeholder survived rendering")
	}
	want := []string{"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pod-delete", "pod-fail",
		"pod-fails-image-pull", "pod-fails-image-pull-backoff", "pod-fails-crash-loop", "pod-fails-readiness", "pod-fails-readiness-again",
		"pod-slow-probe-starts", "pod-slow-probe-ready", "pod-fails-config", "pod-stays-creating"}
	if !slices.Equal(stages, want) {
		t.Errorf("stages %v, want %v", stages, want)
	}
}

func TestNamespacePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"smoke":                    "smoke-",
		"TestApply/Server Side":    "testapply-server-side-",
		"123":                      "test-123-",
		"":                         "test-",
		"--x--":                    "x-",
		strings.Repeat("a", 80):    strings.Repeat("a", 40) + "-",
		"Ünïcode_and.dots":         "n-code-and-dots-",
		"trailing-dash-at-40-xxxx": "trailing-dash-at-40-xxxx-",
	} {
		got := namespacePrefix(in)
		if got != want {
			t.Errorf("namespacePrefix(%q) = %q, want %q", in, got, want)
		}
		if errs := validation.IsDNS1123Label(got + "abcde"); len(errs) > 0 {
			t.Errorf("namespacePrefix(%q) = %q: not a valid prefix: %v", in, got, errs)
		}
	}
}

func TestParsePIDs(t *testing.T) {
	procs, err := parsePIDs([]byte("etcd 100 5\n\nkube-apiserver 200 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 2 || procs[0].Name != "etcd" || procs[0].PID != 100 || procs[0].StartTime != 5 || procs[1].PID != 200 {
		t.Errorf("got %+v %+v", procs[0], procs[1])
	}
	for _, bad := range []string{"etcd 100", "etcd x 5", "etcd 0 5", "etcd 1 -1"} {
		if _, err := parsePIDs([]byte(bad)); err == nil {
			t.Errorf("parsePIDs(%q): no error", bad)
		}
	}
}

func TestFindBinDir(t *testing.T) {
	dir := t.TempDir()
	_, err := findBinDir(dir)
	if err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Fatalf("missing binaries: %v, want an error telling to run make testbin", err)
	}
	for _, b := range binaries() {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvTestbin, dir)
	if got, err := findBinDir(""); err != nil || got != dir {
		t.Fatalf("findBinDir via %s: %q, %v", EnvTestbin, got, err)
	}
}

func TestPrepareDirRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareDir(dir, io.Discard); err == nil {
		t.Fatal("prepareDir wiped a directory that is not a cluster directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatal(err)
	}
	// A cluster directory of a previous run is wiped.
	if err := os.Remove(filepath.Join(dir, "precious")); err != nil {
		t.Fatal(err)
	}
	if err := prepareDir(dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := prepareDir(dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "logs")); err == nil {
		t.Error("old logs left in a prepared directory")
	}
}
