package packaging

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// distDir is the release `make dist` built (and `make krew` for the
// manifest): KHOOK_DIST, set by make test-dist.
func distDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KHOOK_DIST")
	if dir == "" {
		t.Skip("KHOOK_DIST is not set: `make test-dist` builds the release and runs this")
	}
	return dir
}

// distPlatforms are the platforms dist holds: KHOOK_DIST_PLATFORMS
// (<os>_<arch>, space-separated; `make test-dist-host` sets this machine's
// own), or all six.
func distPlatforms(t *testing.T) []Platform {
	t.Helper()
	ids := strings.Fields(os.Getenv("KHOOK_DIST_PLATFORMS"))
	if len(ids) == 0 {
		return Platforms
	}
	var ps []Platform
	for _, id := range ids {
		p, err := ParsePlatform(id)
		if err != nil {
			t.Fatalf("KHOOK_DIST_PLATFORMS: %v", err)
		}
		ps = append(ps, p)
	}
	return ps
}

// distVersion is the version the archives in dist carry.
func distVersion(t *testing.T, dist string, p Platform) string {
	t.Helper()
	suffix := "_" + p.ID() + "." + string(p.Format())
	m, err := filepath.Glob(filepath.Join(dist, KubectlPlugin+"_v*"+suffix))
	if err != nil || len(m) != 1 {
		t.Fatalf("want one kubectl-khook %s archive in %s, found %q (%v)", p, dist, m, err)
	}
	v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), KubectlPlugin+"_"), suffix)
	if err := CheckVersion(v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDistArchives checks `make dist`: the eighteen archives (three per
// platform of distPlatforms), checksums.txt and the Terraform provider's
// registry files (SHA256SUMS, manifest.json), what each carries and with
// which modes, and the binaries in them: built for their platform, static,
// stripped, carrying the version; the binaries of this machine's platform
// are unpacked and run.
func TestDistArchives(t *testing.T) {
	dist := distDir(t)
	root := repoRoot(t)
	platforms := distPlatforms(t)
	version := distVersion(t, dist, platforms[0])
	f, err := os.Open(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sums, err := ReadChecksums(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	var want, wantProvider []string
	for _, p := range platforms {
		for _, plugin := range Plugins {
			want = append(want, ArchiveName(plugin, version, p))
		}
		wantProvider = append(wantProvider, ProviderArchiveName(version, p))
	}
	want = append(want, wantProvider...)
	var found []string
	for _, pattern := range []string{"*.tar.gz", "*.zip"} {
		m, _ := filepath.Glob(filepath.Join(dist, pattern))
		for _, f := range m {
			found = append(found, filepath.Base(f))
		}
	}
	var listed []string
	for n := range sums {
		listed = append(listed, n)
	}
	slices.Sort(want)
	slices.Sort(found)
	slices.Sort(listed)
	if !slices.Equal(found, want) || !slices.Equal(listed, want) {
		t.Fatalf("archives %q\nchecksums.txt %q\nwant %q", found, listed, want)
	}

	for _, p := range platforms {
		for _, plugin := range Plugins {
			name := ArchiveName(plugin, version, p)
			t.Run(name, func(t *testing.T) {
				data := readFile(t, filepath.Join(dist, name))
				if got := SHA256(data); got != sums[name] {
					t.Fatalf("sha256 %s, checksums.txt says %s", got, sums[name])
				}
				entries, err := ReadArchive(data)
				if err != nil {
					t.Fatal(err)
				}
				members := map[string]Entry{}
				for _, e := range entries {
					members[e.Name] = e
				}
				wantFiles := []string{BinaryPath(plugin, p), ReadmeFile}
				if plugin == HelmPlugin {
					wantFiles = append(wantFiles, PluginYAML, InstallScript, InstallScriptPS1)
				}
				lic, err := License(root)
				if err != nil {
					t.Fatal(err)
				}
				wantFiles = append(wantFiles, lic)
				for _, f := range wantFiles {
					if _, ok := members[f]; !ok {
						t.Errorf("no %s in the archive", f)
					}
				}
				bin := members[BinaryPath(plugin, p)]
				if !Executable(bin.Mode) {
					t.Errorf("%s: mode %v, not executable", bin.Name, bin.Mode)
				}
				if plugin == HelmPlugin {
					if v, err := PluginVersion(members[PluginYAML].Data); err != nil || "v"+v != version {
						t.Errorf("plugin.yaml version %q (%v), want %s", v, err, version)
					}
				}
				if p.Format() == TarGz {
					var mtime time.Time
					for i, h := range tarHeaders(t, data) {
						if i == 0 {
							mtime = h.ModTime
						}
						if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(mtime) {
							t.Errorf("%s: uid %d gid %d uname %q gname %q mtime %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
						}
					}
				}
				if err := checkBinary(bin.Data, p); err != nil {
					t.Error(err)
				}
				if !bytes.Contains(bin.Data, []byte(version)) {
					t.Errorf("the binary does not carry its version %s", version)
				}
			})
		}
	}

	// the provider's registry files: a zip per platform holding only
	// terraform-provider-khook_v<version> and the license, the committed
	// manifest, and SHA256SUMS over exactly those
	t.Run(ProviderSumsName(version), func(t *testing.T) { checkProviderRelease(t, dist, root, version, platforms, sums) })

	// this machine's binaries, unpacked from their archives, run and say
	// the release version
	t.Run("run", func(t *testing.T) {
		host, err := ParsePlatform(runtime.GOOS + "_" + runtime.GOARCH)
		if err != nil || !slices.Contains(platforms, host) {
			t.Skipf("this machine (%s/%s) is none of the platforms in dist: no binary to run here", runtime.GOOS, runtime.GOARCH)
		}
		for _, plugin := range Plugins {
			entries, err := ReadArchive(readFile(t, filepath.Join(dist, ArchiveName(plugin, version, host))))
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(entries, func(e Entry) bool { return e.Name == BinaryPath(plugin, host) })
			if i < 0 {
				t.Fatalf("%s: no %s", plugin, BinaryPath(plugin, host))
			}
			exe := filepath.Join(t.TempDir(), filepath.Base(entries[i].Name))
			if err := os.WriteFile(exe, entries[i].Data, entries[i].Mode.Perm()); err != nil {
				t.Fatal(err)
			}
			out := run(t, []string{"HOME=" + t.TempDir()}, exe, "version")
			if !strings.Contains(out, " "+version+"\n") || !strings.Contains(out, "platform: "+host.String()+"\n") {
				t.Errorf("%s version:\n%s\nwant %s on %s", plugin, out, version, host)
			}
		}
		// the provider, run outside Terraform, starts and says it is a
		// plugin (go-plugin's refusal without Terraform's handshake)
		entries, err := ReadArchive(readFile(t, filepath.Join(dist, ProviderArchiveName(version, host))))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(entries, func(e Entry) bool { return e.Name == ProviderBinaryName(version, host) })
		if i < 0 {
			t.Fatalf("no %s in the provider's zip", ProviderBinaryName(version, host))
		}
		exe := filepath.Join(t.TempDir(), entries[i].Name)
		if err := os.WriteFile(exe, entries[i].Data, entries[i].Mode.Perm()); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(exe).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "This binary is a plugin") {
			t.Errorf("%s outside Terraform: %v\n%s\nwant go-plugin's \"This binary is a plugin\" refusal", entries[i].Name, err, out)
		}
	})

	// packing again gives the same bytes (the binaries' reproducibility is
	// make dist-repro's: a second full build)
	t.Run("repack", func(t *testing.T) {
		for _, c := range []struct {
			plugin string
			p      Platform
		}{{KubectlPlugin, platforms[0]}, {HelmPlugin, platforms[0]}, {HelmPlugin, platforms[len(platforms)-1]}} {
			name := ArchiveName(c.plugin, version, c.p)
			old := readFile(t, filepath.Join(dist, name))
			entries, err := ReadArchive(old)
			if err != nil {
				t.Fatal(err)
			}
			binary := readFile(t, filepath.Join(dist, "bin", c.p.ID(), c.plugin+c.p.Exe()))
			again, err := Contents(root, c.plugin, version, c.p, binary)
			if err != nil {
				t.Fatal(err)
			}
			if len(again) != len(entries) {
				t.Fatalf("%s: %d members now, %d in dist (stale dist?)", name, len(again), len(entries))
			}
			var buf bytes.Buffer
			if err := WriteArchive(&buf, c.p.Format(), again, archiveTime(t, old, c.p)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), old) {
				t.Errorf("%s: packing the same files again gives other bytes", name)
			}
		}
		p := platforms[len(platforms)-1]
		name := ProviderArchiveName(version, p)
		old := readFile(t, filepath.Join(dist, name))
		binary := readFile(t, filepath.Join(dist, "bin", p.ID(), ProviderName+p.Exe()))
		again, err := ProviderContents(root, version, p, binary)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteArchive(&buf, Zip, again, archiveTime(t, old, Platform{OS: "windows"})); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), old) {
			t.Errorf("%s: packing the same files again gives other bytes", name)
		}
	})
}

// checkProviderRelease checks the provider's release files in dist: each
// platform's zip (sha256 as checksums.txt says, exactly the binary named
// as Terraform expects and the license, the binary built for its
// platform and carrying the version), the manifest (the committed one,
// protocol 6) and SHA256SUMS (the zips and the manifest, nothing else).
func checkProviderRelease(t *testing.T, dist, root, version string, platforms []Platform, sums map[string]string) {
	t.Helper()
	lic, err := License(root)
	if err != nil {
		t.Fatal(err)
	}
	manifest := readFile(t, filepath.Join(dist, ProviderManifestName(version)))
	if committed := readFile(t, filepath.Join(root, ProviderManifest)); !bytes.Equal(manifest, committed) {
		t.Errorf("%s differs from %s", ProviderManifestName(version), ProviderManifest)
	}
	if err := CheckProviderManifest(manifest); err != nil {
		t.Error(err)
	}
	f, err := os.Open(filepath.Join(dist, ProviderSumsName(version)))
	if err != nil {
		t.Fatal(err)
	}
	provSums, err := ReadChecksums(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ProviderManifestName(version): SHA256(manifest)}
	for _, p := range platforms {
		name := ProviderArchiveName(version, p)
		want[name] = sums[name]
		data := readFile(t, filepath.Join(dist, name))
		if got := SHA256(data); got != sums[name] {
			t.Errorf("%s: sha256 %s, checksums.txt says %s", name, got, sums[name])
		}
		if strings.Contains(name, "_v") {
			t.Errorf("%s: the registry's file names have no v before the version", name)
		}
		entries, err := ReadArchive(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name)
		}
		bin := ProviderBinaryName(version, p)
		if wantNames := []string{lic, bin}; !slices.Equal(names, wantNames) {
			t.Errorf("%s holds %q, want %q", name, names, wantNames)
			continue
		}
		e := entries[slices.IndexFunc(entries, func(e Entry) bool { return e.Name == bin })]
		if !Executable(e.Mode) {
			t.Errorf("%s: %s mode %v, not executable", name, bin, e.Mode)
		}
		if err := checkBinary(e.Data, p); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !bytes.Contains(e.Data, []byte(version)) {
			t.Errorf("%s: the binary does not carry its version %s", name, version)
		}
	}
	if !maps.Equal(provSums, want) {
		t.Errorf("%s = %v\nwant %v", ProviderSumsName(version), provSums, want)
	}
}

