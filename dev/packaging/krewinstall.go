package packaging

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// KrewInstall installs archive, the file of platform pl of manifest p,
// into krewRoot the way `kubectl krew install --manifest --archive` does
// (krew's installation package): it checks the sha256, unpacks the archive
// into a staging directory (refusing absolute paths and ..), applies pl's
// file operations (everything to the root when there are none), moves the
// result to store/<name>/<version>/ and links bin/kubectl-<name> (.exe for
// Windows) to the binary with a relative symlink. It returns the link.
func KrewInstall(krewRoot string, p *KrewPlugin, pl KrewPlatform, archive []byte) (string, error) {
	if got := SHA256(archive); got != pl.Sha256 {
		return "", fmt.Errorf("archive sha256 is %s, the manifest says %s", got, pl.Sha256)
	}
	env, err := PlatformOf(pl)
	if err != nil {
		return "", err
	}
	entries, err := ReadArchive(archive)
	if err != nil {
		return "", err
	}
	staging, err := os.MkdirTemp("", "krew-downloads")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(staging)
	for _, e := range entries {
		if strings.Contains(e.Name, "..") || strings.HasPrefix(e.Name, "/") || strings.HasPrefix(e.Name, `\`) {
			return "", fmt.Errorf("refusing to unpack archive with suspicious entry %q", e.Name)
		}
		dst := filepath.Join(staging, filepath.FromSlash(e.Name))
		if e.IsDir() {
			if err := os.MkdirAll(dst, e.Mode|0o700); err != nil {
				return "", err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, e.Data, e.Mode); err != nil {
			return "", err
		}
	}

	files := pl.Files
	if files == nil {
		files = []KrewFile{{From: "*", To: "."}}
	}
	moved, err := os.MkdirTemp("", "krew-temp-move")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(moved)
	for _, f := range files {
		if err := krewMove(staging, moved, f); err != nil {
			return "", fmt.Errorf("files %s -> %s: %w", f.From, f.To, err)
		}
	}
	installDir := filepath.Join(krewRoot, "store", p.Metadata.Name, p.Spec.Version)
	if err := os.MkdirAll(filepath.Dir(installDir), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(moved, installDir); err != nil {
		return "", err
	}
	if err := os.Chmod(installDir, 0o755); err != nil {
		return "", err
	}

	bin := filepath.Join(installDir, filepath.FromSlash(pl.Bin))
	if rel, err := filepath.Rel(installDir, bin); err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("bin %q is outside the install directory", pl.Bin)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("source binary (%q) cannot be found in extracted archive: %w", pl.Bin, err)
	}
	binDir := filepath.Join(krewRoot, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	link := filepath.Join(binDir, "kubectl-"+strings.ReplaceAll(p.Metadata.Name, "-", "_")+env.Exe())
	rel, err := filepath.Rel(binDir, bin)
	if err != nil {
		return "", err
	}
	if err := os.Symlink(rel, link); err != nil {
		return "", err
	}
	return link, nil
}

// krewMove is one krew file operation from the staging directory into the
// install directory: a file moved directly (to "." keeps its name), else a
// glob whose matches go into the directory `to`.
func krewMove(from, to string, f KrewFile) error {
	if f.To != filepath.Clean(f.To) {
		return fmt.Errorf("the provided path is not clean, %q should be %q", f.To, filepath.Clean(f.To))
	}
	src := filepath.Clean(filepath.Join(from, filepath.FromSlash(f.From)))
	if _, err := os.Stat(src); err == nil {
		name := f.To
		if name == "." {
			name = filepath.Base(src)
		}
		return moveWithin(from, to, src, filepath.Join(to, filepath.FromSlash(name)))
	}
	matches, err := filepath.Glob(filepath.Join(from, filepath.FromSlash(f.From)))
	if err != nil {
		return err
	}
	if len(matches) == 0 {
		return fmt.Errorf("no files in the plugin archive matched the glob pattern=%s", f.From)
	}
	for _, m := range matches {
		if err := moveWithin(from, to, m, filepath.Join(to, filepath.FromSlash(f.To), filepath.Base(m))); err != nil {
			return err
		}
	}
	return nil
}

func moveWithin(fromBase, toBase, src, dst string) error {
	for _, c := range [][2]string{{fromBase, src}, {toBase, dst}} {
		if rel, err := filepath.Rel(c[0], c[1]); err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("can't move, %q is not inside %q", c[1], c[0])
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Rename(src, dst)
}

// CheckKrewLicense is the license check of krew-index's
// validate-krew-manifest after an install into krewRoot: some regular file
// installed under krewRoot/store is a license file (IsLicenseFile).
func CheckKrewLicense(krewRoot string) error {
	var files []string
	err := filepath.WalkDir(filepath.Join(krewRoot, "store"), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, d.Name())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk the installation directory: %w", err)
	}
	if slices.ContainsFunc(files, IsLicenseFile) {
		return nil
	}
	return fmt.Errorf("no license file (LICENSE or alike) installed from the archive, among [%s]", strings.Join(files, ", "))
}

// Executable reports whether mode has any execute bit.
func Executable(mode fs.FileMode) bool { return mode&0o111 != 0 }
