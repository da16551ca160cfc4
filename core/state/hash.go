// Package state is the run-state record: an in-cluster Secret journaling a
// run (per-step input hashes and outcomes), so a re-run resumes steps whose
// inputs are unchanged since they succeeded. It never stores anything from
// which a secret can be read back: no rendered spec, no values, error text
// redacted and truncated, and input hashes that fingerprint secret material
// only through a salted, memory-hard function.
package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/crypto/scrypt"

	"khook.io/core/helm"
	"khook.io/core/manifest"
	"khook.io/core/redact"
	"khook.io/core/spec"
)

// scrypt cost of a secret fingerprint: about 30 ms and 16 MiB, once per
// distinct set of secrets in a step, so checking guesses against a stolen
// record is slow.
const (
	scryptN = 1 << 14
	scryptR = 8
	scryptP = 1
)

// Hasher computes steps' input hashes. Safe for concurrent use.
type Hasher struct {
	// BaseDir anchors the spec's local paths.
	BaseDir string
	// Redactor knows the secret values; secret material is fingerprinted,
	// never hashed in the clear.
	Redactor *redact.Redactor
	// Salt is the record's; it keeps fingerprints from matching across
	// records.
	Salt []byte
	// Previous is the record the hashes will be compared with, if any. A
	// kustomize: source whose recorded file system calls all return what
	// they returned is checked by replaying them, without a build.
	Previous *Record

	mu  sync.Mutex
	fps map[string]string
}

// Inputs is a step's input hash and what comes with it.
type Inputs struct {
	// Hash is the input hash; "" when a local input cannot be read (Err
	// says why): such a step never resumes, and runs to report the problem
	// itself, at its place in the run.
	Hash string
	Err  error
	// Reads are, per kustomize: source (as the spec writes it), the file
	// system calls its build made ("op path", as manifest.FSRead has
	// them). The record keeps them so the next run can check the
	// kustomization without building it.
	Reads map[string][]string
	// HashCannotSee lists the remote content the step depends on that the
	// hash identifies by reference only: a change behind it does not
	// change the hash.
	HashCannotSee []string
}

// Step returns the input hash of st (see Inputs); "" when a local input
// cannot be read.
func (h *Hasher) Step(ctx context.Context, st *spec.Step) (string, error) {
	in, err := h.Inputs(ctx, st)
	if err != nil {
		return "", err
	}
	return in.Hash, nil
}

// Inputs computes the input hash of st: its name, type and action block
// after substitution, in canonical form (so comments, key order and
// quoting that does not change a value do not matter), plus the content of
// every local file the step reads: manifest and values files, every file a
// kustomization's build reads (its bases, components, patches, generator
// and replacement files, transitively: taken from kustomize's own file
// system calls), and a local chart's files as helm loads them with its
// file:// dependencies, transitively. Scheduling fields are not inputs.
// The error is for what no step can fix (fingerprinting secrets);
// unreadable inputs are Inputs.Err.
func (h *Hasher) Inputs(ctx context.Context, st *spec.Step) (*Inputs, error) {
	canon, err := Canonical(st)
	if err != nil {
		return nil, err
	}
	fp, err := h.fingerprint(h.Redactor.Occurrences(canon))
	if err != nil {
		return nil, err
	}
	sum := func(files string) string {
		s := sha256.New()
		io.WriteString(s, "khook/state/v1\n")
		io.WriteString(s, h.Redactor.String(canon))
		io.WriteString(s, "\n")
		io.WriteString(s, files)
		io.WriteString(s, "\n")
		io.WriteString(s, fp)
		return "sha256:" + hex.EncodeToString(s.Sum(nil))
	}
	if prev := h.previous(st.Name); prev != nil && prev.Hash != "" && len(prev.Reads) > 0 {
		// the kustomizations read what they read last time: no build
		r := &inputReader{h: h, ctx: ctx, replay: prev.Reads}
		if files, err := r.step(st); err == nil && sum(files) == prev.Hash {
			return &Inputs{Hash: prev.Hash, Reads: prev.Reads, HashCannotSee: r.remote}, nil
		}
	}
	r := &inputReader{h: h, ctx: ctx}
	files, err := r.step(st)
	in := &Inputs{Reads: r.reads, HashCannotSee: r.remote}
	if h.holdsSecret(in.Reads) {
		in.Reads = nil // the record never holds secret material; the next run builds
	}
	if err != nil {
		in.Err = fmt.Errorf("step %s: %w", st.Name, err)
		return in, nil
	}
	in.Hash = sum(files)
	return in, nil
}

