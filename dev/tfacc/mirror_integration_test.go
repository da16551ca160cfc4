//go:build integration

package tfacc

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"khook.io/core/testing/testenv"
	"khook.io/dev/packaging"
)

// TestProviderFromMirror: the provider's zip, packed from the built binary
// as `make dist` packs it (packaging.ProviderContents, registry file
// names), installs from a filesystem_mirror with the built tofu (no
// dev_overrides): init finds it, unpacks the binary named as Terraform
// wants, records its h1: checksum, and a plan runs it.
func TestProviderFromMirror(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tofu := tofuCLI(t, root)
	binary, err := os.ReadFile(filepath.Join(providerDir(t, root), "terraform-provider-khook"))
	if err != nil {
		t.Fatal(err)
	}
	const version = "v0.0.1-test"
	host, err := packaging.ParsePlatform(runtime.GOOS + "_" + runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := packaging.ProviderContents(root, version, host, binary)
	if err != nil {
		t.Fatal(err)
	}
	var zip bytes.Buffer
	if err := packaging.WriteArchive(&zip, packaging.Zip, entries, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	mirror := t.TempDir()
	dir := filepath.Join(mirror, "registry.opentofu.org", "khook-io", "khook")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, packaging.ProviderArchiveName(version, host)), zip.String())

	w := &workspace{t: t, tofu: tofu, dir: t.TempDir()}
	rc := filepath.Join(t.TempDir(), "tofu.rc")
	write(t, rc, `provider_installation {
  filesystem_mirror {
    path    = "`+mirror+`"
    include = ["khook-io/khook"]
  }
  direct { exclude = ["khook-io/khook"] }
}
`)
	w.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE=" + rc, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "NO_COLOR=1"}
	write(t, filepath.Join(w.dir, "main.tf"), `terraform {
  required_providers {
    khook = { source = "khook-io/khook", version = "0.0.1-test" }
  }
}
resource "khook_spec" "x" {
  spec = <<-EOT
    apiVersion: khook.io/v1
    kind: Khook
    metadata:
      name: mirror
    steps:
      - name: config
        apply:
          namespace: default
          manifests:
            - inline: |
                apiVersion: v1
                kind: ConfigMap
                metadata:
                  name: mirror
  EOT
}
`)
	w.must("init")
	lock, err := os.ReadFile(filepath.Join(w.dir, ".terraform.lock.hcl"))
	if err != nil || !strings.Contains(string(lock), `version     = "0.0.1-test"`) || !strings.Contains(string(lock), `"h1:`) {
		t.Fatalf(".terraform.lock.hcl (%v):\n%s\nwant version 0.0.1-test with an h1: checksum", err, lock)
	}
	installed := filepath.Join(w.dir, ".terraform", "providers", "registry.opentofu.org", "khook-io", "khook", "0.0.1-test", host.ID(), packaging.ProviderBinaryName(version, host))
	if fi, err := os.Stat(installed); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("installed provider %s: %v", installed, err)
	}
	// the installed provider plans (offline: a create)
	if out := w.must("plan"); !strings.Contains(out, "khook_spec.x will be created") {
		t.Errorf("plan with the mirrored provider:\n%s", out)
	}
}
