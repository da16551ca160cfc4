package packaging

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

// krew's manifest identity.
const (
	KrewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	KrewKind       = "Plugin"
	KrewName       = "khook"
)

// krew's line limits (validate-krew-manifest).
const (
	krewShortDescriptionMax = 70
	krewLineMax             = 80
)

// KrewPlugin is a krew plugin manifest (krew's index.Plugin).
type KrewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec KrewSpec `json:"spec"`
}

// KrewSpec is a krew manifest's spec.
type KrewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Caveats          string         `json:"caveats"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one platform of a krew manifest.
type KrewPlatform struct {
	Selector *metav1.LabelSelector `json:"selector"`
	URI      string                `json:"uri"`
	Sha256   string                `json:"sha256"`
	Files    []KrewFile            `json:"files"`
	Bin      string                `json:"bin"`
}

// KrewFile is a krew file operation: archive path (or glob) From, moved to
// To in the install directory.
type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ParseKrew reads a manifest. Unknown fields are errors (krew ignores
// them; a typo here would silently drop a field).
func ParseKrew(data []byte) (*KrewPlugin, error) {
	var p KrewPlugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("krew manifest: %w", err)
	}
	return &p, nil
}

// KrewData is what the manifest template is rendered from; everything else
// in the manifest is the template's.
type KrewData struct {
	Version   string
	Platforms []KrewPlatformData
}

// KrewPlatformData is one platform of KrewData.
type KrewPlatformData struct {
	OS, Arch string
	URI      string
	SHA256   string
	Bin      string
	Files    []KrewFile
}

// KrewFiles are the file operations for the kubectl-khook archive of p:
// everything it carries (Contents), moved to the install directory's root.
func KrewFiles(entries []Entry) []KrewFile {
	var files []KrewFile
	for _, e := range entries {
		if !e.IsDir() {
			files = append(files, KrewFile{From: e.Name, To: "."})
		}
	}
	return files
}

// RenderKrew renders the manifest template with data.
func RenderKrew(tmpl []byte, data KrewData) ([]byte, error) {
	t, err := template.New("krew").Option("missingkey=error").Parse(string(tmpl))
	if err != nil {
		return nil, fmt.Errorf("krew template: %w", err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("krew template: %w", err)
	}
	return buf.Bytes(), nil
}

// KrewDataOf extracts the generated fields of a manifest: rendering the
// template with them must give the manifest back, byte for byte, when
// nobody edited it by hand.
func KrewDataOf(p *KrewPlugin) (KrewData, error) {
	d := KrewData{Version: p.Spec.Version}
	for i, pl := range p.Spec.Platforms {
		if pl.Selector == nil {
			return d, fmt.Errorf("spec.platforms[%d]: no selector", i)
		}
		d.Platforms = append(d.Platforms, KrewPlatformData{
			OS: pl.Selector.MatchLabels["os"], Arch: pl.Selector.MatchLabels["arch"],
			URI: pl.URI, SHA256: pl.Sha256, Bin: pl.Bin, Files: pl.Files,
		})
	}
	return d, nil
}

// krewSupported are the os/arch pairs krew's validator knows
// (validate-krew-manifest's allPlatforms).
var krewSupported = []Platform{
	{"windows", "386"}, {"windows", "amd64"}, {"windows", "arm64"},
	{"linux", "386"}, {"linux", "amd64"}, {"linux", "arm"}, {"linux", "arm64"}, {"linux", "ppc64le"},
	{"darwin", "386"}, {"darwin", "amd64"}, {"darwin", "arm64"},
}

var (
	krewSafeName   = regexp.MustCompile(`^[\w-]+$`)
	krewSHA256     = regexp.MustCompile(`^[a-f0-9]{64}$`)
	windowsDevices = []string{"CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5",
		"COM6", "COM7", "COM8", "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9"}
)

// ValidateKrewFile checks a manifest file the way krew's
// validate-krew-manifest does, without installing (see KrewInstall), plus
// khook's own rules: the name comes from the file name; structural
// validation (krew's ValidatePlugin); line limits, which krew only warns
// about, are errors here; every platform's selector matches a platform
// krew supports and no two overlap; and each of khook's six platforms is
// selected exactly once, with the .exe binary on Windows and, when it lists
// files, a license file among them.
func ValidateKrewFile(file string) (*KrewPlugin, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(file)
	if ext := filepath.Ext(base); ext != ".yaml" {
		return nil, fmt.Errorf("%s: expected manifest extension %q but found %q", file, ".yaml", ext)
	}
	p, err := ParseKrew(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := ValidateKrew(strings.TrimSuffix(base, ".yaml"), p); err != nil {
		return p, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// ValidateKrew checks manifest p named name (see ValidateKrewFile) and
// returns every problem found.
func ValidateKrew(name string, p *KrewPlugin) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// krew's ValidatePlugin
	if p.APIVersion != KrewAPIVersion {
		bad("apiVersion is %q, want %q", p.APIVersion, KrewAPIVersion)
	}
	if p.Kind != KrewKind {
		bad("kind is %q, want %q", p.Kind, KrewKind)
	}
	if !krewSafeName.MatchString(name) || slices.ContainsFunc(windowsDevices, func(d string) bool { return strings.EqualFold(d, name) }) {
		bad("the plugin name %q is not allowed", name)
	}
	if p.Metadata.Name != name {
		bad("plugin should be named %q (its file name), not %q", name, p.Metadata.Name)
	}
	if p.Spec.ShortDescription == "" {
		bad("should have a short description")
	}
	if strings.ContainsAny(p.Spec.ShortDescription, "\r\n") {
		bad("should not have line breaks in short description")
	}
	if len(p.Spec.Platforms) == 0 {
		bad("should have a platform specified")
	}
	if err := krewVersion(p.Spec.Version); err != nil {
		bad("spec.version: %w", err)
	}
	for i, pl := range p.Spec.Platforms {
		if err := krewPlatform(pl); err != nil {
			bad("spec.platforms[%d] is badly constructed: %w", i, err)
		}
	}
	if len(errs) > 0 { // the rest needs well-formed selectors
		return errors.Join(errs...)
	}

	// validate-krew-manifest: line limits (warnings there)
	for _, f := range []struct {
		field, text string
		max         int
	}{
		{"shortDescription", p.Spec.ShortDescription, krewShortDescriptionMax},
		{"description", p.Spec.Description, krewLineMax},
		{"caveats", p.Spec.Caveats, krewLineMax},
	} {
		if line := longLine(f.text, f.max); line != "" {
			bad("line length in spec.%s exceeds %d characters: %q", f.field, f.max, line)
		}
	}
	if p.Spec.Homepage == "" {
		bad("spec.homepage is empty")
	}
	// validate-krew-manifest: every selector matches a supported platform,
	// and no supported platform matches two
	for i, pl := range p.Spec.Platforms {
		if len(matching(pl.Selector, krewSupported)) == 0 {
			bad("spec.platforms[%d]'s selector (%v) doesn't match any supported platforms", i, pl.Selector)
		}
	}
	for _, env := range krewSupported {
		if idx := selecting(p.Spec.Platforms, env); len(idx) > 1 {
			bad("multiple spec.platforms (at indexes %v) have overlapping selectors that select %s", idx, env)
		}
	}
	// khook: its six platforms, once each, with the right binary
	for _, env := range Platforms {
		idx := selecting(p.Spec.Platforms, env)
		if len(idx) != 1 {
			bad("platform %s is selected by %d spec.platforms, want exactly 1", env, len(idx))
			continue
		}
		if want := BinaryPath(KubectlPlugin, env); p.Spec.Platforms[idx[0]].Bin != want {
			bad("spec.platforms[%d] (%s): bin is %q, want %q", idx[0], env, p.Spec.Platforms[idx[0]].Bin, want)
		}
		// validate-krew-manifest wants a license among the installed files;
		// without files (everything is installed) or with a glob, the
		// archive decides: KrewInstall and CheckKrewLicense check that
		mayInstallLicense := func(f KrewFile) bool { return IsLicenseFile(f.From) || strings.ContainsAny(f.From, "*?[") }
		if files := p.Spec.Platforms[idx[0]].Files; files != nil && !slices.ContainsFunc(files, mayInstallLicense) {
			bad("spec.platforms[%d] (%s): no license file (LICENSE) among files: krew-index's validate-krew-manifest requires one installed", idx[0], env)
		}
	}
	return errors.Join(errs...)
}

// krewVersion is krew's semver.Parse: a leading v, then semver as
// apimachinery parses it.
func krewVersion(v string) error {
	if v == "" {
		return errors.New("should have a version specified")
	}
	if !strings.HasPrefix(v, "v") {
		return fmt.Errorf("version string %q not starting with 'v'", v)
	}
	if _, err := k8sversion.ParseSemantic(v); err != nil {
		return err
	}
	return CheckVersion(v)
}

// krewPlatform is krew's validatePlatform, plus the clean `to` paths its
// installer insists on.
func krewPlatform(p KrewPlatform) error {
	switch {
	case p.URI == "":
		return errors.New("`uri` has to be set")
	case p.Sha256 == "":
		return errors.New("`sha256` sum has to be set")
	case !krewSHA256.MatchString(p.Sha256):
		return fmt.Errorf("`sha256` value %s is not valid, must match pattern %s", p.Sha256, krewSHA256)
	case p.Bin == "":
		return errors.New("`bin` has to be set")
	}
	if p.Files != nil && len(p.Files) == 0 {
		return errors.New("`files` has to be unspecified or non-empty")
	}
	for _, f := range p.Files {
		switch {
		case f.From == "":
			return errors.New("`files`: `from` field has to be set")
		case f.To == "":
			return errors.New("`files`: `to` field has to be set")
		case f.To != filepath.Clean(f.To):
			return fmt.Errorf("`files`: the path %q is not clean", f.To)
		}
	}
	sel := p.Selector
	if sel == nil {
		return errors.New("nil selector is not supported")
	}
	if sel.MatchLabels == nil && len(sel.MatchExpressions) == 0 {
		return errors.New("empty selector is not supported")
	}
	for k := range sel.MatchLabels {
		if k != "os" && k != "arch" {
			return fmt.Errorf("selector key %q not supported", k)
		}
	}
	for _, e := range sel.MatchExpressions {
		if e.Key != "os" && e.Key != "arch" {
			return fmt.Errorf("selector key %q not supported", e.Key)
		}
	}
	if sel.MatchLabels != nil && len(sel.MatchLabels) == 0 {
		return errors.New("`matchLabels` specified but empty")
	}
	if sel.MatchExpressions != nil && len(sel.MatchExpressions) == 0 {
		return errors.New("`matchExpressions` specified but empty")
	}
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return fmt.Errorf("invalid selector: %w", err)
	}
	return nil
}

// longLine returns the first line of s longer than max that has a space in
// it (krew lets a single long word through), or "".
func longLine(s string, max int) string {
	for _, line := range strings.Split(s, "\n") {
		if len(line) > max && strings.Contains(strings.TrimSpace(line), " ") {
			return line
		}
	}
	return ""
}

func selectorMatches(sel *metav1.LabelSelector, env Platform) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set{"os": env.OS, "arch": env.Arch})
}

func matching(sel *metav1.LabelSelector, envs []Platform) []Platform {
	var out []Platform
	for _, env := range envs {
		if selectorMatches(sel, env) {
			out = append(out, env)
		}
	}
	return out
}

func selecting(platforms []KrewPlatform, env Platform) []int {
	var idx []int
	for i, pl := range platforms {
		if selectorMatches(pl.Selector, env) {
			idx = append(idx, i)
		}
	}
	return idx
}

// PlatformOf returns the platform of khook's six that p selects.
func PlatformOf(p KrewPlatform) (Platform, error) {
	m := matching(p.Selector, Platforms)
	if len(m) != 1 {
		return Platform{}, fmt.Errorf("selector %v selects %d of khook's platforms, want 1", p.Selector, len(m))
	}
	return m[0], nil
}

// CheckGenerated checks a committed manifest: valid (ValidateKrewFile),
// and byte for byte what the template renders from its generated fields
// (version, URIs, sha256s, bin, files), so that nothing in it was edited
// by hand.
func CheckGenerated(manifestFile, templateFile string) error {
	p, err := ValidateKrewFile(manifestFile)
	if err != nil {
		return err
	}
	tmpl, err := os.ReadFile(templateFile)
	if err != nil {
		return err
	}
	data, err := KrewDataOf(p)
	if err != nil {
		return err
	}
	want, err := RenderKrew(tmpl, data)
	if err != nil {
		return err
	}
	got, err := os.ReadFile(manifestFile)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s differs from what %s renders from its version and sha256s: it was edited by hand, or the template changed since (regenerate it with make krew-update at the next release)", manifestFile, templateFile)
	}
	return nil
}
