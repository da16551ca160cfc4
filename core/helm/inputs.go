package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/Masterminds/semver/v3"

	"khook.io/core/redact"
)

// ChartInputs is what installing a local chart reads from disk, for a
// fingerprint of it: the chart's files as helm loads them, and those of
// every file:// dependency LoadChart resolves for it, transitively.
type ChartInputs struct {
	// Files are by path relative to the folder that holds the chart (a
	// directory chart's own folder, a packaged chart's folder), with forward
	// slashes, in load order. Files .helmignore excludes are not loaded by
	// helm, so they are not here; a packaged chart's files are its archive's.
	Files []ChartFile
	// Remote names the dependencies LoadChart fetches from a repository or
	// registry at a version that is not exact (a range, no Chart.lock): what
	// they resolve to can change without any local file changing.
	// Dependencies at an exact version are identified by it, like a pinned
	// chart.
	Remote []string
}

// ChartFile is one file of a chart and the sha256 of its content.
type ChartFile struct {
	Path   string
	Digest string
}

// LocalChartInputs reads the local chart at path (a directory or a
// packaged .tgz) and its file:// dependencies the way LoadChart does, and
// reports what they hold. Nothing is fetched. An error is one LoadChart
// would report too.
func LocalChartInputs(path string) (*ChartInputs, error) {
	in := &ChartInputs{}
	files, top, err := localChart(path)
	if err != nil {
		return nil, err
	}
	if err := in.add(files, top, top, path, 0); err != nil {
		return nil, fmt.Errorf("chart %s: %w", path, err)
	}
	return in, nil
}

// add records the chart in files (found at path, its file:// dependencies
// relative to dir) and, like resolveDependencies, the dependencies it does
// not vendor.
func (in *ChartInputs) add(files *chartFiles, top, dir, path string, depth int) error {
	ch, err := files.load()
	if err != nil {
		return err
	}
	prefix := ""
	if files.dir != "" {
		rel, err := filepath.Rel(top, path)
		if err != nil {
			return err
		}
		prefix = filepath.ToSlash(rel) + "/"
	} else if rel, err := filepath.Rel(top, path); err == nil {
		prefix = filepath.ToSlash(rel) + "!" // inside the archive
	}
	for _, f := range ch.Raw {
		sum := sha256.Sum256(f.Data)
		in.Files = append(in.Files, ChartFile{Path: prefix + f.Name, Digest: hex.EncodeToString(sum[:])})
	}
	missing := missingDependencies(ch)
	if len(missing) > 0 && depth > maxDependencyDepth {
		return fmt.Errorf("file:// dependencies nest deeper than %d levels", maxDependencyDepth)
	}
	for _, m := range missing {
		repoURL := strings.TrimSpace(m.dep.Repository)
		if err := checkRepository(repoURL); err != nil {
			return fmt.Errorf("dependency %s: %w", m.dep.Name, err)
		}
		if !strings.HasPrefix(repoURL, "file://") {
			if !ExactVersion(m.version) {
				in.Remote = append(in.Remote, describeRemoteDependency(ch.Name(), m, repoURL))
			}
			continue
		}
		p := localDependencyPath(repoURL, dir)
		sub, _, subdir, err := loadLocalDependency(m.dep, p)
		if err != nil {
			return fmt.Errorf("dependency %s: %w", m.dep.Name, err)
		}
		if err := in.add(sub, top, subdir, p, depth+1); err != nil {
			return fmt.Errorf("dependency %s: %s: %w", m.dep.Name, p, err)
		}
	}
	return nil
}

func describeRemoteDependency(chartName string, m missingDependency, repoURL string) string {
	version := "no version"
	if m.version != "" {
		version = "version " + m.version
	}
	return fmt.Sprintf("dependency %s of chart %s from %s (%s, not an exact version)", m.dep.Name, chartName, redact.StripURLUserinfo(repoURL), version)
}

// ExactVersion reports whether v names one chart version (1.2.3,
// v1.2.3-rc.1+build), not a range (^1.2, ~1, 1.2, 1.x, >=1) or nothing:
// the versions a fetch of the same reference always resolves the same.
func ExactVersion(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return false
	}
	_, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v"))
	return err == nil
}
