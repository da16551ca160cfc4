//go:build integration

package packaging

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKrewInstallHost is the krew path of `make test`, without the
// cross-platform release (`make test-dist` builds all six platforms and runs
// TestKrewManifest on them): it packs this machine's kubectl-khook archive
// from the working tree's bin/kubectl-khook exactly as `make dist` does,
// puts its real sha256 into the committed krew manifest's entry for this
// platform (as `make krew` would), validates the result as krew does,
// installs the archive as `kubectl krew install --manifest --archive` does
// and runs the plugin through the real kubectl.
func TestKrewInstallHost(t *testing.T) {
	root := repoRoot(t)
	binary, err := os.ReadFile(filepath.Join(root, "bin", KubectlPlugin))
	if err != nil {
		t.Fatalf("run make build first: %v", err)
	}
	p := hostPlatform(t)
	committed, err := ValidateKrewFile(filepath.Join(root, "krew", "khook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	version := committed.Spec.Version

	entries, err := Contents(root, KubectlPlugin, version, p, binary)
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := WriteArchive(&archive, p.Format(), entries, time.Unix(0, 0).UTC()); err != nil {
		t.Fatal(err)
	}

	data, err := KrewDataOf(committed)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(data.Platforms, func(d KrewPlatformData) bool { return d.OS == p.OS && d.Arch == p.Arch })
	if i < 0 {
		t.Fatalf("krew/khook.yaml has no platform %s", p)
	}
	host := &data.Platforms[i]
	if want := ArchiveName(KubectlPlugin, version, p); !strings.HasSuffix(host.URI, "/"+want) {
		t.Errorf("krew/khook.yaml: %s's uri %s, want one ending in %s", p, host.URI, want)
	}
	// the committed manifest moves exactly what this tree's archive carries
	if files := KrewFiles(entries); !slices.Equal(host.Files, files) {
		t.Errorf("krew/khook.yaml: %s's files %v, the archive carries %v (make krew-update at the next release)", p, host.Files, files)
	}
	host.SHA256 = SHA256(archive.Bytes())
	manifest, err := RenderKrew(readFile(t, filepath.Join(root, "krew", "khook.yaml.tmpl")), data)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "khook.yaml")
	if err := os.WriteFile(file, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ValidateKrewFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pl := m.Spec.Platforms[i]

	// a wrong sha256 is refused before anything is unpacked
	bad := pl
	bad.Sha256 = strings.Repeat("0", 64)
	if _, err := KrewInstall(t.TempDir(), m, bad, archive.Bytes()); err == nil {
		t.Fatal("KrewInstall accepted an archive whose sha256 differs from the manifest's")
	}

	krewRoot := t.TempDir()
	link, err := KrewInstall(krewRoot, m, pl, archive.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(link); err != nil || !Executable(fi.Mode()) {
		t.Fatalf("%s: %v, mode %v", link, err, fi)
	}
	// krew-index's validate-krew-manifest: a license file installed
	if err := CheckKrewLicense(krewRoot); err != nil {
		t.Fatal(err)
	}
	// the binary in bin/ says its own build's version (make build's git
	// describe), krew's store uses the manifest's
	binVersion := strings.TrimPrefix(strings.SplitN(run(t, nil, filepath.Join(root, "bin", KubectlPlugin), "version"), "\n", 2)[0], "kubectl khook ")
	kubectlRunsKrewPlugin(t, krewRoot, version, binVersion)
}
