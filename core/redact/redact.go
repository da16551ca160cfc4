// Package redact is the single secret redactor every output of khook passes
// through: validate/plan/graph output and errors, and later logs, diffs, JSON
// and the state record.
//
// A Redactor holds a set of registered secret values. String, Bytes, Error
// and Writer replace every occurrence of any registered value with Mask and
// strip the userinfo of every URL-looking substring (scheme://user:pass@host
// becomes scheme://***@host), so credentials written inline in a URL never
// leak even when they were never registered.
//
// For each registered secret, derived forms are registered too, so that an
// encoded copy cannot leak: the whitespace-trimmed value, the JSON string
// escape (with and without HTML escaping), the Go %q escape, the URL query and
// path escapes, standard and URL-safe base64 with and without padding, the
// base64 characters the secret determines when it sits at any offset inside a
// longer base64-encoded blob (e.g. "user:secret" in a basic-auth header), and,
// for a multi-line secret, every line of at least 6 characters (a PEM key
// printed line by line is still masked).
//
// Every registered value is masked regardless of its length: a very short
// secret (say "a") masks every occurrence of that text, including inside
// unrelated words. Overlapping or nested matches are merged and masked as one
// unit, so a secret never leaks partially because a different registered
// value matched first.
//
// A nil *Redactor is a valid no-op redactor that still strips URL userinfo,
// so callers never need to nil-check.
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Mask replaces every redacted value.
const Mask = "***"

// minLineLen is the minimum length, in characters, of a line of a
// multi-line secret for that line to be registered on its own.
const minLineLen = 6

// minB64InnerLen is the minimum length of the base64 characters a secret
// determines inside a longer base64 blob for them to be registered; shorter
// fragments would mask unrelated base64 text by chance.
const minB64InnerLen = 8

// Redactor masks registered secret values. It is safe for concurrent use.
// The zero value is not usable; call New. A nil *Redactor is a valid no-op
// redactor that only strips URL userinfo.
type Redactor struct {
	mu      sync.Mutex
	primary map[string]struct{} // values passed to Add
	forms   map[string]struct{} // every pattern to mask (primary + derived)
	gen     atomic.Uint64       // bumped under mu whenever forms changes
	m       atomic.Pointer[matcher]
}

// New returns an empty Redactor.
func New() *Redactor {
	return &Redactor{
		primary: make(map[string]struct{}),
		forms:   make(map[string]struct{}),
	}
}

// Add registers secret, and its derived forms, for masking. Adding "" is a
// no-op, and adding the same value twice has no further effect. Add on a nil
// Redactor is a no-op.
func (r *Redactor) Add(secret string) {
	if r == nil || secret == "" {
		return
	}
	r.mu.Lock()
	_, seen := r.primary[secret]
	r.mu.Unlock()
	if seen {
		return // fast path: no derived forms computed, no allocation
	}
	fs := derivedForms(secret)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.primary[secret]; seen {
		return
	}
	r.primary[secret] = struct{}{}
	changed := false
	for _, f := range fs {
		if _, ok := r.forms[f]; !ok {
			r.forms[f] = struct{}{}
			changed = true
		}
	}
	if changed {
		r.gen.Add(1)
	}
}

// Len returns the number of distinct values passed to Add (derived forms are
// not counted).
func (r *Redactor) Len() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.primary)
}

// String returns s with every registered value masked and URL userinfo
// stripped. When nothing needs masking, s itself is returned without
// allocating.
func (r *Redactor) String(s string) string {
	if m := r.matcher(); m != nil {
		s = maskString(m, s)
	}
	return StripURLUserinfo(s)
}

// Bytes is String for a byte slice. When nothing needs masking, b itself is
// returned; otherwise a new slice is returned and b is left unmodified.
func (r *Redactor) Bytes(b []byte) []byte {
	if m := r.matcher(); m != nil {
		b = maskBytes(m, b)
	}
	return stripURLUserinfoBytes(b)
}

