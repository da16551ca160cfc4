package dev

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"khook.io/core/internal/dev/e2e"
)

// TestLayout: core/internal says which code is which. The three
// entrypoints link no package under core/internal/dev (the project's
// tooling), and every other package of core/internal is a runtime helper
// they link.
func TestLayout(t *testing.T) {
	root, err := e2e.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "./kubectl-khook", "./helm-khook", "./terraform-provider-khook")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	linked := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		linked[p] = true
		if strings.HasPrefix(p, "khook.io/core/internal/dev") {
			t.Errorf("an entrypoint links %s: tooling under core/internal/dev must stay out of the binaries", p)
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, "core", "internal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "dev" {
			continue
		}
		if p := "khook.io/core/internal/" + e.Name(); !linked[p] {
			t.Errorf("%s is in core/internal but no entrypoint links it: a runtime helper is one they link; tooling goes under core/internal/dev", p)
		}
	}
}
