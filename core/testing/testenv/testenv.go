// Package testenv locates what a test runs with outside Go: the
// repository it runs in (the folder holding go.work, whichever module the
// test belongs to: core's tests and the dev module's alike) and the CLIs
// the tests build into the repository's git-ignored .cache.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// RepoRoot walks up from the working directory to the folder holding
// go.work, the repository root.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work in %s or above", wd)
		}
	}
}
