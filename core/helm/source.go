package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	helmchart "helm.sh/helm/v4/pkg/chart"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"khook.io/core/fetch"
	"khook.io/core/redact"
	"khook.io/core/spec"
)

// Credentials are basic-auth credentials for a chart repository or an OCI
// registry.
type Credentials struct {
	Username, Password string
}

// Source says where a chart comes from, as a helm step writes it.
type Source struct {
	// Chart is chart: as written: a bare name (with Repo), name:version,
	// an oci:// reference (:tag, @digest), or a local directory or .tgz.
	Chart string
	// Repo is the HTTP(S) repository URL of a bare name, possibly with
	// user:password@.
	Repo string
	// Version is version: (exact, or a semver constraint); "" means the
	// inline version or the latest.
	Version string
	// Auth, when set, authenticates against the repository or registry
	// (otherwise URL userinfo does, if any).
	Auth *Credentials
}

// Chart is a fetched chart. It is immutable: each operation loads a fresh
// copy of it, since Helm's actions change the chart they are given.
type Chart struct {
	// Name and Version are the chart's (from its Chart.yaml).
	Name    string
	Version string
	// Ref says where it came from, without credentials: "demo 1.2.0 from
	// https://charts.example", "oci://ghcr.io/org/demo:1.2.0", "./charts/demo".
	Ref string
	// Deprecated: the chart's Chart.yaml says so (helm's CLI warns "this
	// chart is deprecated" when it installs or upgrades it).
	Deprecated bool
	files      *chartFiles
}

// String is "name version".
func (c *Chart) String() string { return c.Name + " " + c.Version }

// chartFiles is a chart held in memory (a packaged archive) or on disk (a
// local directory), plus the dependencies fetched for it.
type chartFiles struct {
	dir     string
	archive []byte
	deps    []*chartFiles
}

func (f *chartFiles) load() (*chart.Chart, error) {
	var ch *chart.Chart
	var err error
	if f.dir != "" {
		ch, err = loader.LoadDir(f.dir)
	} else {
		ch, err = loader.LoadArchive(bytes.NewReader(f.archive))
	}
	if err != nil {
		return nil, err
	}
	for _, d := range f.deps {
		sub, err := d.load()
		if err != nil {
			return nil, err
		}
		ch.AddDependency(sub)
	}
	return ch, nil
}

// load returns a fresh copy of the chart.
func (c *Chart) load() (*chart.Chart, error) {
	ch, err := c.files.load()
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", c.Ref, err)
	}
	return ch, nil
}

// maxDependencyDepth bounds file:// dependencies of file:// dependencies.
const maxDependencyDepth = 8

// LoadChart fetches the chart src names: a local directory or archive
// (relative to Env.BaseDir), a chart of an HTTP repository (its index is
// fetched and the version resolved in memory), or an OCI chart. A local
// chart's dependencies that are not vendored in charts/ are fetched the way
// `helm dependency build` would (Chart.lock versions first, then the
// Chart.yaml constraints). Credentials are registered with the redactor
// before anything is fetched.
func (c *Client) LoadChart(ctx context.Context, src Source) (*Chart, error) {
	ch, err := c.loadChart(ctx, src)
	return ch, c.env.Redactor.Error(err)
}

func (c *Client) loadChart(ctx context.Context, src Source) (*Chart, error) {
	ref, err := spec.ParseChart(src.Chart)
	if err != nil {
		return nil, err
	}
	creds := src.Auth
	if creds != nil {
		c.env.Redactor.Add(creds.Password)
	}
	version := src.Version
	if version == "" {
		version = ref.InlineVersion
	}
	idx := indexCache{}
	var files *chartFiles
	var display, dir string
	switch ref.Source {
	case spec.ChartFromLocal:
		display = ref.Name
		path := c.localPath(ref.Name)
		files, dir, err = localChart(path)
	case spec.ChartFromRepo:
		repoURL, user := splitUserinfo(src.Repo, c.env.Redactor)
		if creds == nil && user != nil {
			creds = user
		}
		display = nameVersion(ref.Name, version) + " from " + repoURL
		var archive []byte
		archive, err = c.fetchFromRepo(ctx, idx, repoURL, ref.Name, version, creds)
		files = &chartFiles{archive: archive}
	case spec.ChartFromOCI:
		if creds == nil && ref.HasUserinfo {
			creds = &Credentials{Username: ref.Username, Password: ref.Password}
			c.env.Redactor.Add(ref.Password)
		}
		o := ociRef{name: ref.Name, tag: ref.InlineVersion, digest: ref.Digest, version: src.Version}
		display = o.String()
		var archive []byte
		archive, err = c.pullOCI(ctx, o, creds)
		files = &chartFiles{archive: archive}
	default:
		return nil, fmt.Errorf("chart %s: unknown source", src.Chart)
	}
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", display, err)
	}
	ch, err := files.load()
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", display, err)
	}
	if err := c.resolveDependencies(ctx, idx, files, ch, dir, 0); err != nil {
		return nil, fmt.Errorf("chart %s: %w", display, err)
	}
	out := &Chart{Name: ch.Name(), Version: ch.Metadata.Version, Deprecated: ch.Metadata.Deprecated, files: files, Ref: display}
	if ref.Source != spec.ChartFromLocal {
		out.Ref = chartRef(ref, src, ch.Metadata.Version)
	}
	return out, nil
}

