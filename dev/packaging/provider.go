package packaging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The Terraform/OpenTofu provider's release, in the layout the Terraform
// and OpenTofu registries (and goreleaser's provider scaffolding) use:
// per platform terraform-provider-khook_<version>_<os>_<arch>.zip holding
// terraform-provider-khook_v<version>, then ..._SHA256SUMS over the zips
// and ..._manifest.json (the committed terraform-registry-manifest.json).
// <version> has no leading v there. Signing the SHA256SUMS is a release
// step outside make dist (docs/terraform.md).
const (
	ProviderName = "terraform-provider-khook"
	// ProviderManifest is the committed registry manifest, relative to the
	// repository root.
	ProviderManifest = ProviderName + "/terraform-registry-manifest.json"
	// ProviderProtocol is the plugin protocol the provider speaks
	// (terraform-plugin-framework, protocol 6).
	ProviderProtocol = "6.0"
)

// registryVersion is version without its leading v, as the registries
// name files.
func registryVersion(version string) string { return strings.TrimPrefix(version, "v") }

// ProviderArchiveName is the provider's zip for p:
// terraform-provider-khook_0.1.0_linux_amd64.zip for v0.1.0.
func ProviderArchiveName(version string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s.zip", ProviderName, registryVersion(version), p.ID())
}

// ProviderBinaryName is the binary in the provider's zip:
// terraform-provider-khook_v0.1.0 (.exe on Windows), the name Terraform's
// plugin discovery expects.
func ProviderBinaryName(version string, p Platform) string {
	return ProviderName + "_v" + registryVersion(version) + p.Exe()
}

// ProviderSumsName is the provider's checksum file, the one a release's
// GPG signature (..._SHA256SUMS.sig) signs.
func ProviderSumsName(version string) string {
	return ProviderName + "_" + registryVersion(version) + "_SHA256SUMS"
}

// ProviderManifestName is the registry manifest's release file name.
func ProviderManifestName(version string) string {
	return ProviderName + "_" + registryVersion(version) + "_manifest.json"
}

// ProviderContents lists the provider's zip for p: the binary and the
// license, nothing else (the registry's layout; Terraform unpacks every
// member into its plugin folder).
func ProviderContents(root, version string, p Platform, binary []byte) ([]Entry, error) {
	lic, err := License(root)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, lic))
	if err != nil {
		return nil, err
	}
	return WithDirs([]Entry{
		{Name: ProviderBinaryName(version, p), Mode: 0o755, Data: binary},
		{Name: lic, Mode: 0o644, Data: data},
	}), nil
}

// CheckProviderManifest checks terraform-registry-manifest.json: version 1,
// and exactly the protocol the provider speaks.
func CheckProviderManifest(data []byte) error {
	var m struct {
		Version  int `json:"version"`
		Metadata struct {
			ProtocolVersions []string `json:"protocol_versions"`
		} `json:"metadata"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("%s: %w", ProviderManifest, err)
	}
	if m.Version != 1 {
		return fmt.Errorf("%s: version %d, want 1", ProviderManifest, m.Version)
	}
	if !slices.Equal(m.Metadata.ProtocolVersions, []string{ProviderProtocol}) {
		return fmt.Errorf("%s: protocol_versions %q, want [%q] (terraform-plugin-framework)", ProviderManifest, m.Metadata.ProtocolVersions, ProviderProtocol)
	}
	return nil
}

// ProviderManifestData reads and checks the committed registry manifest.
func ProviderManifestData(root string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(ProviderManifest)))
	if err != nil {
		return nil, err
	}
	if err := CheckProviderManifest(data); err != nil {
		return nil, err
	}
	return data, nil
}
