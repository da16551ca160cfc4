// Package diff shows what a step would change: the two versions of an
// object (live, and merged as apply would leave it) as YAML, with server
// bookkeeping dropped and secrets masked, and a unified diff of them,
// plain or coloured; or, for an external diff program
// (KUBECTL_EXTERNAL_DIFF), the two versions as trees of YAML files. It
// never talks to a cluster: the step executors compute the versions (see
// khook.io/core/step.Differ).
package diff

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"khook.io/core/redact"
)

// The masks of Secret values, as kubectl diff writes them.
const (
	Mask       = redact.Mask
	MaskBefore = Mask + " (before)"
	MaskAfter  = Mask + " (after)"
)

// Pair is the YAML of an object's two versions as diff shows them; ""
// for a version that does not exist.
type Pair struct {
	Live, Merged string
}

// Changed reports whether the versions differ. Masking keeps every
// difference: two different values masked alike are told apart by
// MaskBefore and MaskAfter.
func (p Pair) Changed() bool { return p.Live != p.Merged }

// Prepare returns the YAML of both versions of an object (either may be
// nil, for an object created or deleted), as diff shows them:
//
//   - metadata.managedFields is dropped, as kubectl diff does;
//   - in a core v1 Secret, every value of data and stringData is masked
//     the way kubectl diff's Masker does it: Mask on both sides when the
//     value stays the same, MaskBefore and MaskAfter when it changes
//     (extended to stringData, and to the copy of both inside the
//     last-applied-configuration annotation);
//   - the fields khook wrote from a secret variable (SecretFields: where
//     the merged version holds a registered value) are masked in both
//     versions whatever they hold, so a rotated secret's old value, which
//     this run never learned, shows nowhere: neither in the field, nor in
//     the same field of the last-applied-configuration annotation (also
//     when that copy is the same on both sides, as server-side apply
//     leaves it), nor in a list whose items moved;
//   - every value registered with red (the run's KHOOK_SECRET_* values
//     and their encodings) is masked wherever it appears, in any kind; a
//     string that changes next to a registered value, such as a rotated
//     token whose old value khook never knew, is masked on both sides
//     and the two told apart by MaskBefore and MaskAfter.
//
// The objects are not modified.
func Prepare(live, merged *unstructured.Unstructured, red *redact.Redactor) (Pair, error) {
	var l, m map[string]any
	if live != nil {
		l = live.DeepCopy().Object
	}
	if merged != nil {
		m = merged.DeepCopy().Object
	}
	stripManagedFields(l)
	stripManagedFields(m)
	if isSecret(l) || isSecret(m) {
		maskSecret(l, m)
	}
	maskKhookFields(red, l, m)
	if l != nil && m != nil {
		maskPair(red, l, m)
	} else {
		l, _ = maskAll(red, l).(map[string]any)
		m, _ = maskAll(red, m).(map[string]any)
	}
	var p Pair
	var err error
	if p.Live, err = toYAML(l, red); err != nil {
		return Pair{}, err
	}
	if p.Merged, err = toYAML(m, red); err != nil {
		return Pair{}, err
	}
	return p, nil
}

// toYAML renders obj as YAML, masked once more as a whole: a registered
// value in a map key or a number is masked too.
func toYAML(obj map[string]any, red *redact.Redactor) (string, error) {
	if obj == nil {
		return "", nil
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("render the object as YAML: %w", err)
	}
	return red.String(string(out)), nil
}

// stripManagedFields drops metadata.managedFields: who owns which field
// changes with every write and is not what apply changes.
func stripManagedFields(obj map[string]any) {
	if obj != nil {
		unstructured.RemoveNestedField(obj, "metadata", "managedFields")
	}
}

func isSecret(obj map[string]any) bool {
	return obj != nil && obj["apiVersion"] == "v1" && obj["kind"] == "Secret"
}

// secretFields hold a Secret's values.
var secretFields = []string{"data", "stringData"}