// chartRef names a fetched remote chart with the version it resolved to.
func chartRef(ref spec.ChartRef, src Source, version string) string {
	switch ref.Source {
	case spec.ChartFromRepo:
		repoURL := redact.StripURLUserinfo(src.Repo)
		if u, err := url.Parse(src.Repo); err == nil {
			u.User = nil
			repoURL = u.String()
		}
		return fmt.Sprintf("%s %s from %s", ref.Name, version, repoURL)
	case spec.ChartFromOCI:
		if ref.Digest != "" {
			return "oci://" + ref.Name + "@" + ref.Digest
		}
		return "oci://" + ref.Name + ":" + version
	}
	return src.Chart
}

func nameVersion(name, version string) string {
	if version == "" {
		return name
	}
	return name + " " + version
}

func (c *Client) localPath(p string) string {
	if filepath.IsAbs(p) || c.env.BaseDir == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(c.env.BaseDir, p)
}

// localChart reads a chart directory or a packaged chart; dir is where
// its file:// dependencies are relative to.
func localChart(path string) (*chartFiles, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("%s does not exist", path)
		}
		return nil, "", err
	}
	if fi.IsDir() {
		return &chartFiles{dir: path}, path, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	return &chartFiles{archive: data}, filepath.Dir(path), nil
}

// splitUserinfo returns rawURL without userinfo, and the userinfo as
// credentials (URL-decoded; the password registered with red), if any.
func splitUserinfo(rawURL string, red *redact.Redactor) (string, *Credentials) {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return redact.StripURLUserinfo(rawURL), nil
	}
	pass, _ := u.User.Password()
	creds := &Credentials{Username: u.User.Username(), Password: pass}
	red.Add(pass)
	u.User = nil
	return u.String(), creds
}

// withCredentials returns rawURL with creds as its userinfo (which fetch
// sends as basic auth and never prints).
func withCredentials(rawURL string, creds *Credentials) string {
	if creds == nil {
		return rawURL
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.User = url.UserPassword(creds.Username, creds.Password)
	return u.String()
}

// indexCache holds the indexes one LoadChart fetched, by repository URL.
type indexCache map[string]*repo.IndexFile

// fetchFromRepo resolves name at version in the repository's index and
// downloads the archive. Credentials go to the repository's host only
// (like Helm without --pass-credentials).
func (c *Client) fetchFromRepo(ctx context.Context, idx indexCache, repoURL, name, version string, creds *Credentials) ([]byte, error) {
	index, ok := idx[repoURL]
	if !ok {
		indexURL := strings.TrimSuffix(repoURL, "/") + "/index.yaml"
		data, err := fetch.Get(ctx, c.env.httpClient(), withCredentials(indexURL, creds))
		if err != nil {
			return nil, err
		}
		if index, err = parseIndex(data); err != nil {
			return nil, fmt.Errorf("%s: %w", redact.StripURLUserinfo(indexURL), err)
		}
		idx[repoURL] = index
	}
	cv, err := resolveVersion(index, name, version)
	if err != nil {
		return nil, err
	}
	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("the index lists no URL for %s %s", name, cv.Version)
	}
	chartURL, err := repo.ResolveReferenceURL(repoURL, cv.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("%s %s: invalid URL in the index: %w", name, cv.Version, err)
	}
	if !sameHost(chartURL, repoURL) {
		creds = nil
	}
	return fetch.Get(ctx, c.env.httpClient(), withCredentials(chartURL, creds))
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Scheme == ub.Scheme && ua.Host == ub.Host
}

// resolveDependencies fetches the dependencies Chart.yaml declares that
// are not vendored in charts/: like `helm dependency build`, at the
// version Chart.lock pins, or else the best match of the Chart.yaml
// constraint. file:// dependencies are read relative to dir (and their own
// missing dependencies resolved in turn). Repository names (@name) from
// Helm's repositories.yaml are not supported: khook reads no Helm
// configuration.
func (c *Client) resolveDependencies(ctx context.Context, idx indexCache, files *chartFiles, ch *chart.Chart, dir string, depth int) error {
	missing := missingDependencies(ch)
	if len(missing) == 0 {
		return nil
	}
	if depth > maxDependencyDepth {
		return fmt.Errorf("file:// dependencies nest deeper than %d levels", maxDependencyDepth)
	}
	for _, m := range missing {
		// helm install refuses such a chart ("found in Chart.yaml, but
		// missing in charts/ directory"); khook resolves it as
		// --dependency-update would, and says so
		c.env.logf("chart %s: dependency %s is missing from charts/: resolving %s from %s in memory, as helm install --dependency-update would",
			ch.Name(), m.dep.Name, nameVersion(m.dep.Name, m.version), redact.StripURLUserinfo(strings.TrimSpace(m.dep.Repository)))
		dep, err := c.fetchDependency(ctx, idx, m.dep, m.version, dir, depth)
		if err != nil {
			return fmt.Errorf("dependency %s: %w", m.dep.Name, err)
		}
		files.deps = append(files.deps, dep)
	}
	return nil
}

