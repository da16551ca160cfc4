package packaging

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Repository files the archives carry, relative to the repository root.
const (
	PluginYAML        = "plugin.yaml"
	PluginComplete    = "plugin.complete"
	InstallScript     = "scripts/install-plugin.sh"
	InstallScriptPS1  = "scripts/install-plugin.ps1"
	KubectlComplete   = "scripts/kubectl_complete-khook"
	ReadmeFile        = "README.md"
	KubectlCompletion = "kubectl_complete-khook" // its name in the archive
)

// licenseNames are the file names krew-index's validate-krew-manifest
// accepts as a plugin's license, compared without case: after installing
// each platform it looks for one among the installed files.
var licenseNames = []string{"license", "license.txt", "license.md", "licenses", "licenses.txt", "licenses.md", "copying", "copying.txt"}

// IsLicenseFile reports whether the base of the slash-separated path name
// is a license file to krew (licenseNames).
func IsLicenseFile(name string) bool {
	return slices.Contains(licenseNames, strings.ToLower(path.Base(name)))
}

// License returns the name of the repository's license file (LICENSE),
// which every release archive carries. It is an error when root has none,
// or more than one: krew-index refuses a plugin whose archive has no
// license, and two would leave it unclear which one applies.
func License(root string) (string, error) {
	dir, err := os.ReadDir(root)
	if err != nil {
		return "", err
	}
	var found []string
	for _, e := range dir {
		if e.Type().IsRegular() && IsLicenseFile(e.Name()) {
			found = append(found, e.Name())
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no license file (LICENSE) in %s: every release archive must carry one (krew-index requires it)", root)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%d license files in %s (%s): want exactly one", len(found), root, strings.Join(found, ", "))
}

// BinaryPath is where plugin's binary for p sits in its archive: at the
// root for kubectl-khook (krew's bin), in bin/ for helm-khook (the helm
// plugin layout, as in the working tree after `make build`).
func BinaryPath(plugin string, p Platform) string {
	if plugin == HelmPlugin {
		return "bin/" + plugin + p.Exe()
	}
	return plugin + p.Exe()
}

// Contents lists what plugin's archive for p carries: the binary, the
// README and license, and for helm-khook the plugin files, with
// plugin.yaml's version set to version (without its v). root is the
// repository root.
func Contents(root, plugin, version string, p Platform, binary []byte) ([]Entry, error) {
	file := func(name string, mode fs.FileMode) (Entry, error) {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return Entry{}, err
		}
		return Entry{Name: filepath.ToSlash(name), Mode: mode, Data: data}, nil
	}
	entries := []Entry{{Name: BinaryPath(plugin, p), Mode: 0o755, Data: binary}}
	add := func(name, as string, mode fs.FileMode) error {
		e, err := file(name, mode)
		if err != nil {
			return err
		}
		if as != "" {
			e.Name = as
		}
		entries = append(entries, e)
		return nil
	}
	if err := add(ReadmeFile, "", 0o644); err != nil {
		return nil, err
	}
	lic, err := License(root)
	if err != nil {
		return nil, err
	}
	if err := add(lic, "", 0o644); err != nil {
		return nil, err
	}
	switch plugin {
	case KubectlPlugin:
		if p.OS != "windows" {
			if err := add(KubectlComplete, KubectlCompletion, 0o755); err != nil {
				return nil, err
			}
		}
	case HelmPlugin:
		manifest, err := os.ReadFile(filepath.Join(root, PluginYAML))
		if err != nil {
			return nil, err
		}
		manifest, err = SetPluginVersion(manifest, strings.TrimPrefix(version, "v"))
		if err != nil {
			return nil, err
		}
		entries = append(entries, Entry{Name: PluginYAML, Mode: 0o644, Data: manifest})
		if err := add(InstallScript, "", 0o755); err != nil {
			return nil, err
		}
		if err := add(InstallScriptPS1, "", 0o644); err != nil {
			return nil, err
		}
		if p.OS != "windows" {
			if err := add(PluginComplete, "", 0o755); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("unknown plugin %q", plugin)
	}
	return WithDirs(entries), nil
}

var pluginVersionRE = regexp.MustCompile(`(?m)^version:[ \t]*"?([^"\s]*)"?[ \t]*$`)

// PluginVersion is plugin.yaml's version (semver without a leading v).
func PluginVersion(manifest []byte) (string, error) {
	m := pluginVersionRE.FindAllSubmatch(manifest, -1)
	if len(m) != 1 || len(m[0][1]) == 0 {
		return "", errors.New("plugin.yaml: want exactly one top-level `version: X.Y.Z` line")
	}
	return string(m[0][1]), nil
}

// SetPluginVersion rewrites plugin.yaml's version line.
func SetPluginVersion(manifest []byte, version string) ([]byte, error) {
	if _, err := PluginVersion(manifest); err != nil {
		return nil, err
	}
	return pluginVersionRE.ReplaceAll(manifest, []byte("version: "+version)), nil
}

// SHA256 is the hex sha256 of data.
func SHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// WriteChecksums writes sums (file name to hex sha256) in sha256sum's
// format, sorted by name: `sha256sum -c checksums.txt` checks them.
func WriteChecksums(w io.Writer, sums map[string]string) error {
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if _, err := fmt.Fprintf(w, "%s  %s\n", sums[n], n); err != nil {
			return err
		}
	}
	return nil
}

var checksumLineRE = regexp.MustCompile(`^([0-9a-f]{64}) [ *](\S+)$`)

// ReadChecksums parses a sha256sum file.
func ReadChecksums(r io.Reader) (map[string]string, error) {
	sums := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		m := checksumLineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			return nil, fmt.Errorf("checksums line %d: not `<sha256>  <file>`: %q", n, sc.Text())
		}
		sums[m[2]] = m[1]
	}
	return sums, sc.Err()
}
