// Package state is the run-state record: an in-cluster Secret journaling a
// run (per-step input hashes and outcomes), so a re-run resumes steps whose
// inputs are unchanged since they succeeded. It never stores anything from
// which a secret can be read back: no rendered spec, no values, error text
// redacted and truncated, and input hashes that fingerprint secret material
// only through a salted, memory-hard function.
package state

import (
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

	mu  sync.Mutex
	fps map[string]string
}

// Step returns the input hash of st: its name, type and action block after
// substitution, in canonical form (so comments, key order and quoting that
// does not change a value do not matter), plus the content of every local
// file the block references. Scheduling fields are not inputs.
func (h *Hasher) Step(st *spec.Step) (string, error) {
	canon, err := Canonical(st)
	if err != nil {
		return "", err
	}
	files, err := h.files(st)
	if err != nil {
		return "", err
	}
	sum := sha256.New()
	io.WriteString(sum, "khook/state/v1\n")
	io.WriteString(sum, h.Redactor.String(canon))
	io.WriteString(sum, "\n")
	io.WriteString(sum, files)
	io.WriteString(sum, "\n")
	fp, err := h.fingerprint(h.Redactor.Occurrences(canon))
	if err != nil {
		return "", err
	}
	io.WriteString(sum, fp)
	return "sha256:" + hex.EncodeToString(sum.Sum(nil)), nil
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

// LocalPaths lists the local files and directories a step's action reads:
// manifests[].file, kustomize directories, valuesFrom[].file, local charts.
func LocalPaths(st *spec.Step) []string {
	var out []string
	manifests := func(list []spec.ManifestSource) {
		for _, m := range list {
			if m.File != "" {
				out = append(out, m.File)
			}
			if m.Kustomize != "" {
				out = append(out, m.Kustomize)
			}
		}
	}
	switch {
	case st.Apply != nil:
		manifests(st.Apply.Manifests)
	case st.Delete != nil:
		manifests(st.Delete.Manifests)
	case st.Helm != nil:
		for _, v := range st.Helm.ValuesFrom {
			if v.File != "" {
				out = append(out, v.File)
			}
		}
		if spec.IsLocalPath(st.Helm.Chart) {
			out = append(out, st.Helm.Chart)
		}
	}
	return out
}

// files digests the content of every local path the step reads; a
// directory contributes each regular file under it, by relative path.
func (h *Hasher) files(st *spec.Step) (string, error) {
	var b strings.Builder
	for _, p := range LocalPaths(st) {
		full := spec.Resolve(h.BaseDir, p)
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
			fmt.Fprintf(&b, "%s\x00%s\x00%x\n", p, filepath.ToSlash(rel), sum)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("step %s: read %s: %w", st.Name, p, err)
		}
	}
	return b.String(), nil
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
