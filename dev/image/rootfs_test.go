package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"khook.io/core/testing/testenv"
	"khook.io/dev/e2e"
)

// hostBinary is the kubectl-khook `make build` left in bin/ ($KHOOK_BIN),
// or one built for this test process.
func hostBinary(t *testing.T) []byte {
	t.Helper()
	bins, err := e2e.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bins.Kubectl)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// testMeta is a build's metadata with the repository's LICENSE.
func testMeta(t *testing.T) Meta {
	return Meta{
		Version:  "v0.1.0-dev",
		Revision: "0123456789ab",
		Created:  time.Date(2026, 11, 22, 5, 10, 48, 0, time.FixedZone("x", 3600)),
		Source:   "https://github.com/khook-io/khook",
		Licenses: "Apache-2.0",
		License:  readFile(t, filepath.Join(repoRoot(t), "LICENSE")),
	}
}

// layerHeaders reads the single layer of img: its tar headers and the
// content of its regular files.
func layerHeaders(t *testing.T, img v1.Image) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var hdrs []*tar.Header
	data := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			data[h.Name] = b
		}
	}
}

// buildTool builds khook-image (without the race detector, which makes
// gzip ten times slower) into a temporary folder.
func buildTool(t *testing.T) string {
	t.Helper()
	tool := filepath.Join(t.TempDir(), "khook-image")
	cmd := exec.Command("go", "build", "-trimpath", "-o", tool, "./dev/cmd/khook-image")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build khook-image: %v\n%s", err, out)
	}
	return tool
}

// buildImage runs khook-image as make image does, for this machine's
// platform and binary, into out. It returns what it printed.
func buildImage(t *testing.T, tool string, m Meta, out, binary string) string {
	t.Helper()
	license := filepath.Join(t.TempDir(), "LICENSE")
	if err := os.WriteFile(license, m.License, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := e2e.Run(t.Context(), t.TempDir(), tool, nil, "",
		"-out", out, "-version", m.Version, "-revision", m.Revision, "-date", m.Created.Format(time.RFC3339),
		"-license", license, "-licenses", m.Licenses, "-repo", "ghcr.io/khook-io/khook", "-source", m.Source,
		"-binary", "linux/"+runtime.GOARCH+"="+binary)
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 0 {
		t.Fatalf("khook-image: exit %d: %s", res.Code, res.Stderr)
	}
	return res.Stdout
}

// builtImage reads what khook-image wrote into out: index.json, the image
// index it names, and the index's first image.
func builtImage(t *testing.T, out string) (top, index *v1.IndexManifest, img v1.Image) {
	t.Helper()
	lp, err := layout.ImageIndexFromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	if top, err = lp.IndexManifest(); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) == 0 {
		t.Fatalf("%s: an empty index.json", out)
	}
	idx, err := lp.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if index, err = idx.IndexManifest(); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) == 0 {
		t.Fatalf("%s: an empty image index", out)
	}
	if img, err = idx.Image(index.Manifests[0].Digest); err != nil {
		t.Fatal(err)
	}
	return top, index, img
}

// unpack writes img's layer into dir as a container runtime would: modes,
// symlinks, and (as root) owners. It returns the layer's headers.
func unpack(t *testing.T, img v1.Image, dir string) []*tar.Header {
	t.Helper()
	// a runtime's root directory: 0755, root's
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hdrs, data := layerHeaders(t, img)
	for _, h := range hdrs {
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(dst, dir+string(filepath.Separator)) {
			t.Fatalf("layer member %q escapes the root", h.Name)
		}
		mode := fs.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		var err error
		switch h.Typeflag {
		case tar.TypeDir:
			if err = os.MkdirAll(dst, 0o755); err == nil {
				err = os.Chmod(dst, mode)
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, dst)
		case tar.TypeReg:
			err = os.WriteFile(dst, data[h.Name], mode)
		default:
			t.Fatalf("%s: unexpected member type %q", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return hdrs
}

// needRoot skips a check that runs the unpacked image the way a container
// runtime does (chroot, then the image's user): only root can.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running the unpacked image (chroot, setuid to its user) needs root")
	}
}

// runImage runs the image unpacked in rootfs as a container runtime would,
// without the namespaces: chrooted into rootfs, as the config's user, in
// its working directory, with its environment plus env, its entrypoint
// followed by args. The test cannot rely on a container runtime (there is
// none on the machines that run make test).
func runImage(t *testing.T, rootfs string, cfg v1.Config, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	needRoot(t)
	if cfg.User != User {
		t.Fatalf("config user %q, want %q", cfg.User, User)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.Entrypoint[0], append(cfg.Entrypoint[1:], args...)...)
	cmd.Env = append(append([]string{}, cfg.Env...), env...)
	cmd.Dir = cfg.WorkingDir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     rootfs,
		Credential: &syscall.Credential{Uid: UID, Gid: GID, NoSetGroups: true},
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run %s in the image: %v", cfg.Entrypoint[0], err)
	}
	return out.String(), errOut.String(), code
}
