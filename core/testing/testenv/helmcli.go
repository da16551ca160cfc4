package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// HelmCLI returns the helm CLI of version (v3.22.0, v4.3.1) from
// <repository root>/.cache/tools/helm-<version>/, building it there from
// the Go module proxy when missing, with the compile flags `make
// helm-tools` uses. The tests run it only to check compatibility from
// outside: khook itself never runs helm.
func HelmCLI(t testing.TB, version string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, ".cache", "tools", "helm-"+version)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	major := strings.SplitN(version, ".", 2)[0] // v3, v4
	pkg := "helm.sh/helm/" + major + "/cmd/helm@" + version
	t.Logf("building %s into %s (make helm-tools does this ahead)", pkg, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", "-ldflags", "-s -w", pkg)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s: %v\n%s", pkg, err, out)
	}
	return bin
}