// holdsSecret reports whether a path of reads holds a secret value (a
// kustomize: path written with a secret variable, say).
func (h *Hasher) holdsSecret(reads map[string][]string) bool {
	for src, calls := range reads {
		if len(h.Redactor.Occurrences(src)) > 0 {
			return true
		}
		for _, c := range calls {
			if len(h.Redactor.Occurrences(c)) > 0 {
				return true
			}
		}
	}
	return false
}

func (h *Hasher) previous(name string) *StepRecord {
	if h.Previous == nil {
		return nil
	}
	return h.Previous.Steps[name]
}

// Canonical is the step's identity and action block as canonical JSON.
func Canonical(st *spec.Step) (string, error) {
	b, err := json.Marshal(struct {
		Name   string `json:"name"`
		Type   string `json:"type"`
		Action any    `json:"action"`
	}{st.Name, st.Type(), normalize(st.Action())})
	if err != nil {
		return "", fmt.Errorf("step %s: canonical form: %w", st.Name, err)
	}
	return string(b), nil
}

// normalize turns what JSON cannot encode (YAML maps with non-string keys)
// into what it can; structs are re-encoded through JSON so nested values
// are normalized too.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case *spec.Helm:
		c := *x
		c.Values = normalize(x.Values).(map[string]any)
		return c
	case *spec.Patch:
		c := *x
		c.Patch = normalize(x.Patch)
		return c
	}
	return v
}

// fingerprint is a salted scrypt of the step's secret material, or "" when
// it has none.
func (h *Hasher) fingerprint(occ []string) (string, error) {
	if len(occ) == 0 {
		return "", nil
	}
	sort.Strings(occ)
	key := strings.Join(occ, "\x00")
	h.mu.Lock()
	if fp, ok := h.fps[key]; ok {
		h.mu.Unlock()
		return fp, nil
	}
	h.mu.Unlock()
	dk, err := scrypt.Key([]byte(key), h.Salt, scryptN, scryptR, scryptP, 32)
	if err != nil {
		return "", fmt.Errorf("fingerprint secret inputs: %w", err)
	}
	fp := "secrets:" + hex.EncodeToString(dk)
	h.mu.Lock()
	if h.fps == nil {
		h.fps = map[string]string{}
	}
	h.fps[key] = fp
	h.mu.Unlock()
	return fp, nil
}

// inputReader reads the local inputs of one step.
type inputReader struct {
	h   *Hasher
	ctx context.Context
	// replay, when set, holds the recorded calls of each kustomize source,
	// checked again instead of building.
	replay map[string][]string
	// remoteOnly reads only what it takes to list the remote inputs.
	remoteOnly bool
	reads      map[string][]string
	remote     []string
}

// step digests every local input of st, in the order the step reads them,
// and notes the remote ones.
func (r *inputReader) step(st *spec.Step) (string, error) {
	var b strings.Builder
	manifests := func(list []spec.ManifestSource) error {
		for i, m := range list {
			switch {
			case m.File != "":
				if err := r.tree(&b, m.File); err != nil {
					return err
				}
			case m.Kustomize != "":
				if err := r.kustomize(&b, m.Kustomize); err != nil {
					return err
				}
			case m.URL != "":
				r.remote = append(r.remote, manifest.Describe(i, m))
			}
		}
		return nil
	}
	var err error
	switch {
	case st.Apply != nil:
		err = manifests(st.Apply.Manifests)
	case st.Delete != nil:
		err = manifests(st.Delete.Manifests)
	case st.Helm != nil:
		err = r.helm(&b, st.Helm)
	}
	return b.String(), err
}

func (r *inputReader) helm(b *strings.Builder, hs *spec.Helm) error {
	for i, v := range hs.ValuesFrom {
		switch {
		case v.File != "":
			if err := r.tree(b, v.File); err != nil {
				return err
			}
		case v.URL != "":
			r.remote = append(r.remote, remoteValues(i, v.URL))
		}
	}
	ref, err := spec.ParseChart(hs.Chart)
	if err != nil {
		return err
	}
	if ref.Source != spec.ChartFromLocal {
		if why := unpinnedChart(ref, hs); why != "" {
			r.remote = append(r.remote, why)
		}
		return nil
	}
	in, err := helm.LocalChartInputs(spec.Resolve(r.h.BaseDir, hs.Chart))
	if err != nil {
		return err
	}
	for _, f := range in.Files {
		fmt.Fprintf(b, "chart\x00%s\x00%s\x00%s\n", hs.Chart, f.Path, f.Digest)
	}
	r.remote = append(r.remote, in.Remote...)
	return nil
}

