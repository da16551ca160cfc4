//go:build integration

package packaging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"khook.io/core/testing/testcluster"
	"khook.io/core/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// helmRun is one run of the helm CLI.
type helmRun struct {
	out, errOut string
	code        int
}

// helmEnv is a helm of its own: HOME, data, config, cache and plugins in
// home; KUBECONFIG points nowhere, so only flags reach the cluster.
func helmEnv(home string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		// helm 4 installs local plugins into $HELM_DATA_HOME/plugins
		// whatever HELM_PLUGINS says: keep the two the same
		"HELM_PLUGINS=" + filepath.Join(home, "data", "plugins"),
		"KUBECONFIG=" + filepath.Join(home, "no-kubeconfig"),
	}, extra...)
}

func helmDo(t *testing.T, helm string, env []string, args ...string) helmRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = env
	cmd.Dir = repoRoot(t)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := helmRun{out: out.String(), errOut: errOut.String()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return r
}

func helmOK(t *testing.T, helm string, env []string, args ...string) string {
	t.Helper()
	r := helmDo(t, helm, env, args...)
	if r.code != 0 {
		t.Fatalf("helm %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.out, r.errOut)
	}
	return r.out + r.errOut
}

// twoContexts writes a kubeconfig whose current context is unreachable and
// whose context "khook-e2e" is the test cluster's admin: a live plan proves
// --kube-context (and --kubeconfig) reached khook.
func twoContexts(t *testing.T, admin string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	if cur == nil {
		t.Fatalf("%s: no current context", admin)
	}
	e2eCtx := *cur
	cfg.Contexts["khook-e2e"] = &e2eCtx
	cfg.Clusters["unreachable"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.Contexts["unreachable"] = &clientcmdapi.Context{Cluster: "unreachable", AuthInfo: cur.AuthInfo}
	cfg.CurrentContext = "unreachable"
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestHelmPlugin installs the plugin from the working tree with helm 3 and
// helm 4 (each built from the module proxy) and runs helm khook against
// the test cluster through helm's global flags.
func TestHelmPlugin(t *testing.T) {
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "bin", "helm-khook")); err != nil {
		t.Fatalf("the working tree has no bin/helm-khook: run make build first (%v)", err)
	}
	c := testcluster.Get(t)
	kubeconfig := twoContexts(t, c.Kubeconfig)
	ns := c.NewNamespace(t, "helm-plugin")
	quickstart := filepath.Join(root, "examples", "quickstart.yaml")
	probe := filepath.Join(root, "dev", "packaging", "testdata", "namespace-probe.yaml")

	for _, version := range []string{helm3Version, helm4Version} {
		t.Run("helm-"+version, func(t *testing.T) {
			helm := testenv.HelmCLI(t, version)
			home := t.TempDir()
			env := helmEnv(home)
			if got := helmOK(t, helm, env, "version", "--template", "{{.Version}}"); !strings.HasPrefix(got, strings.SplitN(version, ".", 2)[0]) {
				t.Fatalf("helm version %q, want %s", got, version)
			}

			// install from the working tree: the hook keeps bin/helm-khook
			out := helmOK(t, helm, env, "plugin", "install", root)
			for _, want := range []string{"helm khook: using " + filepath.Join(home, "data", "plugins"), "(not downloaded)", "Installed plugin: khook"} {
				if !strings.Contains(out, want) {
					t.Errorf("helm plugin install:\n%s\nwant %q", out, want)
				}
			}
			if out := helmOK(t, helm, env, "plugin", "list"); !regexp.MustCompile(`(?m)^khook\s+0\.1\.0`).MatchString(out) {
				t.Errorf("helm plugin list:\n%s", out)
			}
			if out := helmOK(t, helm, env, "help"); !strings.Contains(out, "khook") {
				t.Errorf("helm help does not list khook:\n%s", out)
			}
			if out := helmOK(t, helm, env, "khook", "version"); !strings.HasPrefix(out, "helm khook ") {
				t.Errorf("helm khook version:\n%s", out)
			}

			if out := helmOK(t, helm, env, "khook", "validate", "-f", quickstart); !strings.Contains(out, "valid") {
				t.Errorf("helm khook validate:\n%s", out)
			}
			// khook's exit codes pass through helm
			bad := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(bad, []byte("apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: bad}\nsteps:\n  - name: x\n    nope: {}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if r := helmDo(t, helm, env, "khook", "validate", "-f", bad); r.code != 2 {
				t.Errorf("helm khook validate of an invalid spec: exit %d, want khook's 2\n%s%s", r.code, r.out, r.errOut)
			}

			// the kubeconfig's current context is unreachable: a cluster was
			// configured but cannot be used, so plan fails (never silently
			// offline), naming the server; --offline plans without it
			if r := helmDo(t, helm, env, "khook", "plan", "-f", quickstart, "--kubeconfig", kubeconfig); r.code != 1 || !strings.Contains(r.errOut, "127.0.0.1:1") || strings.Contains(r.out, "Plan for") {
				t.Errorf("plan with the unreachable current context: exit %d, want 1 naming 127.0.0.1:1 and no plan\n%s%s", r.code, r.out, r.errOut)
			}
			out = helmOK(t, helm, env, "khook", "plan", "-f", quickstart, "--kubeconfig", kubeconfig, "--offline")
			if !strings.Contains(out, "(offline)") {
				t.Errorf("plan --offline with the unreachable current context:\n%s", out)
			}
			// --kube-context picks the test cluster: live
			out = helmOK(t, helm, env, "khook", "plan", "-f", quickstart, "--kube-context", "khook-e2e", "--kubeconfig", kubeconfig)
			if !strings.Contains(out, "Plan for quickstart (live)") {
				t.Errorf("helm khook plan --kube-context khook-e2e: not live:\n%s", out)
			}
			// flags before the plugin name, = forms, and --debug
			out = helmOK(t, helm, env, "--kube-context=khook-e2e", "--kubeconfig="+kubeconfig, "--debug", "-n", ns, "khook", "plan", "-f", quickstart)
			if !strings.Contains(out, "(live)") {
				t.Errorf("helm --kube-context=... --debug -n %s khook plan: not live:\n%s", ns, out)
			}
			// --debug (HELM_DEBUG) logs every request, as kubectl khook -v=6
			if !strings.Contains(out, `"Response" verb="GET" url="https://`) {
				t.Errorf("helm --debug khook plan: no client-go request log:\n%s", out)
			}
			out = helmOK(t, helm, env, "--kube-context=khook-e2e", "--kubeconfig="+kubeconfig, "khook", "plan", "-f", quickstart)
			if strings.Contains(out, `"Response" verb=`) {
				t.Errorf("helm khook plan without --debug logs requests:\n%s", out)
			}

			// -n reaches khook: the probe's ConfigMap names no namespace
			for _, want := range []string{ns, "default"} {
				args := []string{"khook", "plan", "-f", probe, "-o", "json", "--kube-context", "khook-e2e", "--kubeconfig", kubeconfig}
				if want != "default" {
					args = append(args, "-n", want)
				}
				var p struct {
					Mode  string `json:"mode"`
					Steps []struct {
						Details []string `json:"details"`
					} `json:"steps"`
				}
				r := helmDo(t, helm, env, args...)
				if err := json.Unmarshal([]byte(r.out), &p); err != nil || r.code != 0 {
					t.Fatalf("helm %s: exit %d, %v\n%s%s", strings.Join(args, " "), r.code, err, r.out, r.errOut)
				}
				if p.Mode != "live" || len(p.Steps) != 1 || strings.Join(p.Steps[0].Details, "") != "ConfigMap/khook-namespace-probe in "+want+": create" {
					t.Errorf("helm %s: %+v, want the ConfigMap in %s", strings.Join(args, " "), p, want)
				}
			}

			// helm's completion runs the plugin's plugin.complete
			if out := helmOK(t, helm, env, "__complete", "khook", "pl"); !regexp.MustCompile(`(?m)^plan`).MatchString(out) {
				t.Errorf("helm __complete khook pl:\n%s", out)
			}

			helmOK(t, helm, env, "plugin", "uninstall", "khook")
			if _, err := os.Stat(filepath.Join(root, "bin", "helm-khook")); err != nil {
				t.Errorf("uninstall removed the working tree's binary: %v", err)
			}
		})
	}
}

// TestHelmPluginFromRelease installs the helm plugin the other two ways,
// offline, with helm 3 and helm 4: from an unpacked release archive (the
// binary inside it), and from a plugin folder without a binary, where the
// install hook downloads the release archive from a release server (one
// this test serves, as KHOOK_RELEASE_URL) and checks it against
// checksums.txt.
func TestHelmPluginFromRelease(t *testing.T) {
	root := repoRoot(t)
	binary, err := os.ReadFile(filepath.Join(root, "bin", "helm-khook"))
	if err != nil {
		t.Fatalf("run make build first: %v", err)
	}
	v, err := PluginVersion(readFile(t, filepath.Join(root, PluginYAML)))
	if err != nil {
		t.Fatal(err)
	}
	rel := newFakeRelease(t, root, "v"+v, binary)
	p := hostPlatform(t)

	for _, version := range []string{helm3Version, helm4Version} {
		t.Run("helm-"+version, func(t *testing.T) {
			helm := testenv.HelmCLI(t, version)

			t.Run("unpacked archive", func(t *testing.T) {
				home := t.TempDir()
				env := helmEnv(home, "KHOOK_RELEASE_URL=http://127.0.0.1:1/offline")
				dir := filepath.Join(t.TempDir(), "khook")
				entries, err := ReadArchive(rel.files["/v"+v+"/"+ArchiveName(HelmPlugin, "v"+v, p)])
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					dst := filepath.Join(dir, filepath.FromSlash(e.Name))
					if e.IsDir() {
						err = os.MkdirAll(dst, e.Mode)
					} else {
						err = os.WriteFile(dst, e.Data, e.Mode)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if out := helmOK(t, helm, env, "plugin", "install", dir); !strings.Contains(out, "(not downloaded)") {
					t.Errorf("helm plugin install:\n%s", out)
				}
				if out := helmOK(t, helm, env, "khook", "version"); !strings.HasPrefix(out, "helm khook ") {
					t.Errorf("helm khook version:\n%s", out)
				}
			})

			t.Run("download", func(t *testing.T) {
				home := t.TempDir()
				env := helmEnv(home, "KHOOK_RELEASE_URL="+rel.URL)
				dir := pluginDir(t, root, v) // plugin.yaml and the script, no bin/
				before := rel.requests.Load()
				out := helmOK(t, helm, env, "plugin", "install", dir)
				if !strings.Contains(out, "helm khook: installed") || rel.requests.Load() != before+2 {
					t.Errorf("helm plugin install did not download the archive and checksums.txt:\n%s", out)
				}
				if out := helmOK(t, helm, env, "khook", "version"); !strings.HasPrefix(out, "helm khook ") {
					t.Errorf("helm khook version:\n%s", out)
				}
			})
		})
	}
}