// matcher returns the current matcher, rebuilding it if values were added
// since it was built. It returns nil when nothing is registered.
func (r *Redactor) matcher() *matcher {
	if r == nil {
		return nil
	}
	gen := r.gen.Load()
	if m := r.m.Load(); m != nil && m.gen == gen {
		return m.orNil()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	gen = r.gen.Load() // stable while mu is held
	if m := r.m.Load(); m != nil && m.gen == gen {
		return m.orNil()
	}
	m := buildMatcher(r.forms, gen)
	r.m.Store(m)
	return m.orNil()
}

// derivedForms returns secret and every encoded form of it that could appear
// in output. Duplicates are harmless.
func derivedForms(secret string) []string {
	fs := make([]string, 0, 24)
	add := func(f string) {
		if f != "" {
			fs = append(fs, f)
		}
	}
	add(secret)
	add(strings.TrimSpace(secret))

	// JSON string escape, without the quotes: encoding/json's default (HTML
	// escaping <, >, &) and the SetEscapeHTML(false) variant.
	if jb, err := json.Marshal(secret); err == nil && len(jb) >= 2 {
		add(string(jb[1 : len(jb)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(secret); err == nil {
		jb := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if len(jb) >= 2 {
			add(string(jb[1 : len(jb)-1]))
		}
	}
	// Go %q escape (error messages), without the quotes.
	q := strconv.Quote(secret)
	add(q[1 : len(q)-1])

	add(url.QueryEscape(secret))
	add(url.PathEscape(secret))

	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		add(e.EncodeToString([]byte(secret)))
	}
	// The base64 characters that depend only on the secret when it sits at
	// byte offset 0, 1 or 2 (mod 3) inside a longer encoded blob.
	for _, e := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for off := 0; off < 3; off++ {
			b := make([]byte, off+len(secret))
			copy(b[off:], secret)
			enc := e.EncodeToString(b)
			start := (8*off + 5) / 6
			end := 8 * (off + len(secret)) / 6
			if end-start >= minB64InnerLen {
				add(enc[start:end])
			}
		}
	}

	if strings.ContainsAny(secret, "\n\r") {
		for _, line := range strings.FieldsFunc(secret, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if utf8.RuneCountInString(line) >= minLineLen {
				add(line)
			}
			if t := strings.TrimSpace(line); utf8.RuneCountInString(t) >= minLineLen {
				add(t)
			}
		}
	}
	return fs
}

// matcher finds registered values in text. It is immutable once built.
//
// Values of at least 4 bytes are found through their first 4 bytes: a
// rolling 4-byte window is tested against a bloom filter, and only on a hit
// is the exact map consulted, so clean text costs a couple of nanoseconds a
// byte whatever the number of registered values. Shorter values are bucketed by
// their first byte.
type matcher struct {
	gen      uint64
	empty    bool
	minLen   int
	maxLen   int
	anyShort bool
	hasShort [256]bool
	short    [256][]string // values shorter than 4 bytes, by first byte, longest first
	bloom    [bloomWords]uint64
	long     map[uint32][]string // values of 4+ bytes, by first 4 bytes, longest first
}

const (
	bloomBits  = 15 // 2^15 bits: under 1% fill for a thousand values
	bloomWords = 1 << bloomBits / 64
)

func (m *matcher) orNil() *matcher {
	if m.empty {
		return nil
	}
	return m
}

func bloomIndex(k uint32) uint32 { return (k * 0x9E3779B1) >> (32 - bloomBits) }

func (m *matcher) bloomHas(k uint32) bool {
	h := bloomIndex(k)
	return m.bloom[h>>6]&(1<<(h&63)) != 0
}

func buildMatcher(forms map[string]struct{}, gen uint64) *matcher {
	m := &matcher{gen: gen, empty: len(forms) == 0, minLen: math.MaxInt, long: make(map[uint32][]string)}
	for f := range forms {
		m.minLen = min(m.minLen, len(f))
		m.maxLen = max(m.maxLen, len(f))
		if len(f) < 4 {
			m.anyShort = true
			m.hasShort[f[0]] = true
			m.short[f[0]] = append(m.short[f[0]], f)
			continue
		}
		k := key4(f, 0)
		h := bloomIndex(k)
		m.bloom[h>>6] |= 1 << (h & 63)
		m.long[k] = append(m.long[k], f)
	}
	longestFirst := func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	}
	for i := range m.short {
		slices.SortFunc(m.short[i], longestFirst)
	}
	for _, ps := range m.long {
		slices.SortFunc(ps, longestFirst)
	}
	return m
}

type text interface{ ~string | ~[]byte }

func key4[T text](s T, i int) uint32 {
	return uint32(s[i])<<24 | uint32(s[i+1])<<16 | uint32(s[i+2])<<8 | uint32(s[i+3])
}

// longestAt returns the length of the longest registered value starting at
// s[i], or 0. k must be key4(s, i) when i+4 <= len(s).
func longestAt[T text](m *matcher, s T, i int, k uint32) int {
	rest := len(s) - i
	if rest >= 4 && m.bloomHas(k) {
		for _, p := range m.long[k] {
			if len(p) <= rest && string(s[i:i+len(p)]) == p {
				return len(p)
			}
		}
	}
	if m.hasShort[s[i]] {
		for _, p := range m.short[s[i]] {
			if len(p) <= rest && string(s[i:i+len(p)]) == p {
				return len(p)
			}
		}
	}
	return 0
}

// nextMatch returns the next merged interval [start, end) at or after from
// covered by registered values (overlapping and nested occurrences are
// merged), or -1, -1.
func nextMatch[T text](m *matcher, s T, from int) (int, int) {
	n := len(s)
	if n-from < m.minLen {
		return -1, -1
	}
	var k uint32
	if from+3 < n {
		k = uint32(s[from])<<16 | uint32(s[from+1])<<8 | uint32(s[from+2])
	}
	bloom := &m.bloom
	for i := from; i < n; i++ {
		cand := false
		if i+3 < n {
			k = k<<8 | uint32(s[i+3])
			h := bloomIndex(k)
			cand = bloom[h>>6&(bloomWords-1)]&(1<<(h&63)) != 0
		} else if !m.anyShort {
			break // no value shorter than 4 bytes can start here
		}
		if !cand && !(m.anyShort && m.hasShort[s[i]]) {
			continue
		}
		l := longestAt(m, s, i, k)
		if l == 0 {
			continue
		}
		end := i + l
		for j := i + 1; j < end; j++ {
			var kj uint32
			if j+3 < n {
				kj = key4(s, j)
			}
			if e := j + longestAt(m, s, j, kj); e > end {
				end = e
			}
		}
		return i, end
	}
	return -1, -1
}

func maskString(m *matcher, s string) string {
	start, end := nextMatch(m, s, 0)
	if start < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for start >= 0 {
		b.WriteString(s[last:start])
		b.WriteString(Mask)
		last = end
		start, end = nextMatch(m, s, end)
	}
	b.WriteString(s[last:])
	return b.String()
}

func maskBytes(m *matcher, s []byte) []byte {
	start, end := nextMatch(m, s, 0)
	if start < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	last := 0
	for start >= 0 {
		out = append(out, s[last:start]...)
		out = append(out, Mask...)
		last = end
		start, end = nextMatch(m, s, end)
	}
	return append(out, s[last:]...)
}

// Occurrences returns the text of every masked span of s, in order: the
// secret material s carries. The state record fingerprints it (slowly,
// salted) instead of storing anything from which a secret could be read.
func (r *Redactor) Occurrences(s string) []string {
	m := r.matcher()
	if m == nil {
		return nil
	}
	var out []string
	for start, end := nextMatch(m, s, 0); start >= 0; start, end = nextMatch(m, s, end) {
		out = append(out, s[start:end])
	}
	return out
}