// unpinnedChart says why a remote chart's content can change behind an
// unchanged reference, or "" when the reference pins it: an OCI digest, or
// an exact version (which chart repositories and registries publish once).
func unpinnedChart(ref spec.ChartRef, hs *spec.Helm) string {
	switch ref.Source {
	case spec.ChartFromOCI:
		name := "chart oci://" + ref.Name
		switch {
		case ref.Digest != "":
			return ""
		case ref.InlineVersion != "":
			if helm.ExactVersion(ref.InlineVersion) {
				return ""
			}
			return fmt.Sprintf("%s:%s (tag %s is not an exact version)", name, ref.InlineVersion, ref.InlineVersion)
		}
		return unpinnedVersion(name, hs.Version)
	case spec.ChartFromRepo:
		version := hs.Version
		if version == "" {
			version = ref.InlineVersion
		}
		return unpinnedVersion(fmt.Sprintf("chart %s from %s", ref.Name, redact.StripURLUserinfo(hs.Repo)), version)
	}
	return ""
}

func unpinnedVersion(name, version string) string {
	switch {
	case version == "":
		return name + " (no version: the latest)"
	case !helm.ExactVersion(version):
		return fmt.Sprintf("%s (version %s is a range)", name, version)
	}
	return ""
}

// tree digests a local file, or each regular file under a directory, by
// relative path.
func (r *inputReader) tree(b *strings.Builder, p string) error {
	if r.remoteOnly {
		return nil
	}
	full := spec.Resolve(r.h.BaseDir, p)
	err := filepath.WalkDir(full, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(full, path)
		sum := sha256.Sum256(data)
		fmt.Fprintf(b, "%s\x00%s\x00%x\n", p, filepath.ToSlash(rel), sum)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	return nil
}

// kustomize digests every file system call a build of the kustomization
// makes, with what it returned: from a build (reused by the step that
// applies it), or by replaying the calls the record kept.
func (r *inputReader) kustomize(b *strings.Builder, p string) error {
	if r.remoteOnly {
		return nil
	}
	full := spec.Resolve(r.h.BaseDir, p)
	var reads []manifest.FSRead
	if r.replay != nil {
		recorded, ok := r.replay[p]
		if !ok {
			return fmt.Errorf("no recorded reads of %s", p)
		}
		calls := make([]manifest.FSRead, 0, len(recorded))
		for _, c := range recorded {
			op, path, ok := strings.Cut(c, " ")
			if !ok {
				return fmt.Errorf("recorded read %q of %s: want \"op path\"", c, p)
			}
			calls = append(calls, manifest.FSRead{Op: op, Path: path})
		}
		var err error
		if reads, err = manifest.ReplayKustomizeReads(full, calls); err != nil {
			return err
		}
	} else {
		build, err := manifest.BuildKustomization(r.ctx, full)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		reads = build.Reads
		calls := make([]string, len(reads))
		for i, rd := range reads {
			calls[i] = rd.Op + " " + rd.Path
		}
		sort.Strings(calls)
		if r.reads == nil {
			r.reads = map[string][]string{}
		}
		r.reads[p] = calls
	}
	lines := make([]string, len(reads))
	for i, rd := range reads {
		lines[i] = fmt.Sprintf("kustomize\x00%s\x00%s\x00%s\x00%s\n", p, rd.Op, rd.Path, rd.Result)
	}
	sort.Strings(lines)
	for _, l := range lines {
		b.WriteString(l)
	}
	return nil
}

// HashCannotSee lists the remote content st depends on that an input
// hash identifies by reference only (url: sources, valuesFrom urls, remote
// charts without an exact version or digest, a local chart's dependencies
// fetched at a range), reading only what that takes: no kustomization is
// built. Inputs that cannot be read are left to the step to report.
func HashCannotSee(st *spec.Step, baseDir string) []string {
	r := &inputReader{h: &Hasher{BaseDir: baseDir}, remoteOnly: true}
	_, _ = r.step(st)
	return r.remote
}

func remoteValues(i int, url string) string {
	return fmt.Sprintf("valuesFrom[%d] (url %s)", i, redact.StripURLUserinfo(url))
}

// SpecHash combines the step hashes into the whole spec's hash.
func SpecHash(name string, stepHashes []string) string {
	sum := sha256.New()
	io.WriteString(sum, "khook/spec/v1\n"+name+"\n")
	for _, s := range stepHashes {
		io.WriteString(sum, s+"\n")
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}