// archiveTime is the mtime of an archive's members.
func archiveTime(t *testing.T, data []byte, p Platform) time.Time {
	t.Helper()
	if p.Format() == TarGz {
		return tarHeaders(t, data)[0].ModTime
	}
	zr, err := zipReader(data)
	if err != nil {
		t.Fatal(err)
	}
	return zr.File[0].Modified
}

// checkBinary: the executable format and CPU of p, static (no dynamic
// loader, no shared libraries), stripped (-s -w: no symbol table).
func checkBinary(data []byte, p Platform) error {
	r := bytes.NewReader(data)
	switch p.OS {
	case "linux":
		f, err := elf.NewFile(r)
		if err != nil {
			return err
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Arch]
		if f.Machine != want {
			return fmt.Errorf("ELF machine %v, want %v", f.Machine, want)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
				return fmt.Errorf("dynamically linked (%v): CGO_ENABLED=0 builds are static", prog.Type)
			}
		}
		if f.Section(".symtab") != nil || f.Section(".debug_info") != nil {
			return fmt.Errorf("not stripped: built without -s -w")
		}
	case "darwin":
		f, err := macho.NewFile(r)
		if err != nil {
			return err
		}
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.Arch]
		if f.Cpu != want {
			return fmt.Errorf("Mach-O CPU %v, want %v", f.Cpu, want)
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 && !onlySystemLibs(libs) {
			return fmt.Errorf("links %q", libs)
		}
		if f.Section("__debug_info") != nil || f.Segment("__DWARF") != nil {
			return fmt.Errorf("not stripped: built without -s -w")
		}
	case "windows":
		f, err := pe.NewFile(r)
		if err != nil {
			return err
		}
		want := map[string]uint16{"amd64": pe.IMAGE_FILE_MACHINE_AMD64, "arm64": pe.IMAGE_FILE_MACHINE_ARM64}[p.Arch]
		if f.Machine != want {
			return fmt.Errorf("PE machine %#x, want %#x", f.Machine, want)
		}
		if len(f.Symbols) > 0 {
			return fmt.Errorf("not stripped: %d COFF symbols", len(f.Symbols))
		}
	}
	return nil
}

