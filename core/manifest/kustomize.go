package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

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
// The result is the multi-document YAML kustomize would print; the caller
// must not modify it (a build is reused while what it read is unchanged:
// see KustomizeBuild).
func Kustomize(ctx context.Context, dir string) ([]byte, error) {
	b, err := BuildKustomization(ctx, dir)
	if err != nil {
		return nil, err
	}
	return b.YAML, nil
}

// KustomizeBuild is a kustomization built in-process, with everything the
// build asked of the file system.
type KustomizeBuild struct {
	// Dir is the kustomization's directory: absolute, symbolic links
	// resolved, as kustomize roots it.
	Dir string
	// YAML is kustomize's output.
	YAML []byte
	// Reads are the build's file system calls with their results, in the
	// order first made, each once: every file it read (resources, bases,
	// components, patches, generator and replacement files, transitively),
	// every path it probed, resolved or listed. Paths are relative to Dir,
	// with forward slashes.
	Reads []FSRead
	// err is kustomize's error: a build that failed, fails again with the
	// same reads.
	err error
}

// FSRead is one file system call of a build and what it returned, for
// comparison only: a file's content is a digest, an error its class.
type FSRead struct {
	Op     string // read, open, exists, isdir, readdir, glob, abs, walk
	Path   string
	Result string
}

// BuildKustomization builds the kustomization in dir like Kustomize and
// returns the build with what it read; a kustomize error is returned as
// the error. A build is kept for the life of the process and reused for as
// long as every call it made still returns what it returned (each file is
// read again and compared by digest), so hashing a step's inputs and then
// applying it builds once.
func BuildKustomization(ctx context.Context, dir string) (*KustomizeBuild, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := CheckLocal(abs); err != nil {
		return nil, err
	}
	if b := kustomizeCache.get(abs); b != nil {
		return b, b.wrapErr()
	}
	select {
	case kustomizeSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another kustomize build: %w", ctx.Err())
	}
	defer func() { <-kustomizeSem }()
	if b := kustomizeCache.get(abs); b != nil { // built while this one waited
		return b, b.wrapErr()
	}
	b := build(abs)
	kustomizeCache.put(abs, b)
	return b, b.wrapErr()
}

func (b *KustomizeBuild) wrapErr() error {
	if b.err != nil {
		return fmt.Errorf("kustomize build: %w", b.err)
	}
	return nil
}

// build runs krusty on abs through a recording file system; the caller
// holds kustomizeSem.
func build(abs string) *KustomizeBuild {
	root := resolved(abs)
	rec := &recordingFS{FileSystem: filesys.MakeFsOnDisk(), root: root, seen: map[fsCall]bool{}}
	b := &KustomizeBuild{Dir: root}
	opts := krusty.MakeDefaultOptions()
	opts.PluginConfig = ktypes.DisabledPluginConfig()
	opts.LoadRestrictions = ktypes.LoadRestrictionsRootOnly
	// rooted at the resolved path, as kustomize roots it anyway, so every
	// path it reads is under (or relative to) root
	m, err := krusty.MakeKustomizer(opts).Run(rec, root)
	if err == nil {
		b.YAML, err = m.AsYaml()
	}
	b.err = err
	b.Reads = rec.reads()
	return b
}

// ReplayKustomizeReads makes the calls of an earlier build of the
// kustomization in dir again (Op and Path; Path relative to the
// kustomization, as KustomizeBuild.Reads has it) and returns them with
// what they return now, without building. A build reads the same as one
// whose every call returned the same: kustomize decides what to read from
// what it has read.
func ReplayKustomizeReads(dir string, calls []FSRead) ([]FSRead, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, disk := resolved(abs), filesys.MakeFsOnDisk()
	out := make([]FSRead, len(calls))
	for i, c := range calls {
		out[i] = FSRead{Op: c.Op, Path: c.Path, Result: replay(disk, root, c.Op, c.Path)}
	}
	return out, nil
}

