// Package image builds khook's container image without a container
// runtime: one layer holding the static kubectl-khook binary, a non-root
// user, CA certificates and the license, and nothing else (no shell, no
// package manager). The image is reproducible: the same binaries, license
// and date give the same bytes and digests. It is written as an OCI image
// layout (a multi-platform index) and as `docker save` tarballs, one per
// platform. dev/cmd/khook-image drives it from hack/image.mk (`make image`).
// See docs/in-cluster.md.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// What the image holds, and how it runs.
const (
	// UID and GID are the user the image runs as: 65532, distroless's
	// "nonroot".
	UID = 65532
	GID = 65532
	// User is the config's User.
	User = "65532:65532"
	// Binary is the one executable: kubectl-khook, the plugin that takes
	// kubectl's connection flags (in a Pod: in-cluster credentials when no
	// kubeconfig is given).
	Binary = "/usr/local/bin/kubectl-khook"
	// Alias is a symlink to Binary, for pipelines that name the command.
	Alias = "/usr/local/bin/khook"
	// Home is the user's home directory and the working directory.
	Home = "/home/nonroot"
	// CABundle holds the Mozilla roots (from golang.org/x/crypto's
	// x509roots): Go reads it as the system roots, for HTTPS chart
	// repositories, OCI registries and manifest URLs.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// LicenseFile is where the license sits.
	LicenseFile = "/usr/share/doc/khook/LICENSE"
)

// Standard OCI annotation and label keys.
const (
	AnnotationRefName  = "org.opencontainers.image.ref.name"
	LabelSource        = "org.opencontainers.image.source"
	LabelVersion       = "org.opencontainers.image.version"
	LabelRevision      = "org.opencontainers.image.revision"
	LabelLicenses      = "org.opencontainers.image.licenses"
	LabelCreated       = "org.opencontainers.image.created"
	LabelTitle         = "org.opencontainers.image.title"
	LabelDescription   = "org.opencontainers.image.description"
	LabelDocumentation = "org.opencontainers.image.documentation"
)

// Meta describes one build.
type Meta struct {
	// Version is the release version (v0.1.0) and the image tag.
	Version string
	// Revision is the commit.
	Revision string
	// Created is the commit date: every file's mtime and the config's
	// created time, so that the same commit gives the same image.
	Created time.Time
	// Source is the repository URL.
	Source string
	// Licenses is the SPDX expression (Apache-2.0).
	Licenses string
	// License is the license text.
	License []byte
}

func (m Meta) check() error {
	var errs []error
	if m.Version == "" {
		errs = append(errs, errors.New("no version"))
	}
	if m.Created.IsZero() {
		errs = append(errs, errors.New("no creation date"))
	}
	if len(m.License) == 0 {
		errs = append(errs, errors.New("no license text"))
	}
	if m.Licenses == "" {
		errs = append(errs, errors.New("no SPDX license expression"))
	}
	return errors.Join(errs...)
}

func (m Meta) labels() map[string]string {
	l := map[string]string{
		LabelTitle:       "khook",
		LabelDescription: "Bootstrap a Kubernetes cluster from one declarative spec (kubectl-khook)",
		LabelVersion:     m.Version,
		LabelLicenses:    m.Licenses,
		LabelCreated:     m.created().Format(time.RFC3339),
	}
	if m.Source != "" {
		l[LabelSource] = m.Source
		l[LabelDocumentation] = m.Source + "/blob/main/docs/in-cluster.md"
	}
	if m.Revision != "" {
		l[LabelRevision] = m.Revision
	}
	return l
}

// annotations are the manifests' and the index's: version, creation date
// and source, as registries show them.
func (m Meta) annotations() map[string]string {
	a := map[string]string{LabelVersion: m.Version, LabelCreated: m.created().Format(time.RFC3339)}
	if m.Source != "" {
		a[LabelSource] = m.Source
	}
	return a
}

func (m Meta) created() time.Time { return m.Created.UTC().Truncate(time.Second) }

// Target is one platform's input: its os/arch and its kubectl-khook
// binary.
type Target struct {
	Platform v1.Platform
	Binary   []byte
}

// ParsePlatform parses "linux/amd64" or "linux_amd64" (linux only: the
// image is a Linux image).
func ParsePlatform(s string) (v1.Platform, error) {
	goos, arch, ok := strings.Cut(strings.ReplaceAll(s, "_", "/"), "/")
	if !ok || goos != "linux" || arch == "" || strings.Contains(arch, "/") {
		return v1.Platform{}, fmt.Errorf("platform %q: want linux/<arch> (linux/amd64, linux/arm64)", s)
	}
	return v1.Platform{OS: goos, Architecture: arch}, nil
}

// File is one member of the image's layer.
type File struct {
	// Name is the absolute slash-separated path; a directory's ends in "/".
	Name string
	// Mode holds the permission bits (and fs.ModeSticky).
	Mode fs.FileMode
	// UID and GID own the file.
	UID, GID int
	// Data is a regular file's content.
	Data []byte
	// Link is a symlink's target (then Data is empty).
	Link string
}

