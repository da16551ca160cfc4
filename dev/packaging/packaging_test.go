package packaging

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/plugin"
	"sigs.k8s.io/yaml"

	"khook.io/core/testing/testenv"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// kubectl finds the real kubectl the tests run plugins through:
// $KHOOK_KUBECTL, else the one `make testbin` builds from k8s.io/kubernetes
// v1.35.4 (.cache/testbin/bin/kubectl), else one on PATH. "" when there is
// none.
func kubectl(t *testing.T) string {
	t.Helper()
	if k := os.Getenv("KHOOK_KUBECTL"); k != "" {
		return k
	}
	built := filepath.Join(repoRoot(t), ".cache", "testbin", "bin", "kubectl")
	if fi, err := os.Stat(built); err == nil && fi.Mode()&0o111 != 0 {
		return built
	}
	k, _ := exec.LookPath("kubectl")
	return k
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// makeVar is the default of `NAME ?= value` or `NAME := value` in a
// makefile.
func makeVar(t *testing.T, makefile []byte, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s*[?:]?=\s*(\S+)\s*$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatalf("no %s = ... in the makefile", name)
	}
	return string(m[1])
}

func TestArchivesAreReproducible(t *testing.T) {
	entries := WithDirs([]Entry{
		{Name: "bin/helm-khook", Mode: 0o755, Data: []byte("#!/bin/sh\necho hi\n")},
		{Name: "README.md", Mode: 0o644, Data: []byte("# khook\n")},
		{Name: "scripts/install-plugin.sh", Mode: 0o755, Data: []byte("true\n")},
	})
	wantNames := []string{"README.md", "bin/", "bin/helm-khook", "scripts/", "scripts/install-plugin.sh"}
	mtime := time.Date(2026, 11, 22, 4, 13, 0, 0, time.FixedZone("x", 3600))
	for _, f := range []Format{TarGz, Zip} {
		t.Run(string(f), func(t *testing.T) {
			var a, b bytes.Buffer
			if err := WriteArchive(&a, f, entries, mtime); err != nil {
				t.Fatal(err)
			}
			if err := WriteArchive(&b, f, entries, mtime); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatal("two writes of the same entries differ")
			}
			got, err := ReadArchive(a.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range got {
				names = append(names, e.Name)
				want := map[string]os.FileMode{"README.md": 0o644, "bin/": 0o755, "bin/helm-khook": 0o755, "scripts/": 0o755, "scripts/install-plugin.sh": 0o755}[e.Name]
				if e.Mode != want {
					t.Errorf("%s: mode %v, want %v", e.Name, e.Mode, want)
				}
			}
			if strings.Join(names, " ") != strings.Join(wantNames, " ") {
				t.Errorf("members %q, want %q (directories before their files)", names, wantNames)
			}
		})
	}
	// tar headers: root-owned, no names, the fixed mtime
	var buf bytes.Buffer
	if err := WriteArchive(&buf, TarGz, entries, mtime); err != nil {
		t.Fatal(err)
	}
	for _, h := range tarHeaders(t, buf.Bytes()) {
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(mtime.Truncate(time.Second)) {
			t.Errorf("%s: uid %d gid %d uname %q gname %q mtime %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
	}
}

func tarHeaders(t *testing.T, data []byte) []*tar.Header {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("gzip header: name %q mtime %v, want neither", gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	var hs []*tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hs
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
}

func TestVersions(t *testing.T) {
	for _, v := range []string{"v0.1.0", "v0.1.0-dev", "v1.2.3-rc.1+abc"} {
		if err := CheckVersion(v); err != nil {
			t.Error(err)
		}
		if err := krewVersion(v); err != nil {
			t.Error(err)
		}
	}
	for _, v := range []string{"0.1.0", "v0.1", "v01.1.0", "2a0d3a0-dirty", "v0.1.0-"} {
		if CheckVersion(v) == nil || krewVersion(v) == nil {
			t.Errorf("%q passed", v)
		}
	}
	y := []byte("name: khook\nversion: 0.1.0\nusage: x\n")
	if v, err := PluginVersion(y); err != nil || v != "0.1.0" {
		t.Errorf("PluginVersion = %q, %v", v, err)
	}
	out, err := SetPluginVersion(y, "0.1.0-dev")
	if err != nil || string(out) != "name: khook\nversion: 0.1.0-dev\nusage: x\n" {
		t.Errorf("SetPluginVersion = %q, %v", out, err)
	}
}

func TestChecksums(t *testing.T) {
	sums := map[string]string{"b.zip": SHA256([]byte("b")), "a.tar.gz": SHA256([]byte("a"))}
	var buf bytes.Buffer
	if err := WriteChecksums(&buf, sums); err != nil {
		t.Fatal(err)
	}
	want := SHA256([]byte("a")) + "  a.tar.gz\n" + SHA256([]byte("b")) + "  b.zip\n"
	if buf.String() != want {
		t.Errorf("checksums.txt:\n%s\nwant\n%s", buf.String(), want)
	}
	got, err := ReadChecksums(&buf)
	if err != nil || len(got) != 2 || got["b.zip"] != sums["b.zip"] {
		t.Errorf("ReadChecksums = %v, %v", got, err)
	}
}

// TestArchivesCarryTheLicense: every release archive carries the
// repository's LICENSE (Apache-2.0) at its root, byte for byte; a tree
// without a license file, or with two, packs nothing.
func TestArchivesCarryTheLicense(t *testing.T) {
	root := repoRoot(t)
	lic, err := License(root)
	if err != nil {
		t.Fatal(err)
	}
	if lic != "LICENSE" {
		t.Errorf("License = %q, want LICENSE", lic)
	}
	text := readFile(t, filepath.Join(root, lic))
	if !bytes.Contains(text, []byte("Apache License\n                           Version 2.0, January 2004")) {
		t.Errorf("%s is not the Apache License 2.0", lic)
	}
	for _, p := range Platforms {
		for _, plugin := range Plugins {
			entries, err := Contents(root, plugin, "v0.1.0", p, []byte("binary"))
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(entries, func(e Entry) bool { return e.Name == lic })
			if i < 0 {
				t.Errorf("%s: no %s in the archive", ArchiveName(plugin, "v0.1.0", p), lic)
				continue
			}
			if e := entries[i]; e.Mode != 0o644 || !bytes.Equal(e.Data, text) {
				t.Errorf("%s: %s has mode %v and %d bytes, want 0644 and the repository's %d", ArchiveName(plugin, "v0.1.0", p), lic, e.Mode, len(e.Data), len(text))
			}
		}
	}

	// a tree with the other files but no license, or two licenses
	tree := t.TempDir()
	for _, f := range []string{ReadmeFile, PluginYAML, PluginComplete, InstallScript, InstallScriptPS1, KubectlComplete} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tree, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, f), readFile(t, filepath.Join(root, f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, plugin := range Plugins {
		if _, err := Contents(tree, plugin, "v0.1.0", Platforms[0], []byte("binary")); err == nil || !strings.Contains(err.Error(), "no license file") {
			t.Errorf("%s without a license: %v, want an error", plugin, err)
		}
	}
	for _, f := range []string{"COPYING", "license.md"} {
		if err := os.WriteFile(filepath.Join(tree, f), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Contents(tree, KubectlPlugin, "v0.1.0", Platforms[0], []byte("binary")); err == nil || !strings.Contains(err.Error(), "2 license files") {
		t.Errorf("two licenses: %v, want an error", err)
	}
	if err := os.Remove(filepath.Join(tree, "COPYING")); err != nil {
		t.Fatal(err)
	}
	if lic, err := License(tree); err != nil || lic != "license.md" {
		t.Errorf("License = %q, %v; want license.md (krew's names, any case)", lic, err)
	}
}

// TestCheckKrewLicense: the validate-krew-manifest check finds a license
// file anywhere in the installed plugin, by krew's names in any case.
func TestCheckKrewLicense(t *testing.T) {
	for _, c := range []struct {
		files []string
		ok    bool
	}{
		{[]string{"kubectl-khook", "README.md", "LICENSE"}, true},
		{[]string{"kubectl-khook", "docs/Copying.txt"}, true},
		{[]string{"kubectl-khook", "README.md"}, false},
		{[]string{"kubectl-khook", "LICENSE.rst", "NOTICE"}, false},
	} {
		root := t.TempDir()
		for _, f := range c.files {
			name := filepath.Join(root, "store", "khook", "v0.1.0", filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := CheckKrewLicense(root); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok=%v", c.files, err, c.ok)
		}
	}
}

// TestPluginYAML loads plugin.yaml with helm 3's own loader (strict: an
// unknown field such as apiVersion fails there) and checks what helm 4 also
// insists on (strict semver) and what the release needs.
func TestPluginYAML(t *testing.T) {
	root := repoRoot(t)
	p, err := plugin.LoadDir(root)
	if err != nil {
		t.Fatalf("helm 3 does not load plugin.yaml: %v", err)
	}
	if p.Metadata.Name != "khook" {
		t.Errorf("name %q, want khook (helm khook)", p.Metadata.Name)
	}
	if p.Metadata.Command != "" || len(p.Metadata.Hooks) > 0 {
		t.Error("use platformCommand and platformHooks only (command and hooks are deprecated, and both together fail in helm 4)")
	}
	if err := CheckVersion("v" + p.Metadata.Version); err != nil || strings.HasPrefix(p.Metadata.Version, "v") {
		t.Errorf("version %q: helm 4 wants strict semver without a leading v", p.Metadata.Version)
	}
	if v, err := PluginVersion(readFile(t, filepath.Join(root, PluginYAML))); err != nil || v != p.Metadata.Version {
		t.Errorf("the version line the install hook and make read: %q, %v; helm reads %q", v, err, p.Metadata.Version)
	}

	// one command per platform, each the plugin's bin/ binary
	for _, env := range Platforms {
		var cmds []string
		for _, c := range p.Metadata.PlatformCommand {
			if c.OperatingSystem == env.OS && c.Architecture == env.Arch {
				cmds = append(cmds, c.Command)
			}
		}
		want := "$HELM_PLUGIN_DIR/bin/helm-khook"
		if env.OS == "windows" {
			want = `$HELM_PLUGIN_DIR\bin\helm-khook.exe`
		}
		if len(cmds) != 1 || cmds[0] != want {
			t.Errorf("platformCommand for %s: %q, want [%s]", env, cmds, want)
		}
	}
	if len(p.Metadata.PlatformCommand) != len(Platforms) {
		t.Errorf("%d platformCommand entries, want %d", len(p.Metadata.PlatformCommand), len(Platforms))
	}
	t.Setenv("HELM_PLUGIN_DIR", "/plugins/khook")
	main, _, err := p.PrepareCommand(nil)
	if err != nil || main != "/plugins/khook/bin/helm-khook" {
		t.Errorf("helm 3 runs %q (%v) here", main, err)
	}

	// install and update hooks on every OS (helm 4 fails an install when
	// none matches)
	for _, event := range []string{plugin.Install, plugin.Update} {
		for _, goos := range []string{"linux", "darwin", "windows"} {
			n := 0
			for _, c := range p.Metadata.PlatformHooks[event] {
				if c.OperatingSystem == goos && c.Architecture == "" {
					n++
					script := InstallScript
					if goos == "windows" {
						script = InstallScriptPS1
					}
					if last := c.Args[len(c.Args)-1]; filepath.ToSlash(strings.ReplaceAll(last, `\`, "/")) != "$HELM_PLUGIN_DIR/"+script {
						t.Errorf("%s hook on %s runs %q, want %s", event, goos, last, script)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d %s hooks for %s, want 1", n, event, goos)
			}
		}
	}
	for _, f := range []string{InstallScript, PluginComplete, KubectlComplete} {
		if fi, err := os.Stat(filepath.Join(root, f)); err != nil || !Executable(fi.Mode()) {
			t.Errorf("%s: want an executable file (%v)", f, err)
		}
	}
}

// TestReleaseSettingsAgree: the release URL and the helm versions are
// written in more than one place.
func TestReleaseSettingsAgree(t *testing.T) {
	root := repoRoot(t)
	mk := readFile(t, filepath.Join(root, "hack", "dist.mk"))
	url := makeVar(t, mk, "RELEASE_URL")
	for _, f := range []string{InstallScript, InstallScriptPS1} {
		if !bytes.Contains(readFile(t, filepath.Join(root, f)), []byte(url)) {
			t.Errorf("%s does not default to RELEASE_URL %s", f, url)
		}
	}
	m, err := ParseKrew(readFile(t, filepath.Join(root, "krew", "khook.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range m.Spec.Platforms {
		if !strings.HasPrefix(pl.URI, url+"/"+m.Spec.Version+"/") {
			t.Errorf("krew/khook.yaml: %s is not under %s/%s/", pl.URI, url, m.Spec.Version)
		}
	}
	if got, want := makeVar(t, mk, "HELM3_VERSION"), helm3Version; got != want {
		t.Errorf("dist.mk HELM3_VERSION %s, the tests use %s", got, want)
	}
	if got, want := makeVar(t, mk, "HELM4_VERSION"), helm4Version; got != want {
		t.Errorf("dist.mk HELM4_VERSION %s, the tests use %s", got, want)
	}
}

// TestCommittedKrewManifest: krew/khook.yaml is the manifest of the release
// plugin.yaml names, valid for krew, and exactly what the template renders
// from its version and sha256s (nobody edited it by hand).
func TestCommittedKrewManifest(t *testing.T) {
	root := repoRoot(t)
	if err := CheckGenerated(filepath.Join(root, "krew", "khook.yaml"), filepath.Join(root, "krew", "khook.yaml.tmpl")); err != nil {
		t.Fatal(err)
	}
	m, err := ParseKrew(readFile(t, filepath.Join(root, "krew", "khook.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	v, err := PluginVersion(readFile(t, filepath.Join(root, PluginYAML)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Spec.Version != "v"+v {
		t.Errorf("krew/khook.yaml is for %s, plugin.yaml names the release %s", m.Spec.Version, v)
	}
}

// goodManifest is a valid manifest for the rule tests.
func goodManifest(t *testing.T) *KrewPlugin {
	t.Helper()
	d := KrewData{Version: "v0.1.0"}
	for _, p := range Platforms {
		d.Platforms = append(d.Platforms, KrewPlatformData{
			OS: p.OS, Arch: p.Arch, URI: "https://example.com/" + ArchiveName(KubectlPlugin, "v0.1.0", p),
			SHA256: strings.Repeat("a", 64), Bin: BinaryPath(KubectlPlugin, p),
			Files: []KrewFile{{From: BinaryPath(KubectlPlugin, p), To: "."}, {From: "LICENSE", To: "."}},
		})
	}
	out, err := RenderKrew(readFile(t, filepath.Join(repoRoot(t), "krew", "khook.yaml.tmpl")), d)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseKrew(out)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestKrewRules(t *testing.T) {
	if err := ValidateKrew("khook", goodManifest(t)); err != nil {
		t.Fatalf("the template renders an invalid manifest: %v", err)
	}
	long := strings.Repeat("word ", 17) // 85 columns
	for _, c := range []struct {
		name   string
		change func(m *KrewPlugin)
		want   string
	}{
		{"apiVersion", func(m *KrewPlugin) { m.APIVersion = "krew.googlecontainertools.github.com/v1alpha1" }, "apiVersion"},
		{"kind", func(m *KrewPlugin) { m.Kind = "Plugins" }, "kind"},
		{"name", func(m *KrewPlugin) { m.Metadata.Name = "k-hook" }, `should be named "khook"`},
		{"version without v", func(m *KrewPlugin) { m.Spec.Version = "0.1.0" }, "not starting with 'v'"},
		{"version not semver", func(m *KrewPlugin) { m.Spec.Version = "v0.1" }, "spec.version"},
		{"short description lines", func(m *KrewPlugin) { m.Spec.ShortDescription = "a\nb" }, "line breaks"},
		{"short description length", func(m *KrewPlugin) { m.Spec.ShortDescription = long[:75] }, "shortDescription exceeds 70"},
		{"description length", func(m *KrewPlugin) { m.Spec.Description += long }, "description exceeds 80"},
		{"caveats length", func(m *KrewPlugin) { m.Spec.Caveats = long }, "caveats exceeds 80"},
		{"no platforms", func(m *KrewPlugin) { m.Spec.Platforms = nil }, "should have a platform"},
		{"sha256", func(m *KrewPlugin) { m.Spec.Platforms[0].Sha256 = strings.Repeat("A", 64) }, "`sha256` value"},
		{"uri", func(m *KrewPlugin) { m.Spec.Platforms[0].URI = "" }, "`uri` has to be set"},
		{"bin", func(m *KrewPlugin) { m.Spec.Platforms[0].Bin = "" }, "`bin` has to be set"},
		{"windows bin", func(m *KrewPlugin) { m.Spec.Platforms[4].Bin = "kubectl-khook" }, `want "kubectl-khook.exe"`},
		{"files empty", func(m *KrewPlugin) { m.Spec.Platforms[0].Files = []KrewFile{} }, "`files` has to be unspecified or non-empty"},
		{"files unclean", func(m *KrewPlugin) { m.Spec.Platforms[0].Files[0].To = "./" }, "not clean"},
		{"selector key", func(m *KrewPlugin) { m.Spec.Platforms[0].Selector.MatchLabels["cpu"] = "x" }, `key "cpu" not supported`},
		{"no selector", func(m *KrewPlugin) { m.Spec.Platforms[0].Selector = nil }, "nil selector"},
		{"overlap", func(m *KrewPlugin) { delete(m.Spec.Platforms[0].Selector.MatchLabels, "arch") }, "overlapping selectors"},
		{"unsupported platform", func(m *KrewPlugin) { m.Spec.Platforms[0].Selector.MatchLabels["os"] = "plan9" }, "doesn't match any supported platforms"},
		{"platform missing", func(m *KrewPlugin) { m.Spec.Platforms = m.Spec.Platforms[1:] }, "linux/amd64 is selected by 0"},
		{"no license", func(m *KrewPlugin) { m.Spec.Platforms[2].Files = m.Spec.Platforms[2].Files[:1] }, "spec.platforms[2] (darwin/amd64): no license file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := goodManifest(t)
			c.change(m)
			err := ValidateKrew("khook", m)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
	t.Run("file name", func(t *testing.T) {
		dir := t.TempDir()
		out, err := yaml.Marshal(goodManifest(t))
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"khook.yml": "expected manifest extension", "kubectl-khook.yaml": `should be named "kubectl-khook"`, "khook.yaml": ""} {
			f := filepath.Join(dir, name)
			if err := os.WriteFile(f, out, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ValidateKrewFile(f)
			if (want == "" && err != nil) || (want != "" && (err == nil || !strings.Contains(err.Error(), want))) {
				t.Errorf("%s: got %v, want %q", name, err, want)
			}
		}
	})
}

// TestProviderRelease: the provider's release file names are the
// registries' (no v before the version in file names, a v in the binary's),
// its zip holds only the binary and the license, and the committed
// terraform-registry-manifest.json passes CheckProviderManifest, which
// refuses anything but version 1 with protocol 6.0.
func TestProviderRelease(t *testing.T) {
	root := repoRoot(t)
	for _, c := range []struct {
		version        string
		p              Platform
		zip, bin, sums string
	}{
		{"v0.1.0", Platform{"linux", "amd64"}, "terraform-provider-khook_0.1.0_linux_amd64.zip", "terraform-provider-khook_v0.1.0", "terraform-provider-khook_0.1.0_SHA256SUMS"},
		{"v1.2.3-dev", Platform{"darwin", "arm64"}, "terraform-provider-khook_1.2.3-dev_darwin_arm64.zip", "terraform-provider-khook_v1.2.3-dev", "terraform-provider-khook_1.2.3-dev_SHA256SUMS"},
		{"v0.1.0", Platform{"windows", "amd64"}, "terraform-provider-khook_0.1.0_windows_amd64.zip", "terraform-provider-khook_v0.1.0.exe", "terraform-provider-khook_0.1.0_SHA256SUMS"},
	} {
		if got := ProviderArchiveName(c.version, c.p); got != c.zip {
			t.Errorf("ProviderArchiveName(%s, %s) = %s, want %s", c.version, c.p, got, c.zip)
		}
		if got := ProviderBinaryName(c.version, c.p); got != c.bin {
			t.Errorf("ProviderBinaryName(%s, %s) = %s, want %s", c.version, c.p, got, c.bin)
		}
		if got := ProviderSumsName(c.version); got != c.sums {
			t.Errorf("ProviderSumsName(%s) = %s, want %s", c.version, got, c.sums)
		}
		entries, err := ProviderContents(root, c.version, c.p, []byte("binary"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name+" "+e.Mode.String())
		}
		if want := []string{"LICENSE -rw-r--r--", c.bin + " -rwxr-xr-x"}; !slices.Equal(names, want) {
			t.Errorf("ProviderContents(%s, %s) = %q, want %q", c.version, c.p, names, want)
		}
	}
	if _, err := ProviderManifestData(root); err != nil {
		t.Errorf("the committed manifest: %v", err)
	}
	for _, c := range []struct {
		manifest string
		ok       bool
	}{
		{`{"version": 1, "metadata": {"protocol_versions": ["6.0"]}}`, true},
		{`{"version": 1, "metadata": {"protocol_versions": ["5.0"]}}`, false},
		{`{"version": 1, "metadata": {"protocol_versions": ["5.0", "6.0"]}}`, false},
		{`{"version": 2, "metadata": {"protocol_versions": ["6.0"]}}`, false},
		{`{"version": 1, "metadata": {"protocol_version": ["6.0"]}}`, false},
		{`{"version": 1}`, false},
		{`not json`, false},
	} {
		if err := CheckProviderManifest([]byte(c.manifest)); (err == nil) != c.ok {
			t.Errorf("CheckProviderManifest(%s) = %v, want ok %v", c.manifest, err, c.ok)
		}
	}
}
