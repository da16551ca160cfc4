package packaging

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"khook.io/dev/e2e"
)

// The helm CLIs the plugin tests run (hack/dist.mk builds the same).
const (
	helm3Version = "v3.22.0"
	helm4Version = "v4.3.1"
)

func hostPlatform(t *testing.T) Platform {
	t.Helper()
	p, err := ParsePlatform(runtime.GOOS + "/" + runtime.GOARCH)
	if err != nil {
		t.Skipf("this machine (%s/%s) is not a platform khook is released for: %v", runtime.GOOS, runtime.GOARCH, err)
	}
	return p
}

// fakeRelease serves a release of version (with its v) the way the
// project's release URL does: <base>/<version>/<archive> and
// <base>/<version>/checksums.txt, with a helm-khook archive for this
// machine whose binary is binary. It counts the requests.
type fakeRelease struct {
	*httptest.Server
	requests atomic.Int32
	files    map[string][]byte
}

func newFakeRelease(t *testing.T, root, version string, binary []byte) *fakeRelease {
	t.Helper()
	p := hostPlatform(t)
	entries, err := Contents(root, HelmPlugin, version, p, binary)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteArchive(&buf, p.Format(), entries, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	name := ArchiveName(HelmPlugin, version, p)
	var sums bytes.Buffer
	if err := WriteChecksums(&sums, map[string]string{name: SHA256(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	r := &fakeRelease{files: map[string][]byte{
		"/" + version + "/" + name:       buf.Bytes(),
		"/" + version + "/checksums.txt": sums.Bytes(),
	}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		data, ok := r.files[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(r.Close)
	return r
}

// pluginDir is a plugin folder like `helm plugin install` leaves: plugin.yaml
// (with version) and the install script.
func pluginDir(t *testing.T, root, version string) string {
	t.Helper()
	dir := t.TempDir()
	manifest, err := SetPluginVersion(readFile(t, filepath.Join(root, PluginYAML)), version)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, PluginYAML), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, InstallScript), readFile(t, filepath.Join(root, InstallScript)), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runHook(t *testing.T, dir, releaseURL string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// as helm runs it: sh <script>, HELM_PLUGIN_DIR set
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(dir, InstallScript))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HELM_PLUGIN_DIR=" + dir, "KHOOK_RELEASE_URL=" + releaseURL}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestInstallHook runs scripts/install-plugin.sh through its paths, with a
// release served from this process (the test machine is offline).
func TestInstallHook(t *testing.T) {
	root := repoRoot(t)
	fake := []byte("#!/bin/sh\necho helm-khook from the release\n")
	bin := func(dir string) string { return filepath.Join(dir, "bin", "helm-khook") }

	t.Run("keeps a binary it did not download", func(t *testing.T) {
		rel := newFakeRelease(t, root, "v0.1.0", fake)
		dir := pluginDir(t, root, "0.1.0")
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin(dir), []byte("#!/bin/sh\necho built here\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := runHook(t, dir, rel.URL)
		if err != nil || !strings.Contains(out, "(not downloaded)") {
			t.Fatalf("%v\n%s", err, out)
		}
		if n := rel.requests.Load(); n != 0 {
			t.Errorf("%d downloads, want none", n)
		}
		if got := string(readFile(t, bin(dir))); !strings.Contains(got, "built here") {
			t.Errorf("the binary was replaced: %q", got)
		}
	})

	t.Run("downloads, checks and updates", func(t *testing.T) {
		rel := newFakeRelease(t, root, "v0.1.0", fake)
		dir := pluginDir(t, root, "0.1.0")
		out, err := runHook(t, dir, rel.URL)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if fi, err := os.Stat(bin(dir)); err != nil || !Executable(fi.Mode()) || !bytes.Equal(readFile(t, bin(dir)), fake) {
			t.Fatalf("bin/helm-khook not installed from the release (%v)\n%s", err, out)
		}
		if got := strings.TrimSpace(string(readFile(t, filepath.Join(dir, "bin", ".downloaded-version")))); got != "v0.1.0" {
			t.Errorf("marker %q", got)
		}
		// again: nothing to do
		before := rel.requests.Load()
		if out, err := runHook(t, dir, rel.URL); err != nil || !strings.Contains(out, "using") || rel.requests.Load() != before {
			t.Errorf("second run downloaded again (%v)\n%s", err, out)
		}
		// helm plugin update to a plugin.yaml of another release
		rel2 := newFakeRelease(t, root, "v0.2.0", []byte("#!/bin/sh\necho v0.2.0\n"))
		manifest, err := SetPluginVersion(readFile(t, filepath.Join(dir, PluginYAML)), "0.2.0")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, PluginYAML), manifest, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := runHook(t, dir, rel2.URL); err != nil || !strings.Contains(string(readFile(t, bin(dir))), "v0.2.0") {
			t.Errorf("update did not fetch v0.2.0 (%v)\n%s", err, out)
		}
	})

	t.Run("refuses a bad checksum", func(t *testing.T) {
		rel := newFakeRelease(t, root, "v0.1.0", fake)
		rel.files["/v0.1.0/checksums.txt"] = regexp.MustCompile(`^[0-9a-f]{8}`).ReplaceAll(rel.files["/v0.1.0/checksums.txt"], []byte("00000000"))
		dir := pluginDir(t, root, "0.1.0")
		out, err := runHook(t, dir, rel.URL)
		if err == nil || !strings.Contains(out, "sha256") {
			t.Fatalf("want a sha256 failure, got %v\n%s", err, out)
		}
		if _, err := os.Stat(bin(dir)); err == nil {
			t.Error("a binary was installed anyway")
		}
	})

	t.Run("offline", func(t *testing.T) {
		dir := pluginDir(t, root, "0.1.0")
		out, err := runHook(t, dir, "http://127.0.0.1:1/releases")
		if err == nil || !strings.Contains(out, "make build") {
			t.Fatalf("want a failure that says what to do, got %v\n%s", err, out)
		}
	})
}

// binaries are the plugin binaries under test (bin/ with KHOOK_BIN, as
// make test-unit sets it, else built once).
func binaries(t *testing.T) e2e.Binaries {
	t.Helper()
	b, err := e2e.Build(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// TestCompletion: `completion SHELL` of both plugins, a bash completion
// carried out for real, and the two plugin-manager conventions: kubectl's
// kubectl_complete-khook and helm's plugin.complete, both speaking cobra's
// __complete protocol.
func TestCompletion(t *testing.T) {
	root := repoRoot(t)
	b := binaries(t)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for _, bin := range []string{b.Kubectl, b.Helm} {
		for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
			t.Run(filepath.Base(bin)+"/"+shell, func(t *testing.T) {
				script := run(t, env, bin, "completion", shell)
				if len(script) < 1000 {
					t.Fatalf("completion %s: %d bytes", shell, len(script))
				}
				f := filepath.Join(t.TempDir(), "completion."+shell)
				if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
					t.Fatal(err)
				}
				check := map[string][]string{"bash": {"bash", "-n", f}, "zsh": {"zsh", "-n", f}, "fish": {"fish", "--no-execute", f}}[shell]
				if check == nil {
					return // no PowerShell here
				}
				if _, err := exec.LookPath(check[0]); err != nil {
					t.Skipf("%s is not installed: syntax not checked", check[0])
				}
				run(t, env, check[0], check[1:]...)
			})
		}
		t.Run(filepath.Base(bin)+"/bash completes", func(t *testing.T) {
			// source the script and run the function it registered, as
			// bash does on <TAB> after `<bin> pl`
			script := run(t, env, bin, "completion", "bash")
			m := regexp.MustCompile(`complete -o default -F (\S+) `).FindStringSubmatch(script)
			if m == nil {
				t.Fatal("the bash script registers no completion function")
			}
			f := filepath.Join(t.TempDir(), "completion.bash")
			if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			// cobra's bash script needs the bash-completion package; a
			// stand-in for its one function when it is not installed
			lib := `_get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }`
			if _, err := os.Stat("/usr/share/bash-completion/bash_completion"); err == nil {
				lib = "source /usr/share/bash-completion/bash_completion"
			}
			out := run(t, env, "bash", "-c", lib+`; source "$1"; COMP_WORDS=("$2" pl); COMP_CWORD=1; COMP_LINE="$2 pl"; COMP_POINT=${#COMP_LINE}; `+m[1]+`; printf '%s\n' "${COMPREPLY[@]}"`, "bash", f, bin)
			if !regexp.MustCompile(`(?m)^plan`).MatchString(out) {
				t.Errorf("bash completed `pl` to %q, want plan", out)
			}
		})
	}

	t.Run("helm plugin.complete", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(b.Helm, filepath.Join(dir, "bin", "helm-khook")); err != nil {
			t.Fatal(err)
		}
		// helm runs $HELM_PLUGIN_DIR/plugin.complete <words...> <toComplete>
		out := run(t, append(env, "HELM_PLUGIN_DIR="+dir), filepath.Join(root, PluginComplete), "pl")
		if !regexp.MustCompile(`(?m)^plan`).MatchString(out) || !regexp.MustCompile(`(?m)^:\d+$`).MatchString(out) {
			t.Errorf("plugin.complete pl: %q, want plan and a :directive line", out)
		}
	})

	t.Run("kubectl_complete-khook through kubectl", func(t *testing.T) {
		kubectl := kubectl(t)
		if kubectl == "" {
			// make test builds one (make testbin) first; TestKrewInstallHost
			// runs this path again and requires it
			t.Skip("no kubectl (make test-unit before make testbin): make test builds one first")
		}
		dir := t.TempDir()
		if err := os.Symlink(b.Kubectl, filepath.Join(dir, KubectlPlugin)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(root, KubectlComplete), filepath.Join(dir, KubectlCompletion)); err != nil {
			t.Fatal(err)
		}
		// PATH: the plugin, its completion and sh, nothing else
		penv := []string{"PATH=" + dir + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}
		out := run(t, penv, kubectl, "__complete", "khook", "pl")
		if !regexp.MustCompile(`(?m)^plan`).MatchString(out) {
			t.Errorf("kubectl __complete khook pl: %q, want plan", out)
		}
		out = run(t, penv, kubectl, "__complete", "khook", "plan", "--out")
		if !strings.Contains(out, "--output") {
			t.Errorf("kubectl __complete khook plan --out: %q, want --output", out)
		}
	})
}