// resolved is abs with symbolic links resolved, as kustomize roots a
// kustomization (abs itself when that fails: kustomize will say why).
func resolved(abs string) string {
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// kustomizeCache holds the builds of this process by directory.
var kustomizeCache = &buildCache{builds: map[string]*KustomizeBuild{}}

type buildCache struct {
	mu     sync.Mutex
	builds map[string]*KustomizeBuild
}

// get returns the build of abs if every call it made still returns the
// same, else nil.
func (c *buildCache) get(abs string) *KustomizeBuild {
	c.mu.Lock()
	b := c.builds[abs]
	c.mu.Unlock()
	if b == nil || !b.current() {
		return nil
	}
	return b
}

func (c *buildCache) put(abs string, b *KustomizeBuild) {
	c.mu.Lock()
	c.builds[abs] = b
	c.mu.Unlock()
}

// current replays the build's reads against the disk.
func (b *KustomizeBuild) current() bool {
	disk := filesys.MakeFsOnDisk()
	for _, r := range b.Reads {
		if replay(disk, b.Dir, r.Op, r.Path) != r.Result {
			return false
		}
	}
	return true
}

// File system operations a build is recorded by.
const (
	opRead    = "read"
	opOpen    = "open"
	opExists  = "exists"
	opIsDir   = "isdir"
	opReadDir = "readdir"
	opGlob    = "glob"
	opAbs     = "abs"
	opWalk    = "walk"
)

// replay makes the call op on path (relative to root) again and returns
// its result as the recording file system records it.
func replay(fsys filesys.FileSystem, root, op, path string) string {
	full := fromRel(root, path)
	switch op {
	case opRead:
		return contentResult(fsys.ReadFile(full))
	case opOpen:
		return contentResult(os.ReadFile(full))
	case opExists:
		return strconv.FormatBool(fsys.Exists(full))
	case opIsDir:
		return strconv.FormatBool(fsys.IsDir(full))
	case opReadDir:
		names, err := fsys.ReadDir(full)
		return listResult(names, err)
	case opGlob:
		matches, err := fsys.Glob(full)
		return listResult(relAll(root, matches), err)
	case opAbs:
		d, f, err := fsys.CleanedAbs(full)
		return absResult(root, d, f, err)
	case opWalk:
		return walkResult(root, fsys, full, nil)
	}
	return "unknown op " + op
}

type fsCall struct{ op, path string }

// recordingFS is the file system a build runs on: the disk, with every
// call that reads it recorded. Writes pass through unrecorded (a build
// with plugins disabled makes none).
type recordingFS struct {
	filesys.FileSystem
	root string

	mu    sync.Mutex
	order []FSRead
	seen  map[fsCall]bool
}

func (r *recordingFS) note(op, path, result string) {
	c := fsCall{op, toRel(r.root, path)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[c] {
		return
	}
	r.seen[c] = true
	r.order = append(r.order, FSRead{Op: c.op, Path: c.path, Result: result})
}

func (r *recordingFS) reads() []FSRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

func (r *recordingFS) ReadFile(path string) ([]byte, error) {
	data, err := r.FileSystem.ReadFile(path)
	r.note(opRead, path, contentResult(data, err))
	return data, err
}

func (r *recordingFS) Open(path string) (filesys.File, error) {
	f, err := r.FileSystem.Open(path)
	r.note(opOpen, path, contentResult(os.ReadFile(path)))
	return f, err
}

func (r *recordingFS) Exists(path string) bool {
	ok := r.FileSystem.Exists(path)
	r.note(opExists, path, strconv.FormatBool(ok))
	return ok
}

func (r *recordingFS) IsDir(path string) bool {
	ok := r.FileSystem.IsDir(path)
	r.note(opIsDir, path, strconv.FormatBool(ok))
	return ok
}

func (r *recordingFS) ReadDir(path string) ([]string, error) {
	names, err := r.FileSystem.ReadDir(path)
	r.note(opReadDir, path, listResult(names, err))
	return names, err
}

func (r *recordingFS) Glob(pattern string) ([]string, error) {
	matches, err := r.FileSystem.Glob(pattern)
	r.note(opGlob, pattern, listResult(relAll(r.root, matches), err))
	return matches, err
}

func (r *recordingFS) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	d, f, err := r.FileSystem.CleanedAbs(path)
	r.note(opAbs, path, absResult(r.root, d, f, err))
	return d, f, err
}

func (r *recordingFS) Walk(path string, walkFn filepath.WalkFunc) error {
	var visited []string
	err := r.FileSystem.Walk(path, func(p string, info fs.FileInfo, err error) error {
		visited = append(visited, walkEntry(r.root, p, info, err))
		return walkFn(p, info, err)
	})
	r.note(opWalk, path, walkResult(r.root, nil, "", visited))
	return err
}

// contentResult is a read's result: the content's digest, or the error's
// class.
func contentResult(data []byte, err error) string {
	if err != nil {
		return errClass(err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func listResult(names []string, err error) string {
	if err != nil {
		return errClass(err)
	}
	return strings.Join(names, "\x00")
}

func absResult(root string, d filesys.ConfirmedDir, f string, err error) string {
	if err != nil {
		return errClass(err)
	}
	return toRel(root, string(d)) + "\x00" + f
}

// walkResult is a walk's result: every path it visited, in order. With
// fsys set it walks full first (a replay); otherwise visited is the
// record of the walk the build made.
func walkResult(root string, fsys filesys.FileSystem, full string, visited []string) string {
	if fsys != nil {
		_ = fsys.Walk(full, func(p string, info fs.FileInfo, err error) error {
			visited = append(visited, walkEntry(root, p, info, err))
			return nil
		})
	}
	return strings.Join(visited, "\x00")
}

func walkEntry(root, p string, info fs.FileInfo, err error) string {
	switch {
	case err != nil:
		return toRel(root, p) + " " + errClass(err)
	case info.IsDir():
		return toRel(root, p) + "/"
	}
	return toRel(root, p)
}

// errClass reduces an error to what a replay can compare: the system
// error (no such file, permission denied, ...) when there is one.
func errClass(err error) string {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return "error: " + errno.Error()
	case errors.Is(err, fs.ErrNotExist):
		return "error: not found"
	}
	return "error"
}

// toRel writes path relative to root, with forward slashes, so a record
// does not depend on where the tree is checked out.
func toRel(root, path string) string {
	if !filepath.IsAbs(path) {
		return filepath.ToSlash(path)
	}
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(rel)
}

func fromRel(root, path string) string {
	p := filepath.FromSlash(path)
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

func relAll(root string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = toRel(root, p)
	}
	return out
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
