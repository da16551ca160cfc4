package helm

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"khook.io/core/spec"
)

// Type is the action key of helm: steps.
const Type = "helm"

// SkipIfInstalled is the skipIf of a helm step: skip (success) when the
// release already exists.
const SkipIfInstalled = "installed"

// Helm is a helm: step's block: install or upgrade a chart release.
type Helm struct {
	Chart           string         `yaml:"chart" khook:"required" doc:"chart source: bare name (with repo), name:version, oci:// reference, or a local path (./, ../, /) to a directory or .tgz"`
	Repo            string         `yaml:"repo" schema:"url" doc:"HTTP(S) chart repository URL, required for a bare chart name"`
	Version         string         `yaml:"version" doc:"exact chart version (recommended: always pin); or write chart: name:1.2.3"`
	Auth            *Auth          `yaml:"auth" doc:"credentials for a private repository or registry"`
	Release         string         `yaml:"release" identifier:"a release name is an identifier: it names the release's objects and history in the cluster and is printed in plans" doc:"Helm release name; default: the step name"`
	Namespace       string         `yaml:"namespace" schema:"dnslabel" default:"default" doc:"target namespace"`
	CreateNamespace bool           `yaml:"createNamespace" default:"false" doc:"create the namespace if missing"`
	SkipIf          string         `yaml:"skipIf" enum:"installed" doc:"installed: skip (success) if the release already exists, regardless of version or values"`
	Atomic          bool           `yaml:"atomic" default:"false" doc:"roll back a failed upgrade, uninstall a failed install"`
	Wait            bool           `yaml:"wait" default:"false" doc:"wait for the release's resources to be ready before the step succeeds"`
	Values          map[string]any `yaml:"values" doc:"inline values, merged over the chart defaults and valuesFrom"`
	ValuesFrom      []ValuesSource `yaml:"valuesFrom" doc:"ordered values sources; later entries and values override earlier ones"`
	// Drift is how to compare, not what to deploy: not an input (hash).
	Drift *spec.Drift `yaml:"drift" json:"-" doc:"the drift policy of the release's objects: what a re-run with the same chart and values does with what changed in the cluster; adds to defaults.drift"`
}

// Auth holds basic-auth credentials for a chart repository or registry.
type Auth struct {
	Username string `yaml:"username" khook:"required" doc:"user name (for ECR: AWS)"`
	Password string `yaml:"password" khook:"required" doc:"password or token; pass it as ${VAR} from KHOOK_SECRET_*"`
}

// ValuesSource is one valuesFrom entry: exactly one of file or url.
type ValuesSource struct {
	_    struct{} `khook:"oneof=file,url"`
	File string   `yaml:"file" doc:"local values file, relative to the spec file's folder"`
	URL  string   `yaml:"url" schema:"url" doc:"HTTP(S) URL of a values file"`
}

// Kind describes helm: steps to the spec.
func (e *Executor) Kind() spec.StepKind {
	return spec.StepKind{Name: Type, Doc: "install or upgrade a chart release", Block: new(Helm)}
}

// ReleaseName is the release a helm step manages: release:, or the step name.
func (h *Helm) ReleaseName(step string) string {
	if h.Release != "" {
		return h.Release
	}
	return step
}

// ReleaseNamespace is the release's namespace (default "default").
func (h *Helm) ReleaseNamespace() string {
	if h.Namespace == "" {
		return "default"
	}
	return h.Namespace
}

// ChartVersion is the pinned version, inline or from version:, or "".
func (h *Helm) ChartVersion() string {
	if h.Version != "" {
		return h.Version
	}
	if ref, err := spec.ParseChart(h.Chart); err == nil {
		return ref.InlineVersion
	}
	return ""
}

// Check validates the release name, the chart source with its repo,
// version and credentials, and the values sources.
func (h *Helm) Check(c *spec.Check) {
	p := c.Path
	c.Namespace(p+".namespace", h.Namespace)
	c.SkipIf(p+".skipIf", h.SkipIf, SkipIfInstalled)
	c.Drift(p+".drift", h.Drift)
	h.checkRelease(c)
	if h.Auth != nil {
		c.Required(p+".auth", h.Auth)
	}
	if h.Chart == "" {
		return
	}
	ref, err := spec.ParseChart(h.Chart)
	if err != nil {
		c.Errorf(p+".chart", "%v", err)
		return
	}
	h.checkChart(c, ref)
	h.checkValuesFrom(c)
}

// checkRelease validates the release name: helm.release, else the
// step's name.
func (h *Helm) checkRelease(c *spec.Check) {
	release := h.Release
	releasePath := c.Path + ".release"
	if release == "" {
		release, releasePath = c.Step.Name, c.StepPath+".name"
	}
	if release != "" && (len(release) > 53 || !spec.IsDNSSubdomain(release)) {
		if h.Release == "" {
			c.Errorf(releasePath, "%s", spec.WithNote(fmt.Sprintf("the step name is the release name by default, and %q is not a valid Helm release name (lowercase DNS name, at most 53 characters): set helm.release", release), release))
		} else {
			c.Errorf(releasePath, "%s", spec.WithNote(fmt.Sprintf("%q is not a valid Helm release name (lowercase DNS name, at most 53 characters)", release), release))
		}
	}
}