// Files lists the layer's members for binary, sorted by name, every
// directory before what it holds.
func Files(m Meta, binary []byte) ([]File, error) {
	ca, err := caBundle()
	if err != nil {
		return nil, err
	}
	dir := func(name string, mode fs.FileMode) File { return File{Name: name, Mode: mode} }
	file := func(name string, mode fs.FileMode, data []byte) File { return File{Name: name, Mode: mode, Data: data} }
	files := []File{
		dir("/etc/", 0o755),
		file("/etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")),
		file("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")),
		dir("/etc/ssl/", 0o755),
		dir("/etc/ssl/certs/", 0o755),
		file(CABundle, 0o644, ca),
		dir("/home/", 0o755),
		{Name: Home + "/", Mode: 0o700, UID: UID, GID: GID},
		dir("/root/", 0o700),
		dir("/tmp/", 0o777|fs.ModeSticky),
		dir("/usr/", 0o755),
		dir("/usr/local/", 0o755),
		dir("/usr/local/bin/", 0o755),
		{Name: Alias, Mode: 0o777, Link: path.Base(Binary)},
		file(Binary, 0o755, binary),
		dir("/usr/share/", 0o755),
		dir("/usr/share/doc/", 0o755),
		dir("/usr/share/doc/khook/", 0o755),
		file(LicenseFile, 0o644, m.License),
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files, nil
}

// caBundle is the PEM of the x509roots roots without constraints (a root
// NSS distrusts after a date cannot be expressed in a PEM file: left out).
func caBundle() ([]byte, error) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, errors.New("no CA certificates in x509roots")
	}
	return buf.Bytes(), nil
}

// LayerTar writes files as an uncompressed layer, in their order: USTAR
// headers, names relative to the root, every mtime mtime, numeric owners
// without user or group names.
func LayerTar(files []File, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(f.Name, "/"),
			Mode:    int64(f.Mode.Perm()),
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		if f.Mode&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000 // c_ISVTX
		}
		switch {
		case strings.HasSuffix(f.Name, "/"):
			hdr.Typeflag = tar.TypeDir
		case f.Link != "":
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = f.Link
		default:
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("layer %s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipped compresses data with a header that has no name and no time.
func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// layer is a gzip layer held in memory, its digests computed once (ggcr's
// tarball layers decompress it again to learn the diff ID).
type layer struct {
	compressed     []byte
	digest, diffID v1.Hash
}

func newLayer(raw, compressed []byte) (*layer, error) {
	digest, _, err := v1.SHA256(bytes.NewReader(compressed))
	if err != nil {
		return nil, err
	}
	diffID, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return &layer{compressed: compressed, digest: digest, diffID: diffID}, nil
}

func (l *layer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *layer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *layer) Size() (int64, error)     { return int64(len(l.compressed)), nil }
func (l *layer) MediaType() (types.MediaType, error) {
	return types.OCILayer, nil
}
func (l *layer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.compressed)), nil
}
func (l *layer) Uncompressed() (io.ReadCloser, error) {
	return gzip.NewReader(bytes.NewReader(l.compressed))
}

// Image builds the image of one target.
func Image(m Meta, t Target) (v1.Image, error) {
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if t.Platform.OS != "linux" || t.Platform.Architecture == "" {
		return nil, fmt.Errorf("image: platform %q: want linux/<arch>", t.Platform.String())
	}
	files, err := Files(m, t.Binary)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", t.Platform.String(), err)
	}
	created := m.created()
	raw, err := LayerTar(files, created)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", t.Platform.String(), err)
	}
	compressed, err := gzipped(raw)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", t.Platform.String(), err)
	}
	layer, err := newLayer(raw, compressed)
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", t.Platform.String(), err)
	}

	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err = mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: t.Platform.Architecture,
		OS:           t.Platform.OS,
		Variant:      t.Platform.Variant,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{Binary},
			WorkingDir: Home,
			Env: []string{
				"PATH=/usr/local/bin",
				"HOME=" + Home,
				"SSL_CERT_FILE=" + CABundle,
			},
			Labels: m.labels(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", t.Platform.String(), err)
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "khook-image (dev/image)",
			Comment:   "kubectl-khook " + m.Version + ", CA certificates, nonroot user, license",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", t.Platform.String(), err)
	}
	return mutate.Annotations(img, m.annotations()).(v1.Image), nil
}

// Index builds the multi-platform image index of targets, in their order.
func Index(m Meta, targets []Target) (v1.ImageIndex, error) {
	if len(targets) == 0 {
		return nil, errors.New("image index: no platforms")
	}
	var adds []mutate.IndexAddendum
	seen := map[string]bool{}
	for _, t := range targets {
		if seen[t.Platform.String()] {
			return nil, fmt.Errorf("image index: platform %s given twice", t.Platform.String())
		}
		seen[t.Platform.String()] = true
		img, err := Image(m, t)
		if err != nil {
			return nil, err
		}
		p := t.Platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, m.annotations()).(v1.ImageIndex), nil
}

// WriteLayout writes idx as an OCI image layout into dir (emptied first),
// its index.json naming idx with the tag ref (org.opencontainers.image.ref.name):
// `skopeo copy --all oci:<dir>:<ref> docker://...`, `crane push <dir> ...`.
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{AnnotationRefName: ref})); err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	// the layout writer leaves blobs 0600 or 0777 by how it wrote them:
	// same permissions everywhere, so that the directory is the same too
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
}

// TarballName is the file name of one platform's `docker save` tarball:
// khook_v0.1.0_linux_amd64.tar.
func TarballName(version string, p v1.Platform) string {
	return fmt.Sprintf("khook_%s_%s_%s.tar", version, p.OS, p.Architecture)
}

// WriteTarball writes img as a `docker save` tarball tagged tag:
// `docker load -i`, `podman load -i`, `skopeo copy docker-archive:...`,
// `crane push <file> ...`, `kind load image-archive`.
func WriteTarball(file string, tag name.Tag, img v1.Image) error {
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		return fmt.Errorf("image tarball %s: %w", file, err)
	}
	return nil
}
