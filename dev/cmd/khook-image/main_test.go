package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestRunFlags(t *testing.T) {
	err := run(nil, new(bytes.Buffer))
	for _, want := range []string{"-out is required", "-version is required", "-date is required", "-license is required", "-repo is required", "-binary is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no flags: %v, want %q", err, want)
		}
	}
	base := []string{"-out", t.TempDir(), "-version", "v0.1.0", "-date", "2026-11-22T05:10:48Z", "-license", "main.go", "-repo", "ghcr.io/khook-io/khook"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-binary", "linux/amd64"}, "want linux/<arch>=<path>"},
		{[]string{"-binary", "darwin/arm64=main.go"}, "want linux/<arch>"},
		{[]string{"-binary", "linux/amd64=main.go", "-date", "yesterday"}, "-date"},
		{[]string{"-binary", "linux/amd64=main.go", "-repo", "Not A Repo"}, "-repo and -version"},
		{[]string{"-binary", "linux/amd64=main.go", "-binary", "linux_amd64=main.go"}, "given twice"},
	} {
		if err := run(append(append([]string{}, base...), c.args...), new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestRunWritesBoth: the layout and one tarball per platform, named by the
// version; a tarball of an earlier build goes.
func TestRunWritesBoth(t *testing.T) {
	out := t.TempDir()
	stale := filepath.Join(out, "khook_v0.0.9_linux_amd64.tar")
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "kubectl-khook")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	var printed bytes.Buffer
	err := run([]string{"-out", out, "-version", "v0.1.0", "-date", "2026-11-22T05:10:48Z", "-license", "main.go",
		"-repo", "ghcr.io/khook-io/khook", "-binary", "linux/amd64=" + bin, "-binary", "linux_arm64=" + bin}, &printed)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"oci/index.json", "oci/oci-layout", "khook_v0.1.0_linux_amd64.tar", "khook_v0.1.0_linux_arm64.tar"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s of an earlier build is still there (%v)", stale, err)
	}
	if n := len(regexp.MustCompile(`(?m)^sha256:[0-9a-f]{64}  `).FindAllString(printed.String(), -1)); n != 3 {
		t.Errorf("printed %d digests, want 3 (the index, two images):\n%s", n, printed.String())
	}
	if !strings.Contains(printed.String(), "image index of linux/amd64, linux/arm64") {
		t.Errorf("printed:\n%s", printed.String())
	}
}
