package manifest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	ktypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizeSem serializes kustomize builds: krusty keeps global state (the
// OpenAPI schema it loads per build) and is not safe for concurrent use. A
// one-slot channel rather than a sync.Mutex, so a build waiting its turn
// still honours its context.
var kustomizeSem = make(chan struct{}, 1)

// kustomizationNames are the file names kustomize looks for, in its order.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// RemoteError is a kustomization that references something remote (a git
// base or an HTTP(S) file): khook builds local kustomizations only, because
// kustomize fetches git bases by running the git binary.
type RemoteError struct {
	// Kustomization is the file that holds the reference; Field is where
	// (resources, components, ...), Ref the reference as written.
	Kustomization string
	Field         string
	Ref           string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("%s: %s entry %q is remote: khook builds local kustomizations only (remote bases need git, which khook never runs); vendor the base into a local directory, or apply a rendered manifest with a url: source", e.Kustomization, e.Field, e.Ref)
}

// Kustomize builds the kustomization in dir in-process, like kubectl
// apply -k: plugins disabled (builtin generators and transformers only),
// files restricted to the kustomization's root, Helm chart inflation off.
// Any remote reference, anywhere in the tree of local bases and
// components, is refused with a RemoteError before kustomize runs, so git
// is never tried. Builds are serialized; ctx bounds the wait for a turn.
// The result is the multi-document YAML kustomize would print.
func Kustomize(ctx context.Context, dir string) ([]byte, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := CheckLocal(abs); err != nil {
		return nil, err
	}
	select {
	case kustomizeSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another kustomize build: %w", ctx.Err())
	}
	defer func() { <-kustomizeSem }()

	opts := krusty.MakeDefaultOptions()
	opts.PluginConfig = ktypes.DisabledPluginConfig()
	opts.LoadRestrictions = ktypes.LoadRestrictionsRootOnly
	k := krusty.MakeKustomizer(opts)
	m, err := k.Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	return out, nil
}

// CheckLocal walks the kustomization in dir and every local base and
// component it references, and returns a RemoteError for the first remote
// reference (a git repository URL such as github.com/org/repo//path or
// https://host/repo.git, or an HTTP(S) file). It reads nothing remote.
// Kustomizations that do not parse are left for kustomize to report.
func CheckLocal(dir string) error {
	return checkLocal(dir, map[string]bool{})
}

func checkLocal(dir string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	file, data, err := readKustomization(dir)
	if err != nil || file == "" {
		return nil // kustomize says what is wrong with it
	}
	var k ktypes.Kustomization
	if err := k.Unmarshal(data); err != nil {
		return nil
	}
	k.FixKustomization() // bases into resources
	shown := file
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, file); err == nil && !strings.HasPrefix(rel, "..") {
			shown = rel
		}
	}

	// Entries that may be directories (or git repositories).
	dirFields := []struct {
		name string
		refs []string
	}{
		{"resources", k.Resources},
		{"components", k.Components},
		{"generators", k.Generators},
		{"transformers", k.Transformers},
		{"validators", k.Validators},
	}
	for _, f := range dirFields {
		for _, ref := range f.refs {
			if looksRemote(ref) {
				return &RemoteError{Kustomization: shown, Field: f.name, Ref: ref}
			}
			if filepath.IsAbs(ref) {
				continue
			}
			sub := filepath.Join(dir, ref)
			if fi, err := os.Stat(sub); err == nil && fi.IsDir() {
				if err := checkLocal(sub, seen); err != nil {
					return err
				}
			}
		}
	}

	// Entries that are files: kustomize would fetch an HTTP(S) URL.
	var files []struct{ field, ref string }
	add := func(field string, refs ...string) {
		for _, r := range refs {
			if r != "" {
				files = append(files, struct{ field, ref string }{field, r})
			}
		}
	}
	add("crds", k.Crds...)
	add("configurations", k.Configurations...)
	add("openapi.path", k.OpenAPI["path"])
	for _, p := range k.Patches {
		add("patches", p.Path)
	}
	for _, p := range k.PatchesJson6902 {
		add("patchesJson6902", p.Path)
	}
	for _, p := range k.PatchesStrategicMerge {
		if s := strings.TrimSpace(string(p)); !strings.Contains(s, "\n") {
			add("patchesStrategicMerge", s)
		}
	}
	for _, r := range k.Replacements {
		add("replacements", r.Path)
	}
	for _, g := range k.ConfigMapGenerator {
		add("configMapGenerator", kvFiles(g.KvPairSources)...)
	}
	for _, g := range k.SecretGenerator {
		add("secretGenerator", kvFiles(g.KvPairSources)...)
	}
	for _, f := range files {
		if hasScheme(f.ref) {
			return &RemoteError{Kustomization: shown, Field: f.field, Ref: f.ref}
		}
	}
	return nil
}

func kvFiles(s ktypes.KvPairSources) []string {
	var out []string
	for _, f := range s.FileSources {
		if _, path, ok := strings.Cut(f, "="); ok {
			f = path
		}
		out = append(out, f)
	}
	out = append(out, s.EnvSources...)
	if s.EnvSource != "" {
		out = append(out, s.EnvSource)
	}
	return out
}

func readKustomization(dir string) (string, []byte, error) {
	for _, name := range kustomizationNames {
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p)
		if err == nil {
			return p, data, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, err
		}
	}
	return "", nil, nil
}

// looksRemote reports whether kustomize would treat ref as a remote
// target: anything with a URL scheme (https://, ssh://, file://, git::),
// an scp-like user@host:path, or a github.com/ path. It errs on the side
// of remote: a local path never looks like any of these.
func looksRemote(ref string) bool {
	r := strings.ToLower(strings.TrimSpace(ref))
	r = strings.TrimPrefix(r, "git::")
	switch {
	case hasScheme(r):
		return true
	case strings.HasPrefix(r, "github.com/"), strings.HasPrefix(r, "github.com:"), strings.HasPrefix(r, "gh:"):
		return true
	}
	return scpUserRe.MatchString(r) // git@host:org/repo
}

// scpUserRe is kustomize's test for the user@ of an scp-like git URL.
var scpUserRe = regexp.MustCompile(`^[a-z][a-z0-9-]*@`)

func hasScheme(ref string) bool {
	i := strings.Index(ref, "://")
	if i <= 0 {
		return false
	}
	for _, c := range ref[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