// onlySystemLibs: Go's darwin binaries always use libSystem (the only
// supported system call interface there), even with CGO_ENABLED=0.
func onlySystemLibs(libs []string) bool {
	for _, l := range libs {
		if !strings.HasPrefix(l, "/usr/lib/libSystem") && !strings.HasPrefix(l, "/usr/lib/libresolv") &&
			!strings.HasPrefix(l, "/System/Library/Frameworks/CoreFoundation") && !strings.HasPrefix(l, "/System/Library/Frameworks/Security") {
			return false
		}
	}
	return true
}

// TestKrewManifest checks the manifest `make krew` generated the way krew's
// validate-krew-manifest does, against the real archives, installs every
// platform as `kubectl krew install --manifest --archive` would (each into
// its own krew root), and runs the linux/amd64 one through the real kubectl.
func TestKrewManifest(t *testing.T) {
	dist := distDir(t)
	root := repoRoot(t)
	version := distVersion(t, dist, Platforms[0])
	manifest := filepath.Join(dist, "krew", "khook.yaml")
	if len(distPlatforms(t)) != len(Platforms) {
		t.Fatal("KHOOK_DIST_PLATFORMS names some platforms: the krew manifest needs all six (make test-dist)")
	}
	m, err := ValidateKrewFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if m.Spec.Version != version {
		t.Fatalf("manifest is for %s, the archives are %s (run make krew)", m.Spec.Version, version)
	}
	if err := CheckGenerated(manifest, filepath.Join(root, "krew", "khook.yaml.tmpl")); err != nil {
		t.Fatal(err)
	}
	host := hostPlatform(t)
	roots := t.TempDir() // outlives the subtests: the host's install is used below
	var hostRoot string
	for i, pl := range m.Spec.Platforms {
		p, err := PlatformOf(pl)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(p.String(), func(t *testing.T) {
			name := path.Base(pl.URI)
			if want := ArchiveName(KubectlPlugin, version, p); name != want {
				t.Errorf("spec.platforms[%d].uri names %s, want %s", i, name, want)
			}
			archive := readFile(t, filepath.Join(dist, name))
			if got := SHA256(archive); got != pl.Sha256 {
				t.Fatalf("spec.platforms[%d].sha256 %s, the archive's is %s", i, pl.Sha256, got)
			}
			entries, err := ReadArchive(archive)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(entries, func(e Entry) bool { return e.Name == pl.Bin })
			if i < 0 || !Executable(entries[i].Mode) {
				t.Fatalf("bin %s: not an executable member of %s", pl.Bin, name)
			}
			krewRoot := filepath.Join(roots, p.ID())
			link, err := KrewInstall(krewRoot, m, pl, archive)
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(link); err != nil || !Executable(fi.Mode()) {
				t.Fatalf("%s: %v, mode %v", link, err, fi)
			}
			// krew-index's validate-krew-manifest: a license file installed
			if err := CheckKrewLicense(krewRoot); err != nil {
				t.Fatal(err)
			}
			if p == host {
				hostRoot = krewRoot
			}
		})
	}
	if hostRoot == "" {
		t.Fatalf("no platform for %s installed", host)
	}

	t.Run("kubectl", func(t *testing.T) { kubectlRunsKrewPlugin(t, hostRoot, version, version) })
}