// maskSecret masks the values of a Secret's data and stringData in both
// versions (either may be nil), and inside the last-applied-configuration
// annotation, which client-side apply keeps a copy of them in.
func maskSecret(from, to map[string]any) {
	for _, field := range secretFields {
		maskValues(nestedMap(from, field), nestedMap(to, field))
	}
	af, fok := annotation(from)
	at, tok := annotation(to)
	if !fok && !tok {
		return
	}
	pf, pt := parseJSON(af, fok), parseJSON(at, tok)
	for _, field := range secretFields {
		maskValues(nestedMap(pf, field), nestedMap(pt, field))
	}
	if fok {
		setAnnotation(from, encodeJSON(pf, af))
	}
	if tok {
		setAnnotation(to, encodeJSON(pt, at))
	}
}

// maskValues is kubectl diff's Masker on one map of values: a key on both
// sides is Mask on both when its value is the same, MaskBefore and
// MaskAfter when it differs; a key on one side only is Mask.
func maskValues(from, to map[string]any) {
	for k, fv := range from {
		if tv, ok := to[k]; ok {
			if !reflect.DeepEqual(fv, tv) {
				from[k], to[k] = MaskBefore, MaskAfter
				continue
			}
			to[k] = Mask
		}
		from[k] = Mask
	}
	for k := range to {
		if _, ok := from[k]; !ok {
			to[k] = Mask
		}
	}
}

// nestedMap returns obj[field] when it is a map (the very map, to modify
// in place), nil otherwise.
func nestedMap(obj map[string]any, field string) map[string]any {
	if obj == nil {
		return nil
	}
	m, _ := obj[field].(map[string]any)
	return m
}

func annotation(obj map[string]any) (string, bool) {
	ann := nestedMap(nestedMap(obj, "metadata"), "annotations")
	v, ok := ann[corev1.LastAppliedConfigAnnotation].(string)
	return v, ok
}

func setAnnotation(obj map[string]any, v string) {
	nestedMap(nestedMap(obj, "metadata"), "annotations")[corev1.LastAppliedConfigAnnotation] = v
}

// parseJSON decodes the annotation; nil when absent or not a JSON object.
func parseJSON(s string, ok bool) map[string]any {
	if !ok {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil
	}
	return m
}

// encodeJSON encodes the masked annotation, keeping the original's final
// newline; an annotation that was not a JSON object could hold anything
// and is masked whole.
func encodeJSON(m map[string]any, orig string) string {
	if m == nil {
		return Mask
	}
	out, err := encodeLike(m, orig)
	if err != nil {
		return Mask
	}
	return out
}

// maskPair masks registered values in two versions of a value, pairing
// map entries by key and list items by index, so that a string that
// changes is masked with its counterpart in mind (see maskStrings).
// Maps and lists are modified in place.
func maskPair(red *redact.Redactor, a, b any) (any, any) {
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			for k, x := range av {
				if y, ok := bv[k]; ok {
					av[k], bv[k] = maskPair(red, x, y)
				} else {
					av[k] = maskAll(red, x)
				}
			}
			for k, y := range bv {
				if _, ok := av[k]; !ok {
					bv[k] = maskAll(red, y)
				}
			}
			return av, bv
		}
	case []any:
		if bv, ok := b.([]any); ok {
			for i := range max(len(av), len(bv)) {
				switch {
				case i < len(av) && i < len(bv):
					av[i], bv[i] = maskPair(red, av[i], bv[i])
				case i < len(av):
					av[i] = maskAll(red, av[i])
				default:
					bv[i] = maskAll(red, bv[i])
				}
			}
			return av, bv
		}
	case string:
		if bv, ok := b.(string); ok {
			return maskStrings(red, av, bv)
		}
	}
	return maskAll(red, a), maskAll(red, b)
}

// maskAll masks registered values in every string of v. Maps and lists
// are modified in place.
func maskAll(red *redact.Redactor, v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, y := range x {
			x[k] = maskAll(red, y)
		}
	case []any:
		for i, y := range x {
			x[i] = maskAll(red, y)
		}
	case string:
		return red.String(x)
	}
	return v
}

