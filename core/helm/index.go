package helm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	repo "helm.sh/helm/v4/pkg/repo/v1"
)

// nearestCount is how many versions a "version not found" error lists.
const nearestCount = 5

// parseIndex reads a repository's index.yaml (or its JSON form) with
// Helm's own loader, repo.LoadIndexFile, so an index means to khook exactly
// what it means to `helm install --repo`: YAML read strictly, entries that
// are empty or fail chart validation dropped, except for the validation
// errors Helm tolerates in indexes (two dependencies of one name, as
// repositories that strip dependency aliases write them), and each chart's
// versions sorted newest first. Helm's loader reads only files, so the
// downloaded index passes through a temporary file, as it does through
// Helm's repository cache.
func parseIndex(data []byte) (*repo.IndexFile, error) {
	dir, err := os.MkdirTemp("", "khook-index-")
	if err != nil {
		return nil, fmt.Errorf("read index.yaml: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "index.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, fmt.Errorf("read index.yaml: %w", err)
	}
	idx, err := repo.LoadIndexFile(path)
	switch {
	case errors.Is(err, repo.ErrEmptyIndexYaml):
		return nil, errors.New("index.yaml is empty")
	case errors.Is(err, repo.ErrNoAPIVersion):
		return nil, errors.New("index.yaml is not a chart repository index: no apiVersion")
	case err != nil:
		// Helm names the file it read: the temporary one means nothing to
		// the user, whose message names the index URL instead
		msg := strings.TrimPrefix(err.Error(), "error loading "+path+": ")
		return nil, fmt.Errorf("index.yaml is not a chart repository index: %s", msg)
	}
	return idx, nil
}

// resolveVersion finds name in idx at version: an exact version, a semver
// constraint (~1.2, >=1.0 <2), or "" for the latest stable version. When
// nothing matches, the error lists the nearest available versions; when the
// chart is missing, the charts with similar names.
func resolveVersion(idx *repo.IndexFile, name, version string) (*repo.ChartVersion, error) {
	cvs, ok := idx.Entries[name]
	if !ok || len(cvs) == 0 {
		msg := fmt.Sprintf("no chart %q in the repository", name)
		if similar := similarNames(idx, name); len(similar) > 0 {
			msg += " (did you mean " + strings.Join(similar, ", ") + "?)"
		}
		return nil, errors.New(msg)
	}
	cv, err := idx.Get(name, version)
	if err == nil {
		return cv, nil
	}
	available := make([]string, 0, len(cvs))
	for _, cv := range cvs {
		available = append(available, cv.Version)
	}
	if version == "" {
		return nil, fmt.Errorf("no stable version of chart %q in the repository; %s", name, describeNearest(available, ""))
	}
	if _, cerr := semver.NewConstraint(version); cerr != nil {
		return nil, fmt.Errorf("version %q of chart %q is neither a version nor a constraint: %v", version, name, cerr)
	}
	return nil, fmt.Errorf("chart %q has no version %s; %s", name, version, describeNearest(available, version))
}

// describeNearest phrases nearestVersions for an error.
func describeNearest(available []string, want string) string {
	near := nearestVersions(available, want, nearestCount)
	if len(near) == 0 {
		return "it has no valid versions"
	}
	latest := latestVersion(available)
	if _, err := semver.NewVersion(want); err == nil && want != "" {
		return fmt.Sprintf("nearest available versions: %s (latest %s)", strings.Join(near, ", "), latest)
	}
	return fmt.Sprintf("latest available versions: %s", strings.Join(near, ", "))
}

// nearestVersions returns up to n of the available versions closest to
// want, in ascending order: the ones just below and just above it, when
// want is a version; the n latest, newest first, when want is a
// constraint or empty. Strings that are not versions are ignored.
func nearestVersions(available []string, want string, n int) []string {
	type ver struct {
		raw string
		v   *semver.Version
	}
	var vs []ver
	seen := map[string]bool{}
	for _, a := range available {
		v, err := semver.NewVersion(a)
		if err != nil || seen[a] {
			continue
		}
		seen[a] = true
		vs = append(vs, ver{a, v})
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].v.LessThan(vs[j].v) })
	target, err := semver.NewVersion(want)
	if err != nil || want == "" {
		out := make([]string, 0, n)
		for i := len(vs) - 1; i >= 0 && len(out) < n; i-- {
			out = append(out, vs[i].raw)
		}
		return out
	}
	// The index of the first version above target; take versions
	// alternately from below and above, nearest first.
	pos := sort.Search(len(vs), func(i int) bool { return vs[i].v.GreaterThan(target) })
	lo, hi := pos-1, pos
	var picked []ver
	for len(picked) < n && (lo >= 0 || hi < len(vs)) {
		if lo >= 0 {
			picked = append(picked, vs[lo])
			lo--
		}
		if len(picked) < n && hi < len(vs) {
			picked = append(picked, vs[hi])
			hi++
		}
	}
	sort.SliceStable(picked, func(i, j int) bool { return picked[i].v.LessThan(picked[j].v) })
	out := make([]string, len(picked))
	for i, p := range picked {
		out[i] = p.raw
	}
	return out
}

func latestVersion(available []string) string {
	if l := nearestVersions(available, "", 1); len(l) == 1 {
		return l[0]
	}
	return ""
}

// similarNames lists up to three chart names of idx that contain name or
// are contained in it, or share its first four letters.
func similarNames(idx *repo.IndexFile, name string) []string {
	lower := strings.ToLower(name)
	var out []string
	for n := range idx.Entries {
		ln := strings.ToLower(n)
		if strings.Contains(ln, lower) || strings.Contains(lower, ln) ||
			(len(lower) >= 4 && len(ln) >= 4 && ln[:4] == lower[:4]) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}
