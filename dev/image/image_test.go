package image

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"khook.io/dev/e2e"
)

func TestParsePlatform(t *testing.T) {
	for in, want := range map[string]string{"linux/amd64": "linux/amd64", "linux_arm64": "linux/arm64"} {
		p, err := ParsePlatform(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePlatform(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"darwin/arm64", "linux", "linux/", "amd64", "linux/arm/v7/x"} {
		if _, err := ParsePlatform(in); err == nil {
			t.Errorf("ParsePlatform(%q) passed", in)
		}
	}
}

// TestLayer: what the layer holds, with which owners and modes: one
// executable (no shell, nothing else to run), a nonroot user that owns its
// home, CA certificates, the license; sorted, every directory before its
// contents, every mtime the build date, no owner names.
func TestLayer(t *testing.T) {
	m := testMeta(t)
	files, err := Files(m, []byte("\x7fELF binary"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := LayerTar(files, m.created())
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	var names []string
	hdrs := map[string]*tar.Header{}
	data := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		hdrs[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			b := new(bytes.Buffer)
			if _, err := b.ReadFrom(tr); err != nil {
				t.Fatal(err)
			}
			data[h.Name] = b.Bytes()
		}
		if !h.ModTime.Equal(m.created()) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v uname %q gname %q, want %v and no names", h.Name, h.ModTime, h.Uname, h.Gname, m.created())
		}
		if strings.HasPrefix(h.Name, "/") || strings.Contains(h.Name, "..") {
			t.Errorf("%s: not a clean relative name", h.Name)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("members not sorted: %q", names)
	}
	for i, n := range names {
		for dir := filepath.Dir(strings.TrimSuffix(n, "/")); dir != "."; dir = filepath.Dir(dir) {
			if j := slices.Index(names, dir+"/"); j < 0 || j > i {
				t.Errorf("%s: its directory %s/ is not before it", n, dir)
			}
		}
	}

	bin := strings.TrimPrefix(Binary, "/")
	var executables []string
	for n, h := range hdrs {
		base := filepath.Base(strings.TrimSuffix(n, "/"))
		if slices.Contains([]string{"sh", "bash", "ash", "dash", "busybox", "env"}, base) {
			t.Errorf("%s: a shell or interpreter in the image", n)
		}
		if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 {
			executables = append(executables, n)
		}
		if h.Mode&0o6000 != 0 {
			t.Errorf("%s: setuid/setgid bit (mode %o)", n, h.Mode)
		}
		wantUID := 0
		if n == strings.TrimPrefix(Home, "/")+"/" {
			wantUID = UID
		}
		if h.Uid != wantUID || h.Gid != wantUID {
			t.Errorf("%s: owner %d:%d, want %d:%d", n, h.Uid, h.Gid, wantUID, wantUID)
		}
	}
	if !slices.Equal(executables, []string{bin}) {
		t.Errorf("executables %q, want only %s", executables, bin)
	}
	if h := hdrs[bin]; h == nil || h.Mode != 0o755 || !bytes.Equal(data[bin], []byte("\x7fELF binary")) {
		t.Errorf("%s: %+v, want the binary, mode 0755", bin, h)
	}
	if h := hdrs[strings.TrimPrefix(Alias, "/")]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "kubectl-khook" {
		t.Errorf("%s: %+v, want a symlink to kubectl-khook", Alias, h)
	}
	if h := hdrs[strings.TrimPrefix(Home, "/")+"/"]; h == nil || h.Mode != 0o700 {
		t.Errorf("%s: %+v, want a directory 0700 of the user", Home, h)
	}
	if h := hdrs["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v, want mode 1777", h)
	}
	if !strings.Contains(string(data["etc/passwd"]), "nonroot:x:65532:65532:nonroot:/home/nonroot:") ||
		!strings.Contains(string(data["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("passwd %q group %q: want the nonroot user 65532 with its home", data["etc/passwd"], data["etc/group"])
	}
	if !bytes.Equal(data[strings.TrimPrefix(LicenseFile, "/")], m.License) {
		t.Errorf("%s is not the LICENSE", LicenseFile)
	}
	// the CA bundle parses as Go's system roots would read it
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[strings.TrimPrefix(CABundle, "/")]) {
		t.Fatal("no certificate in the CA bundle")
	}
	n := 0
	for rest := data[strings.TrimPrefix(CABundle, "/")]; ; n++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatal(err)
		}
	}
	if n < 100 {
		t.Errorf("%d CA certificates, want the Mozilla roots (over 100)", n)
	}

	again, err := LayerTar(files, m.created())
	if err != nil || !bytes.Equal(raw, again) {
		t.Errorf("the same files give another layer (%v)", err)
	}
}

func TestMetaRequired(t *testing.T) {
	_, err := Image(Meta{}, Target{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Binary: []byte("x")})
	for _, want := range []string{"no version", "no creation date", "no license text", "no SPDX"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Image without metadata: %v, want %q", err, want)
		}
	}
	if _, err := Image(testMeta(t), Target{Platform: v1.Platform{OS: "windows", Architecture: "amd64"}, Binary: []byte("x")}); err == nil {
		t.Error("a windows image was built")
	}
	p := v1.Platform{OS: "linux", Architecture: "amd64"}
	if _, err := Index(testMeta(t), []Target{{Platform: p, Binary: []byte("x")}, {Platform: p, Binary: []byte("y")}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a platform twice: %v", err)
	}
}

// TestImage builds the image of this machine's kubectl-khook (bin/, from
// make build) twice with khook-image, as make image does, and checks it:
// the same digests and bytes both times (OCI layout and docker tarball),
// what the layout and the tarball read back, the config (non-root user,
// entrypoint, environment, labels), and that the binary inside runs
// `version`: extracted, and as the image's user in the unpacked image when
// the test runs as root.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image is a linux image")
	}
	bins, err := e2e.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	binary := readFile(t, bins.Kubectl)
	m := testMeta(t)
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	tool := buildTool(t)

	// two builds: the same files, byte for byte
	outs := []string{filepath.Join(t.TempDir(), "image"), filepath.Join(t.TempDir(), "image")}
	var printed []string
	for _, out := range outs {
		printed = append(printed, buildImage(t, tool, m, out, bins.Kubectl))
	}
	digests := regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	if a, b := digests.FindAllString(printed[0], -1), digests.FindAllString(printed[1], -1); len(a) != 2 || !slices.Equal(a, b) {
		t.Errorf("two builds print other digests (want the index's and the image's):\n%s\n%s", printed[0], printed[1])
	}
	sameTree(t, outs[0], outs[1])

	// the layout: index.json names the index by the version; the index
	// has this platform's image
	tm, im, img := builtImage(t, outs[0])
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex || tm.Manifests[0].Annotations[AnnotationRefName] != m.Version {
		t.Fatalf("index.json %+v: want one image index named %s", tm.Manifests, m.Version)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.String() != p.String() {
		t.Fatalf("index manifests %+v, want one for %s", im.Manifests, p)
	}
	for _, d := range []v1.Hash{tm.Manifests[0].Digest, im.Manifests[0].Digest} {
		if !strings.Contains(printed[0], d.String()) {
			t.Errorf("khook-image printed\n%s\nwithout %s", printed[0], d)
		}
	}

	// the tarball: docker's format (its manifest is docker's own), the
	// same config and layer
	tag, err := name.NewTag("ghcr.io/khook-io/khook:"+m.Version, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := tarball.ImageFromPath(filepath.Join(outs[0], TarballName(m.Version, p)), &tag)
	if err != nil {
		t.Fatal(err)
	}
	for _, get := range []func(v1.Image) (v1.Hash, error){
		func(i v1.Image) (v1.Hash, error) { return i.ConfigName() },
		func(i v1.Image) (v1.Hash, error) {
			ls, err := i.Layers()
			if err != nil || len(ls) != 1 {
				return v1.Hash{}, fmt.Errorf("%d layers (%v)", len(ls), err)
			}
			return ls[0].Digest()
		},
	} {
		a, errA := get(img)
		b, errB := get(fromTar)
		if errA != nil || errB != nil || a != b {
			t.Errorf("layout %s (%v), tarball %s (%v): want the same config and layer", a, errA, b, errB)
		}
	}

	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s (%v), want OCI", mt, err)
	}
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if mf.Config.MediaType != types.OCIConfigJSON || len(mf.Layers) != 1 || mf.Layers[0].MediaType != types.OCILayer {
		t.Errorf("config %s, layers %+v: want OCI media types, one gzip layer", mf.Config.MediaType, mf.Layers)
	}
	if mf.Annotations[LabelVersion] != m.Version || mf.Annotations[LabelSource] != m.Source {
		t.Errorf("manifest annotations %v", mf.Annotations)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/kubectl-khook"}) || len(c.Cmd) != 0 || c.WorkingDir != "/home/nonroot" {
		t.Errorf("config user %q entrypoint %q cmd %q workdir %q", c.User, c.Entrypoint, c.Cmd, c.WorkingDir)
	}
	for _, e := range []string{"PATH=/usr/local/bin", "HOME=/home/nonroot", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"} {
		if !slices.Contains(c.Env, e) {
			t.Errorf("env %q: no %s", c.Env, e)
		}
	}
	wantLabels := map[string]string{
		LabelSource: m.Source, LabelVersion: m.Version, LabelRevision: m.Revision, LabelLicenses: "Apache-2.0",
		LabelCreated: "2026-11-22T04:10:48Z",
	}
	for k, v := range wantLabels {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if !cf.Created.Time.Equal(m.Created) || cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("created %v os %s arch %s", cf.Created, cf.OS, cf.Architecture)
	}
	if len(cf.History) != 1 || !cf.History[0].Created.Time.Equal(m.Created) {
		t.Errorf("history %+v: want one entry at the build date", cf.History)
	}

	// the binary inside is bin's, and runs
	rootfs := t.TempDir()
	hdrs := unpack(t, img, rootfs)
	for _, h := range hdrs {
		if !h.ModTime.Equal(m.Created) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, m.Created)
		}
	}
	if !bytes.Equal(readFile(t, filepath.Join(rootfs, filepath.FromSlash(Binary))), binary) {
		t.Fatalf("the image's %s is not the binary it was built from", Binary)
	}
	t.Run("version extracted", func(t *testing.T) {
		out := runHost(t, filepath.Join(rootfs, filepath.FromSlash(Binary)), "version")
		checkVersion(t, out)
	})
	t.Run("version as the image runs", func(t *testing.T) {
		stdout, stderr, code := runImage(t, rootfs, c, nil, "version")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		checkVersion(t, stdout)
		// the alias runs the same binary
		alias := c
		alias.Entrypoint = []string{Alias}
		if stdout2, stderr, code := runImage(t, rootfs, alias, nil, "version"); code != 0 || stdout2 != stdout {
			t.Errorf("%s version: exit %d %s\n%s", Alias, code, stderr, stdout2)
		}
	})
}

func checkVersion(t *testing.T, out string) {
	t.Helper()
	if !strings.HasPrefix(out, "kubectl khook ") || !strings.Contains(out, "platform: linux/"+runtime.GOARCH+"\n") {
		t.Errorf("version:\n%s\nwant kubectl khook's version for linux/%s", out, runtime.GOARCH)
	}
}

func runHost(t *testing.T, bin string, args ...string) string {
	t.Helper()
	res, err := e2e.Run(t.Context(), t.TempDir(), bin, nil, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 0 {
		t.Fatalf("%s %q: exit %d: %s", filepath.Base(bin), args, res.Code, res.Stderr)
	}
	return res.Stdout
}

// sameTree: two directories hold the same files, modes and bytes.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	list := func(root string) map[string]string {
		out := map[string]string{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			fi, err := d.Info()
			if err != nil {
				return err
			}
			out[rel] = fi.Mode().String()
			if d.Type().IsRegular() {
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				out[rel] += " " + string(data)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	la, lb := list(a), list(b)
	if len(la) != len(lb) {
		t.Errorf("the builds hold %d and %d files", len(la), len(lb))
	}
	for k, v := range la {
		if lb[k] != v {
			t.Errorf("the builds differ at %s", k)
		}
	}
}