// maskStrings masks registered values in the two versions of a string.
// When the versions differ and hold different registered values (or one
// holds some and the other none), the changed middle of both (from the
// first to the last difference, widened to cover every registered value)
// is masked: the old version of a rotated secret is not registered, but
// it sits where the new one does. Two JSON objects (the last-applied
// annotation) are masked value by value instead. Two versions that differ
// but mask alike are told apart by MaskBefore and MaskAfter. (Map keys
// are not paired; Prepare masks the finished YAML once more, which covers
// a registered value in a key or a number.)
func maskStrings(red *redact.Redactor, a, b string) (string, string) {
	if a == b {
		r := red.String(a)
		return r, r
	}
	sa, sb := spans(red, a), spans(red, b)
	if (len(sa) > 0 || len(sb) > 0) && !slices.Equal(red.Occurrences(a), red.Occurrences(b)) {
		if ja, jb, ok := maskJSON(red, a, b); ok {
			return ja, jb
		}
		p, q := commonPrefix(a, b), commonSuffix(a, b)
		if len(sa) > 0 {
			p, q = min(p, sa[0][0]), min(q, len(a)-sa[len(sa)-1][1])
		}
		if len(sb) > 0 {
			p, q = min(p, sb[0][0]), min(q, len(b)-sb[len(sb)-1][1])
		}
		// never cut a character in two
		for p > 0 && !(runeStart(a, p) && runeStart(b, p)) {
			p--
		}
		for q > 0 && !(runeStart(a, len(a)-q) && runeStart(b, len(b)-q)) {
			q--
		}
		a = a[:p] + Mask + a[len(a)-q:]
		b = b[:p] + Mask + b[len(b)-q:]
	}
	ra, rb := red.String(a), red.String(b)
	if ra == rb {
		ra, rb = distinguish(ra, MaskBefore), distinguish(rb, MaskAfter)
	}
	return ra, rb
}

// maskJSON masks two versions of a JSON object (the last-applied
// configuration annotation is one) value by value, as maskPair does; ok
// is false unless both are JSON objects.
func maskJSON(red *redact.Redactor, a, b string) (string, string, bool) {
	var ma, mb map[string]any
	if json.Unmarshal([]byte(a), &ma) != nil || json.Unmarshal([]byte(b), &mb) != nil || ma == nil || mb == nil {
		return "", "", false
	}
	maskPair(red, ma, mb)
	ea, err1 := encodeLike(ma, a)
	eb, err2 := encodeLike(mb, b)
	if err1 != nil || err2 != nil {
		return "", "", false
	}
	// safety net: whatever the structure hid from maskPair (a key)
	ea, eb = red.String(ea), red.String(eb)
	if ea == eb {
		ea, eb = distinguish(ea, MaskBefore), distinguish(eb, MaskAfter)
	}
	return ea, eb, true
}

// encodeLike encodes m as compact JSON without HTML escaping, ending in a
// newline when orig does.
func encodeLike(m map[string]any, orig string) (string, error) {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return "", err
	}
	out := strings.TrimSuffix(buf.String(), "\n")
	if strings.HasSuffix(orig, "\n") {
		out += "\n"
	}
	return out, nil
}

// distinguish replaces every Mask in s with mask, or appends mask's
// suffix when s holds none.
func distinguish(s, mask string) string {
	if strings.Contains(s, Mask) {
		return strings.ReplaceAll(s, Mask, mask)
	}
	return s + strings.TrimPrefix(mask, Mask)
}

// spans returns where registered values sit in s, in order.
func spans(red *redact.Redactor, s string) [][2]int {
	var out [][2]int
	at := 0
	for _, occ := range red.Occurrences(s) {
		i := strings.Index(s[at:], occ)
		if i < 0 {
			break
		}
		out = append(out, [2]int{at + i, at + i + len(occ)})
		at += i + len(occ)
	}
	return out
}

// runeStart reports whether s[i:] starts with a whole character.
func runeStart(s string, i int) bool { return i >= len(s) || utf8.RuneStart(s[i]) }

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// commonSuffix is the length of the common suffix of a and b that does
// not overlap their common prefix.
func commonSuffix(a, b string) int {
	p := commonPrefix(a, b)
	n := 0
	for n < len(a)-p && n < len(b)-p && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}
