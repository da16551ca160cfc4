// Command khook-dist packs khook's release: `make dist` builds the binaries
// and runs `khook-dist package`, `make krew` runs `khook-dist krew`. See
// hack/dist.mk and docs/plugins.md.
//
//	khook-dist package -root . -bin dist/bin -out dist -version v0.1.0 -date 2026-11-22T00:00:00Z
//	khook-dist krew -root . -dist dist -version v0.1.0 -release-url URL -o dist/krew/khook.yaml
//	khook-dist krew-check -root . -manifest krew/khook.yaml
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"khook.io/dev/packaging"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "khook-dist: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: khook-dist package|krew|krew-check [flags]")
	}
	fs := flag.NewFlagSet("khook-dist "+args[0], flag.ContinueOnError)
	root := fs.String("root", ".", "repository root")
	version := fs.String("version", "", "release version, semver with a leading v")
	switch args[0] {
	case "package":
		bin := fs.String("bin", "dist/bin", "built binaries, in <os>_<arch>/ folders")
		outDir := fs.String("out", "dist", "where the archives and checksums.txt go")
		date := fs.String("date", "", "archive member mtime (RFC 3339; the commit date)")
		only := fs.String("platforms", "", "<os>_<arch> of the platforms to pack, space- or comma-separated (default: all six)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		mtime, err := time.Parse(time.RFC3339, *date)
		if err != nil {
			return fmt.Errorf("-date: %w", err)
		}
		platforms := packaging.Platforms
		if f := strings.FieldsFunc(*only, func(r rune) bool { return r == ',' || r == ' ' }); len(f) > 0 {
			platforms = nil
			for _, id := range f {
				p, err := packaging.ParsePlatform(id)
				if err != nil {
					return fmt.Errorf("-platforms: %w", err)
				}
				platforms = append(platforms, p)
			}
		}
		return pack(out, *root, *bin, *outDir, *version, mtime, platforms)
	case "krew":
		dist := fs.String("dist", "dist", "folder with the archives and checksums.txt")
		releaseURL := fs.String("release-url", "", "release download base URL; an archive is <base>/<version>/<file>")
		tmpl := fs.String("template", "krew/khook.yaml.tmpl", "manifest template, relative to -root")
		output := fs.String("o", "dist/krew/khook.yaml", "output manifest")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return krew(out, *root, *dist, *version, *releaseURL, *tmpl, *output)
	case "krew-check":
		manifest := fs.String("manifest", "krew/khook.yaml", "the manifest to check, relative to -root")
		tmpl := fs.String("template", "krew/khook.yaml.tmpl", "manifest template, relative to -root")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if err := packaging.CheckGenerated(filepath.Join(*root, *manifest), filepath.Join(*root, *tmpl)); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: valid, and exactly what %s renders\n", *manifest, *tmpl)
		return nil
	}
	return fmt.Errorf("unknown command %q (want package, krew or krew-check)", args[0])
}

// pack writes the archives of platforms (eighteen for all six: both
// plugins' and the Terraform provider's), checksums.txt, and the
// provider's registry files (its SHA256SUMS and manifest.json), two at a
// time per core, and prints the sizes.
func pack(out io.Writer, root, bin, outDir, version string, mtime time.Time, platforms []packaging.Platform) error {
	if err := packaging.CheckVersion(version); err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	type job struct {
		plugin string
		p      packaging.Platform
	}
	type result struct {
		name             string
		binSize, arcSize int
		sum              string
	}
	var jobs []job
	for _, p := range platforms {
		for _, plugin := range append(packaging.Plugins[:len(packaging.Plugins):len(packaging.Plugins)], packaging.ProviderName) {
			jobs = append(jobs, job{plugin, p})
		}
	}
	manifest, err := packaging.ProviderManifestData(root)
	if err != nil {
		return err
	}
	results := make([]result, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			binary, err := os.ReadFile(filepath.Join(bin, j.p.ID(), j.plugin+j.p.Exe()))
			if err != nil {
				errs[i] = err
				return
			}
			format, name := j.p.Format(), packaging.ArchiveName(j.plugin, version, j.p)
			var entries []packaging.Entry
			if j.plugin == packaging.ProviderName {
				format, name = packaging.Zip, packaging.ProviderArchiveName(version, j.p)
				entries, err = packaging.ProviderContents(root, version, j.p, binary)
			} else {
				entries, err = packaging.Contents(root, j.plugin, version, j.p, binary)
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s %s: %w", j.plugin, j.p, err)
				return
			}
			var buf bytes.Buffer
			if err := packaging.WriteArchive(&buf, format, entries, mtime); err != nil {
				errs[i] = fmt.Errorf("%s %s: %w", j.plugin, j.p, err)
				return
			}
			if err := os.WriteFile(filepath.Join(outDir, name), buf.Bytes(), 0o644); err != nil {
				errs[i] = err
				return
			}
			results[i] = result{name: name, binSize: len(binary), arcSize: buf.Len(), sum: packaging.SHA256(buf.Bytes())}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// checksums.txt covers every archive; the provider's registry files
	// are its manifest and a SHA256SUMS over its zips and that manifest
	sums := map[string]string{}
	providerSums := map[string]string{packaging.ProviderManifestName(version): packaging.SHA256(manifest)}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "archive\tbinary bytes\tarchive bytes\t\n")
	for i, r := range results {
		sums[r.name] = r.sum
		if jobs[i].plugin == packaging.ProviderName {
			providerSums[r.name] = r.sum
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", r.name, r.binSize, r.arcSize)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(outDir, packaging.ProviderManifestName(version)), manifest, 0o644); err != nil {
		return err
	}
	for file, s := range map[string]map[string]string{"checksums.txt": sums, packaging.ProviderSumsName(version): providerSums} {
		var buf bytes.Buffer
		if err := packaging.WriteChecksums(&buf, s); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(outDir, file), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// krew renders the krew manifest from the kubectl-khook archives in dist
// (their real sha256, checked against checksums.txt) and validates it.
func krew(out io.Writer, root, dist, version, releaseURL, tmplFile, output string) error {
	if err := packaging.CheckVersion(version); err != nil {
		return err
	}
	if releaseURL == "" {
		return errors.New("-release-url is required")
	}
	tmpl, err := os.ReadFile(filepath.Join(root, tmplFile))
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		return err
	}
	sums, err := packaging.ReadChecksums(f)
	f.Close()
	if err != nil {
		return err
	}
	data := packaging.KrewData{Version: version}
	for _, p := range packaging.Platforms {
		name := packaging.ArchiveName(packaging.KubectlPlugin, version, p)
		archive, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			return fmt.Errorf("%w (run make dist with the same version)", err)
		}
		sum := packaging.SHA256(archive)
		if sums[name] != sum {
			return fmt.Errorf("%s: sha256 %s, checksums.txt says %q", name, sum, sums[name])
		}
		entries, err := packaging.ReadArchive(archive)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		data.Platforms = append(data.Platforms, packaging.KrewPlatformData{
			OS: p.OS, Arch: p.Arch,
			URI:    strings.TrimSuffix(releaseURL, "/") + "/" + version + "/" + name,
			SHA256: sum,
			Bin:    packaging.BinaryPath(packaging.KubectlPlugin, p),
			Files:  packaging.KrewFiles(entries),
		})
	}
	manifest, err := packaging.RenderKrew(tmpl, data)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(output), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(output, manifest, 0o644); err != nil {
		return err
	}
	if _, err := packaging.ValidateKrewFile(output); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s (%s, %d platforms)\n", output, version, len(data.Platforms))
	return nil
}
