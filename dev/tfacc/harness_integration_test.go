//go:build integration

package tfacc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"khook.io/core/testing/testenv"
)

// tofuVersion is the OpenTofu the tests drive (hack/tofu.mk's).
const tofuVersion = "v1.12.6"

// tofuCLI returns the built tofu, building it (hack/build-tofu.sh) when
// missing.
func tofuCLI(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(root, ".cache", "tools", "tofu-"+tofuVersion, "tofu")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("building OpenTofu %s into %s (make tofu does this ahead)", tofuVersion, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-tofu.sh"), tofuVersion, bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build tofu: %v\n%s", err, out)
	}
	return bin
}

// providerDir is the folder holding terraform-provider-khook: $KHOOK_BIN
// (make build), else a fresh build.
func providerDir(t *testing.T, root string) string {
	t.Helper()
	if dir := os.Getenv("KHOOK_BIN"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "terraform-provider-khook")); err != nil {
			t.Fatalf("KHOOK_BIN=%s: %v (run make build)", dir, err)
		}
		return dir
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "terraform-provider-khook"), ".")
	cmd.Dir = filepath.Join(root, "terraform-provider-khook")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the provider: %v\n%s", err, out)
	}
	return dir
}

// workspace is a Terraform working directory driven by tofu.
type workspace struct {
	t    *testing.T
	tofu string
	dir  string
	env  []string
	// outputs keeps every output and log of every command, for the
	// secret checks.
	outputs []string
}

func newWorkspace(t *testing.T) *workspace {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tofu := tofuCLI(t, root)
	bins := providerDir(t, root)
	dir := t.TempDir()
	rc := filepath.Join(dir, "tofu.rc")
	write(t, rc, `provider_installation {
  dev_overrides {
    "khook-io/khook" = "`+bins+`"
  }
  direct {}
}
`)
	home := t.TempDir()
	return &workspace{t: t, tofu: tofu, dir: dir, env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"TF_CLI_CONFIG_FILE=" + rc, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "NO_COLOR=1",
		"TF_LOG=trace", "TF_LOG_PATH=" + filepath.Join(dir, "trace.log"),
		// the provider must not read variables from its environment
		"KHOOK_SECRET_LEAK=from-the-environment-not-used",
	}}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// run runs tofu with args; it returns the combined output and the exit
// code.
func (w *workspace) run(args ...string) (string, int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n := 1 // -no-color goes after the (sub)command
	if args[0] == "state" {
		n = 2
	}
	cmd := exec.CommandContext(ctx, w.tofu, append(args[:n:n], append([]string{"-no-color"}, args[n:]...)...)...)
	cmd.Dir = w.dir
	cmd.Env = w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		w.t.Fatalf("tofu %s: %v", strings.Join(args, " "), err)
	}
	w.outputs = append(w.outputs, "$ tofu "+strings.Join(args, " ")+"\n"+out.String())
	return out.String(), code
}

// must runs tofu and fails the test unless it exits 0.
func (w *workspace) must(args ...string) string {
	w.t.Helper()
	out, code := w.run(args...)
	if code != 0 {
		w.t.Fatalf("tofu %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// files is every file of the working directory (state, backups, plans,
// the trace log) with its content.
func (w *workspace) files() map[string]string {
	w.t.Helper()
	out := map[string]string{}
	_ = filepath.WalkDir(w.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil {
			out[p] = string(b)
		}
		return nil
	})
	return out
}

// assertNoSecret fails when secret appears in any output, log or file.
func (w *workspace) assertNoSecret(secret string) {
	w.t.Helper()
	for _, o := range w.outputs {
		if strings.Contains(o, secret) {
			w.t.Errorf("the secret appears in an output:\n%s", o)
		}
	}
	for p, c := range w.files() {
		if strings.Contains(c, secret) {
			w.t.Errorf("the secret appears in %s", p)
		}
	}
}
