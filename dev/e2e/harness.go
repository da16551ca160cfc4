// Package e2e runs the real plugin binaries, end to end. Binaries come from
// $KHOOK_BIN (a folder holding kubectl-khook and helm-khook, as `make build`
// leaves them in bin/) or are built once per test process into a temporary
// folder.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"khook.io/core/testing/testenv"
)

// Binaries names the two plugin executables.
type Binaries struct {
	Kubectl string // kubectl-khook
	Helm    string // helm-khook
}

var (
	buildOnce sync.Once
	built     Binaries
	buildErr  error
)

// Build returns the binaries under test, building them when $KHOOK_BIN is
// unset. tmp is where built binaries go; the first caller's tmp wins.
func Build(tmp string) (Binaries, error) {
	buildOnce.Do(func() {
		if dir := os.Getenv("KHOOK_BIN"); dir != "" {
			built = Binaries{Kubectl: filepath.Join(dir, "kubectl-khook"), Helm: filepath.Join(dir, "helm-khook")}
			for _, b := range []string{built.Kubectl, built.Helm} {
				if _, err := os.Stat(b); err != nil {
					buildErr = fmt.Errorf("KHOOK_BIN=%s: %w (run make build)", dir, err)
				}
			}
			return
		}
		root, err := testenv.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		built = Binaries{Kubectl: filepath.Join(tmp, "kubectl-khook"), Helm: filepath.Join(tmp, "helm-khook")}
		for _, b := range []struct{ module, out string }{{"kubectl-khook", built.Kubectl}, {"helm-khook", built.Helm}} {
			cmd := exec.Command("go", "build", "-trimpath", "-o", b.out, ".")
			cmd.Dir = filepath.Join(root, b.module)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %w\n%s", b.module, err, out)
				return
			}
		}
	})
	return built, buildErr
}

// Result is one finished run of a binary.
type Result struct {
	Stdout, Stderr string
	Code           int
	Elapsed        time.Duration
}

// Run runs bin with args, env (added to a minimal environment) and stdin,
// in dir, bounded by ctx.
func Run(ctx context.Context, dir, bin string, env []string, stdin string, args ...string) (Result, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}, env...)
	cmd.Stdin = bytes.NewBufferString(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	res := Result{Stdout: out.String(), Stderr: errOut.String(), Elapsed: time.Since(start)}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		res.Code = exitErr.ExitCode()
	case err != nil:
		return res, fmt.Errorf("run %s: %w", filepath.Base(bin), err)
	}
	return res, nil
}