// checkChart validates the chart ref against its version, repo and
// credentials.
func (h *Helm) checkChart(c *spec.Check, ref spec.ChartRef) {
	p := c.Path
	if ref.InlineVersion != "" && h.Version != "" {
		form := "name:version"
		if ref.Source == spec.ChartFromOCI {
			form = "an OCI :tag"
		}
		c.Errorf(p+".version", "the chart already pins its version with %s (%q): remove one of them", form, ref.InlineVersion)
	}
	if ref.Digest != "" && h.Version != "" {
		c.Errorf(p+".version", "the chart already pins a digest (@%s): remove version", ref.Digest)
	}
	hasUserinfo := false
	switch ref.Source {
	case spec.ChartFromRepo:
		if h.Repo == "" {
			c.Errorf(p, "repo is required for the bare chart name %q (or write a local path ./%s, or an oci:// reference)", ref.Name, ref.Name)
		} else if u := c.HTTPURL(p+".repo", h.Repo); u != nil && u.User != nil {
			hasUserinfo = true
		}
	case spec.ChartFromOCI:
		if h.Repo != "" {
			c.Errorf(p+".repo", "an oci:// chart carries its registry: remove repo")
		}
		if ref.HasUserinfo {
			hasUserinfo = true
			if ref.Username == "" || ref.Password == "" {
				c.Errorf(p+".chart", "URL credentials must be a full user:password@ pair (URL-encode special characters with ${VAR|urlquery})")
			}
		}
	case spec.ChartFromLocal:
		h.checkLocalChart(c, ref)
	}
	if hasUserinfo && h.Auth != nil {
		c.Errorf(p+".auth", "credentials are given twice: use either auth: or user:password@ in the URL, not both")
	}
}

// checkLocalChart validates a local chart path: no repo, version or
// auth, and the archive or directory there.
func (h *Helm) checkLocalChart(c *spec.Check, ref spec.ChartRef) {
	p := c.Path
	if h.Repo != "" {
		c.Errorf(p+".repo", "a local chart path takes no repo")
	}
	if h.Version != "" {
		c.Errorf(p+".version", "a local chart path already pins the chart: remove version")
	}
	if h.Auth != nil {
		c.Errorf(p+".auth", "a local chart path takes no auth")
	}
	if ref.Packaged {
		c.LocalFile(p+".chart", h.Chart, "chart archive")
	} else {
		localChartDir(c, p+".chart", h.Chart)
	}
}

// checkValuesFrom validates each valuesFrom entry: one file or url.
func (h *Helm) checkValuesFrom(c *spec.Check) {
	for i, src := range h.ValuesFrom {
		sp := c.Path + ".valuesFrom[" + strconv.Itoa(i) + "]"
		switch {
		case src.File != "" && src.URL != "":
			c.Errorf(sp, "a valuesFrom entry has exactly one of file or url, not both")
		case src.File != "":
			c.LocalMappingFile(sp+".file", src.File, "values file")
		case src.URL != "":
			c.HTTPURL(sp+".url", src.URL)
		default:
			c.Errorf(sp, "a valuesFrom entry needs one of file or url")
		}
	}
}

// localChartDir checks a local chart directory: there, a directory, with
// a Chart.yaml.
func localChartDir(c *spec.Check, path, p string) {
	fi, err := c.Stat(p)
	if err != nil {
		c.Errorf(path, "local chart %q: %s", p, spec.FSReason(err))
		return
	}
	if !fi.IsDir() {
		c.Errorf(path, "local chart %q is a file: a packaged chart ends in .tgz", p)
		return
	}
	if _, err := c.Stat(filepath.Join(p, "Chart.yaml")); err != nil {
		c.Errorf(path, "local chart %q has no Chart.yaml", p)
	}
}

// Summary says which chart becomes which release, and how.
func (h *Helm) Summary(st *spec.Step) string {
	chart := h.Chart
	ref, err := spec.ParseChart(h.Chart)
	if err == nil {
		switch ref.Source {
		case spec.ChartFromRepo:
			chart = ref.Name
		case spec.ChartFromOCI:
			chart = "oci://" + ref.Name
			if ref.Digest != "" {
				chart += "@" + ref.Digest
			}
		}
	}
	version := h.ChartVersion()
	if version == "" && (err != nil || ref.Source != spec.ChartFromLocal) && ref.Digest == "" {
		version = "latest"
	}
	head := "chart " + chart
	if version != "" {
		head += " " + version
	}
	if h.Repo != "" {
		head += " from " + h.Repo
	}
	head += " → release " + h.ReleaseName(st.Name) + " in " + h.ReleaseNamespace()
	w := []string{head}
	if h.CreateNamespace {
		w = append(w, "createNamespace")
	}
	if h.Atomic {
		w = append(w, "atomic")
	}
	if h.Wait {
		w = append(w, "wait")
	}
	if h.SkipIf != "" {
		w = append(w, "skipIf "+h.SkipIf)
	}
	if len(h.ValuesFrom) > 0 {
		srcs := make([]string, len(h.ValuesFrom))
		for i, v := range h.ValuesFrom {
			srcs[i] = v.File + v.URL
		}
		w = append(w, "valuesFrom "+strings.Join(srcs, " "))
	}
	if len(h.Values) > 0 {
		keys := make([]string, 0, len(h.Values))
		for k := range h.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w = append(w, "values for "+strings.Join(keys, " "))
	}
	return strings.Join(w, ", ")
}