// missingDependency is a dependency Chart.yaml (or a v1 chart's
// requirements.yaml) declares that is not vendored in charts/, with the
// version to fetch: Chart.lock's, else the Chart.yaml constraint.
type missingDependency struct {
	dep     *chart.Dependency
	version string
}

// missingDependencies lists what resolveDependencies fetches for ch, in
// Chart.yaml order, each name once.
func missingDependencies(ch *chart.Chart) []missingDependency {
	if ch.Metadata == nil || len(ch.Metadata.Dependencies) == 0 {
		return nil
	}
	reqs := make([]helmchart.Dependency, len(ch.Metadata.Dependencies))
	for i, d := range ch.Metadata.Dependencies {
		reqs[i] = d
	}
	if err := action.CheckDependencies(ch, reqs); err == nil {
		return nil
	}
	present := map[string]bool{}
	for _, d := range ch.Dependencies() {
		present[d.Name()] = true
	}
	locked := map[string]string{}
	if ch.Lock != nil {
		for _, d := range ch.Lock.Dependencies {
			locked[d.Name] = d.Version
		}
	}
	var out []missingDependency
	for _, d := range ch.Metadata.Dependencies {
		if present[d.Name] {
			continue
		}
		version := d.Version
		if v, ok := locked[d.Name]; ok && v != "" {
			version = v
		}
		out = append(out, missingDependency{dep: d, version: version})
		present[d.Name] = true
	}
	return out
}

// localDependencyPath is where a file:// dependency lives, as helm's
// resolver finds it: an absolute path as written, else relative to dir,
// the folder of the chart that declares it.
func localDependencyPath(repoURL, dir string) string {
	p := strings.TrimPrefix(strings.TrimSpace(repoURL), "file://")
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return p
}

// loadLocalDependency reads the file:// dependency d: the chart at p, which
// must be named d.Name.
func loadLocalDependency(d *chart.Dependency, p string) (*chartFiles, *chart.Chart, string, error) {
	files, subdir, err := localChart(p)
	if err != nil {
		return nil, nil, "", err
	}
	sub, err := files.load()
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", p, err)
	}
	if sub.Name() != d.Name {
		return nil, nil, "", fmt.Errorf("%s holds chart %q, not %q", p, sub.Name(), d.Name)
	}
	return files, sub, subdir, nil
}

func (c *Client) fetchDependency(ctx context.Context, idx indexCache, d *chart.Dependency, version, dir string, depth int) (*chartFiles, error) {
	repoURL := strings.TrimSpace(d.Repository)
	if err := checkRepository(repoURL); err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(repoURL, "file://"):
		p := localDependencyPath(repoURL, dir)
		files, sub, subdir, err := loadLocalDependency(d, p)
		if err != nil {
			return nil, err
		}
		if err := c.resolveDependencies(ctx, idx, files, sub, subdir, depth+1); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return files, nil
	case strings.HasPrefix(repoURL, "oci://"):
		base, creds := splitUserinfo(repoURL, c.env.Redactor)
		o := ociRef{name: strings.TrimSuffix(strings.TrimPrefix(base, "oci://"), "/") + "/" + d.Name, version: version}
		archive, err := c.pullOCI(ctx, o, creds)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o, err)
		}
		return &chartFiles{archive: archive}, nil
	}
	base, creds := splitUserinfo(repoURL, c.env.Redactor)
	archive, err := c.fetchFromRepo(ctx, idx, base, d.Name, version, creds)
	if err != nil {
		return nil, fmt.Errorf("%s from %s: %w", nameVersion(d.Name, version), base, err)
	}
	return &chartFiles{archive: archive}, nil
}

// checkRepository refuses a dependency's repository khook cannot fetch
// from: none, or a name from Helm's repositories.yaml.
func checkRepository(repoURL string) error {
	switch {
	case repoURL == "":
		return errors.New("not vendored in charts/ and Chart.yaml names no repository to fetch it from")
	case strings.HasPrefix(repoURL, "file://"), strings.HasPrefix(repoURL, "oci://"),
		strings.HasPrefix(repoURL, "https://"), strings.HasPrefix(repoURL, "http://"):
		return nil
	}
	return fmt.Errorf("repository %q is not a URL: khook does not read Helm's repositories.yaml, so write the repository's https://, oci:// or file:// URL in Chart.yaml, or vendor the chart in charts/", redact.StripURLUserinfo(repoURL))
}