func zipReader(data []byte) (*zip.Reader, error) {
	return zip.NewReader(bytes.NewReader(data), int64(len(data)))
}

// kubectlRunsKrewPlugin runs the plugin krew installed into krewRoot
// through the real kubectl, with only krew's bin folder on PATH (as after
// `export PATH=$KREW_ROOT/bin:$PATH`): `kubectl khook version` (the binary
// says binVersion), `kubectl plugin list`, and completion with the script
// the archive carries (in krew's store, under the manifest's version).
func kubectlRunsKrewPlugin(t *testing.T, krewRoot, version, binVersion string) {
	t.Helper()
	kubectl := kubectl(t)
	if kubectl == "" {
		t.Fatal("no kubectl: `make testbin` builds one into .cache/testbin/bin (or set KHOOK_KUBECTL)")
	}
	bin := filepath.Join(krewRoot, "bin")
	env := []string{"PATH=" + bin + ":/bin", "HOME=" + t.TempDir(), "KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}
	out := run(t, env, kubectl, "khook", "version")
	for _, want := range []string{"kubectl khook " + binVersion + "\n", "platform: " + runtime.GOOS + "/" + runtime.GOARCH + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl khook version:\n%s\nwant %q", out, want)
		}
	}
	out = run(t, env, kubectl, "plugin", "list")
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(filepath.Join(bin, KubectlPlugin)) + `$`).MatchString(out) {
		t.Errorf("kubectl plugin list:\n%s\nwant %s", out, filepath.Join(bin, KubectlPlugin))
	}
	store := filepath.Join(krewRoot, "store", KrewName, version)
	if err := os.Symlink(filepath.Join(store, KubectlCompletion), filepath.Join(bin, KubectlCompletion)); err != nil {
		t.Fatal(err)
	}
	out = run(t, env, kubectl, "__complete", "khook", "pl")
	if !regexp.MustCompile(`(?m)^plan`).MatchString(out) {
		t.Errorf("kubectl __complete khook pl: %q, want plan", out)
	}
}
