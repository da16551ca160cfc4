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
	"reflect"
	"sort"
	"strings"
	"sync"

	"golang.org/x/crypto/scrypt"

	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
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
	// Steps are the executors: a step's inputs are what its executor
	// declares (step.InputDeclarer). A step whose type has no executor
	// here, or whose executor declares nothing, has no inputs beyond its
	// spec.
	Steps *step.Registry

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
// every local input st's executor declares (step.InputDeclarer), in the
// order it declares them: files and folders, every file system call a
// kustomization's build makes with what it returned, the files a loader
// picks (a local chart's, with its file:// dependencies). Scheduling
// fields are not inputs. The error is for what no step can fix
// (fingerprinting secrets); unreadable inputs are Inputs.Err.
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
// into what it can. A block (a pointer to a struct) is copied with each of
// its fields of type any, map[string]any or []any normalized (a nil
// map[string]any becomes an empty one); other fields, and nested structs,
// are kept as they are.
func normalize(v any) any {
	if b := reflect.ValueOf(v); b.Kind() == reflect.Pointer && !b.IsNil() && b.Elem().Kind() == reflect.Struct {
		return normalizeBlock(b.Elem())
	}
	return normalizeValue(v)
}

var (
	anyType    = reflect.TypeFor[any]()
	anyMapType = reflect.TypeFor[map[string]any]()
	anyList    = reflect.TypeFor[[]any]()
)

// normalizeBlock is a copy of the struct b with its fields of type any,
// map[string]any and []any normalized.
func normalizeBlock(b reflect.Value) any {
	c := reflect.New(b.Type()).Elem()
	c.Set(b)
	for i := 0; i < c.NumField(); i++ {
		f := c.Field(i)
		if !f.CanSet() {
			continue
		}
		switch f.Type() {
		case anyType, anyMapType, anyList:
			if n := normalizeValue(f.Interface()); n != nil {
				f.Set(reflect.ValueOf(n))
			}
		}
	}
	return c.Interface()
}

func normalizeValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeValue(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalizeValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
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

// step digests every local input st's executor declares, in the order the
// step reads them, and notes the remote ones. A step whose executor
// declares none has none.
func (r *inputReader) step(st *spec.Step) (string, error) {
	d, ok := r.h.declarer(st)
	if !ok {
		return "", nil
	}
	inputs, declErr := d.Inputs(st, r.h.BaseDir)
	var b strings.Builder
	for _, in := range inputs {
		var err error
		switch {
		case in.Path != "":
			err = r.tree(&b, in.Path)
		case in.Kustomization != nil:
			err = r.kustomize(&b, in.Kustomization)
		case in.Files != nil:
			err = r.files(&b, in.Files)
		case in.Remote != "":
			r.remote = append(r.remote, in.Remote)
		}
		if err != nil {
			return b.String(), err
		}
	}
	return b.String(), declErr
}

// declarer is the executor of st's type, if it declares inputs.
func (h *Hasher) declarer(st *spec.Step) (step.InputDeclarer, bool) {
	e, ok := h.Steps.Get(st.Type())
	if !ok {
		return nil, false
	}
	d, ok := e.(step.InputDeclarer)
	return d, ok
}

// files digests a set of files a loader picks (a local chart's), and
// notes what the set depends on remotely.
func (r *inputReader) files(b *strings.Builder, in *step.FilesInput) error {
	files, remote, err := in.Read()
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintf(b, "%s\x00%s\x00%s\x00%s\n", in.Kind, in.Source, f.Path, f.Digest)
	}
	r.remote = append(r.remote, remote...)
	return nil
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
func (r *inputReader) kustomize(b *strings.Builder, k *step.KustomizationInput) error {
	if r.remoteOnly {
		return nil
	}
	p := k.Path
	var reads []step.FSRead
	if r.replay != nil {
		recorded, ok := r.replay[p]
		if !ok {
			return fmt.Errorf("no recorded reads of %s", p)
		}
		calls := make([]step.FSRead, 0, len(recorded))
		for _, c := range recorded {
			op, path, ok := strings.Cut(c, " ")
			if !ok {
				return fmt.Errorf("recorded read %q of %s: want \"op path\"", c, p)
			}
			calls = append(calls, step.FSRead{Op: op, Path: path})
		}
		var err error
		if reads, err = k.Replay(calls); err != nil {
			return err
		}
	} else {
		var err error
		if reads, err = k.Build(r.ctx); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
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
// fetched at a range: what st's executor in steps declares), reading only
// what that takes: no kustomization is built. Inputs that cannot be read
// are left to the step to report.
func HashCannotSee(st *spec.Step, baseDir string, steps *step.Registry) []string {
	r := &inputReader{h: &Hasher{BaseDir: baseDir, Steps: steps}, remoteOnly: true}
	_, _ = r.step(st)
	return r.remote
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
