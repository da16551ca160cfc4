// Command khook-image builds khook's container image from built
// kubectl-khook binaries, without a container runtime (hack/image.mk, `make
// image`):
//
//	khook-image -out dist/image -version v0.1.0 -revision abc -date 2026-11-22T05:10:48Z \
//	  -license LICENSE -repo ghcr.io/khook-io/khook -source https://github.com/khook-io/khook \
//	  -binary linux/amd64=dist/bin/linux_amd64/kubectl-khook [-binary linux/arm64=...]
//
// It writes <out>/oci (an OCI image layout: the multi-platform index, named
// by the version) and <out>/khook_<version>_linux_<arch>.tar (`docker save`
// tarballs tagged <repo>:<version>, one per platform), and prints the
// digests.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"khook.io/dev/image"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "khook-image:", err)
		os.Exit(1)
	}
}

// binaries is the repeatable -binary os/arch=path flag.
type binaries []string

func (b *binaries) String() string     { return strings.Join(*b, ",") }
func (b *binaries) Set(v string) error { *b = append(*b, v); return nil }

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("khook-image", flag.ContinueOnError)
	var (
		outDir   = fs.String("out", "", "output directory (oci/ and the tarballs)")
		version  = fs.String("version", "", "release version: the image tag")
		revision = fs.String("revision", "", "the commit")
		date     = fs.String("date", "", "the commit date (RFC 3339): every file's mtime and the image's created time")
		license  = fs.String("license", "", "the license file")
		licenses = fs.String("licenses", "Apache-2.0", "SPDX license expression (label)")
		repo     = fs.String("repo", "", "image repository the tarballs are tagged with (ghcr.io/khook-io/khook)")
		source   = fs.String("source", "", "source repository URL (label)")
		bins     binaries
	)
	fs.Var(&bins, "binary", "linux/<arch>=<path of its kubectl-khook> (repeatable; the index keeps this order)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	for flagName, v := range map[string]string{"out": *outDir, "version": *version, "date": *date, "license": *license, "repo": *repo} {
		if v == "" {
			errs = append(errs, fmt.Errorf("-%s is required", flagName))
		}
	}
	if len(bins) == 0 {
		errs = append(errs, errors.New("-binary is required (at least one platform)"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	created, err := time.Parse(time.RFC3339, *date)
	if err != nil {
		return fmt.Errorf("-date: %w", err)
	}
	text, err := os.ReadFile(*license)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(*repo+":"+*version, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-repo and -version: %w", err)
	}
	var targets []image.Target
	for _, b := range bins {
		plat, file, ok := strings.Cut(b, "=")
		if !ok {
			return fmt.Errorf("-binary %q: want linux/<arch>=<path>", b)
		}
		p, err := image.ParsePlatform(plat)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		targets = append(targets, image.Target{Platform: p, Binary: data})
	}
	meta := image.Meta{Version: *version, Revision: *revision, Created: created, Source: *source, Licenses: *licenses, License: text}
	idx, err := image.Index(meta, targets)
	if err != nil {
		return err
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	// tarballs of an earlier build (another version or platform) go
	stale, err := filepath.Glob(filepath.Join(*outDir, "khook_*_linux_*.tar"))
	if err != nil {
		return err
	}
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	layoutDir := filepath.Join(*outDir, "oci")
	if err := image.WriteLayout(layoutDir, idx, *version); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s  %s (OCI layout: image index of %s, tag %s)\n", digest, layoutDir, strings.Join(platforms(manifest), ", "), *version)
	for _, d := range manifest.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		file := filepath.Join(*outDir, image.TarballName(*version, *d.Platform))
		if err := image.WriteTarball(file, tag, img); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s  %s (%s, docker load -i; tag %s)\n", d.Digest, file, d.Platform.String(), tag.String())
	}
	return nil
}

func platforms(m *v1.IndexManifest) []string {
	var out []string
	for _, d := range m.Manifests {
		out = append(out, d.Platform.String())
	}
	return out
}
