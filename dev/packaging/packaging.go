// Package packaging builds and checks khook's release artifacts: the twelve
// archives (two plugins on six platforms), checksums.txt and the krew
// manifest. dev/cmd/khook-dist drives it from hack/dist.mk (`make dist`,
// `make krew`); the tests check the results the way krew and helm use them.
// See docs/plugins.md.
package packaging

import (
	"fmt"
	"regexp"
	"strings"
)

// The two plugin binaries.
const (
	KubectlPlugin = "kubectl-khook"
	HelmPlugin    = "helm-khook"
)

// Plugins are the binaries every platform ships, in archive order.
var Plugins = []string{KubectlPlugin, HelmPlugin}

// Platform is one os/arch pair, in Go's and krew's names (they agree for
// the six khook ships).
type Platform struct {
	OS   string
	Arch string
}

// Platforms are the six platforms khook ships for.
var Platforms = []Platform{
	{"linux", "amd64"},
	{"linux", "arm64"},
	{"darwin", "amd64"},
	{"darwin", "arm64"},
	{"windows", "amd64"},
	{"windows", "arm64"},
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ID is the platform as it appears in file names: linux_amd64.
func (p Platform) ID() string { return p.OS + "_" + p.Arch }

// Exe is the executable suffix: ".exe" on Windows.
func (p Platform) Exe() string {
	if p.OS == "windows" {
		return ".exe"
	}
	return ""
}

// Format is the archive format: zip on Windows, where it opens without
// extra tools, tar.gz elsewhere, where it keeps the executable bit.
func (p Platform) Format() Format {
	if p.OS == "windows" {
		return Zip
	}
	return TarGz
}

// ParsePlatform parses "linux/amd64" or "linux_amd64".
func ParsePlatform(s string) (Platform, error) {
	for _, p := range Platforms {
		if s == p.String() || s == p.ID() {
			return p, nil
		}
	}
	return Platform{}, fmt.Errorf("unknown platform %q (want one of %s)", s, platformList())
}

func platformList() string {
	names := make([]string, len(Platforms))
	for i, p := range Platforms {
		names[i] = p.String()
	}
	return strings.Join(names, ", ")
}

// ArchiveName is the release file of plugin for p at version (with its
// leading v): kubectl-khook_v0.1.0_linux_amd64.tar.gz.
func ArchiveName(plugin, version string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s%s", plugin, version, p.ID(), p.Format().Ext())
}

// semverRE is semver 2.0.0 with a leading v, as krew wants spec.version.
var semverRE = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// CheckVersion reports whether v is a release version: semver with a
// leading v (v0.1.0, v0.1.0-dev).
func CheckVersion(v string) error {
	if !semverRE.MatchString(v) {
		return fmt.Errorf("version %q is not semver with a leading v (like v0.1.0 or v0.1.0-dev)", v)
	}
	return nil
}
