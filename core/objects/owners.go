package objects

import (
	"fmt"
	pathpkg "path"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"khook.io/core/spec"
)

// Whose a field is, when its live value is not the one khook (or helm)
// last wrote: the one rule the drift check of a release and the apply of
// an existing object share (decisions 250-252).
//
// A field of the manifest whose live value differs was written since
// khook or helm last wrote it, by the managers that own it now (a write
// that changes a field takes it over, in managedFields). Who they are
// decides:
//
//   - nobody owns it (it was removed, or written without managed fields),
//     or khook's or helm's own manager still does: drift, put back;
//   - a person, kubectl's managers: kubectl (apply --server-side),
//     kubectl-client-side-apply, kubectl-edit, kubectl-patch,
//     kubectl-replace, kubectl-set, kubectl-label, kubectl-annotate, any
//     kubectl-*, and before-first-apply (what the API server names a
//     field written before managed fields existed): drift, put back;
//   - anything else is a controller (cert-manager's cainjector, an
//     operator, an admission webhook's patch job, a tool khook does not
//     know): the field is that manager's, kept as it is: never put back,
//     so khook never fights it; so is a field written through a
//     subresource (an autoscaler's replicas, through scale).
//
// A policy (spec.Drift) changes the default: managers.keep keeps what a
// manager wrote, whoever it is; managers.take puts it back, whoever it
// is; an ignore rule leaves a field out of the comparison altogether.
// Of several owners, the strongest word wins: managers.keep, then
// managers.take, then the default keep, then the default repair.

// Policy is a step's drift policy, read (NewPolicy).
type Policy struct {
	// Mode is spec.DriftRepair, spec.DriftWarn or spec.DriftOff.
	Mode   string
	Ignore []IgnoreRule
	// Keep and Take are field manager names or globs (path.Match).
	Keep, Take []string
}

// IgnoreRule is one drift.ignore entry, read.
type IgnoreRule struct {
	Paths  []spec.Pointer
	Target *Target
}

// Target selects objects; a zero field matches any object.
type Target struct {
	Group, Kind, Name, Namespace string
	// GroupSet: Group was written (possibly "", the core group).
	GroupSet bool
	Selector labels.Selector
}

// NewPolicy reads d (nil: the default policy). d was validated: a
// pointer or selector that does not parse is an error all the same.
func NewPolicy(d *spec.Drift) (Policy, error) {
	p := Policy{Mode: d.EffectiveMode()}
	if d == nil {
		return p, nil
	}
	if d.Managers != nil {
		p.Keep, p.Take = d.Managers.Keep, d.Managers.Take
	}
	for _, r := range d.Ignore {
		rule := IgnoreRule{}
		for _, s := range r.Paths {
			ptr, err := spec.ParsePointer(s)
			if err != nil {
				return p, err
			}
			rule.Paths = append(rule.Paths, ptr)
		}
		if t := r.Target; t != nil {
			rule.Target = &Target{Group: t.Group, Kind: t.Kind, Name: t.Name, Namespace: t.Namespace, GroupSet: t.Group != ""}
			if t.LabelSelector != "" {
				sel, err := labels.Parse(t.LabelSelector)
				if err != nil {
					return p, fmt.Errorf("drift ignore target: label selector %q: %w", t.LabelSelector, err)
				}
				rule.Target.Selector = sel
			}
		}
		p.Ignore = append(p.Ignore, rule)
	}
	return p, nil
}

// Matches reports whether t selects obj (an object as its manifest
// writes it, namespace filled in).
func (t *Target) Matches(obj *unstructured.Unstructured) bool {
	if t == nil {
		return true
	}
	gvk := obj.GroupVersionKind()
	switch {
	case t.GroupSet && t.Group != gvk.Group,
		t.Kind != "" && t.Kind != gvk.Kind,
		t.Name != "" && !glob(t.Name, obj.GetName()),
		t.Namespace != "" && !glob(t.Namespace, obj.GetNamespace()),
		t.Selector != nil && !t.Selector.Matches(labels.Set(obj.GetLabels())):
		return false
	}
	return true
}

func glob(pattern, s string) bool {
	ok, err := pathpkg.Match(pattern, s)
	return err == nil && ok
}

// Ignored reports whether an ignore rule covers the field f of intent (an
// object as its manifest writes it): a rule whose target selects intent
// and one of whose pointers names f or a field above it.
func (p Policy) Ignored(intent *unstructured.Unstructured, f fieldpath.Path) bool {
	if len(p.Ignore) == 0 {
		return false
	}
	var tokens []string
	for _, r := range p.Ignore {
		if !r.Target.Matches(intent) {
			continue
		}
		if tokens == nil {
			tokens = PointerTokens(intent.Object, f)
		}
		for _, ptr := range r.Paths {
			if pointerCovers(ptr, tokens) {
				return true
			}
		}
	}
	return false
}

// PointerTokens are the reference tokens of a JSON pointer to the field
// p of obj: a list entry by its index in obj's list (a key field a
// manifest leaves to its default matching any), "-" for an entry obj
// does not have.
func PointerTokens(obj map[string]any, p fieldpath.Path) []string {
	out := make([]string, 0, len(p))
	var v any = obj
	for _, pe := range p {
		if pe.FieldName != nil {
			out = append(out, *pe.FieldName)
			m, _ := v.(map[string]any)
			v = m[*pe.FieldName]
			continue
		}
		l, _ := v.([]any)
		i := EntryIndex(l, pe, true)
		if i < 0 {
			out = append(out, "-")
			v = nil
			continue
		}
		out = append(out, strconv.Itoa(i))
		v = l[i]
	}
	return out
}

// pointerCovers reports whether ptr names the field of tokens or a field
// above it; a "*" token matches any.
func pointerCovers(ptr spec.Pointer, tokens []string) bool {
	if len(ptr) > len(tokens) {
		return false
	}
	for i, t := range ptr {
		if t != "*" && t != tokens[i] {
			return false
		}
	}
	return true
}

// Kept is a field the manifest sets whose live value differs and that a
// step leaves as it is: another writer's, or ignored.
type Kept struct {
	Ref  Ref
	Path string
	// Why says whose it is: "written by cainjector", "written by
	// kube-controller-manager through scale", "written by another step of
	// the spec (khook)", "drift.ignore".
	Why string
}

// String is the field as plan and the outcome name it:
// "ConfigMap/inj-ca data.ca (written by cainjector)".
func (k Kept) String() string {
	return k.Ref.KindName() + " " + k.Path + " (" + k.Why + ")"
}

// Verdict is whose a differing field is.
type Verdict struct {
	// Keep: another writer's; left as it is, never in a write.
	Keep bool
	// By are the field's owners other than the step's own managers.
	By []Owner
	// Why says why it is kept, or why it is put back: "written by
	// cainjector", "written by kube-controller-manager through scale",
	// "managers.keep".
	Why string
}

// Writers names the owners as a plan prints them: "cainjector",
// "kube-controller-manager through scale".
func (v Verdict) Writers() string { return WriterNames(v.By) }

// WriterNames names owners as a plan prints them.
func WriterNames(owners []Owner) string {
	names := make([]string, 0, len(owners))
	for _, o := range owners {
		n := o.Manager
		if o.Subresource != "" {
			n += " through " + o.Subresource
		}
		if !containsString(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// word is how strongly a policy keeps or takes an owner's write.
type word int

const (
	takeByDefault word = iota + 1 // a person's write
	keepByDefault                 // a controller's, or through a subresource
	takeByPolicy                  // managers.take
	keepByPolicy                  // managers.keep
)

// Judge says whose the field f (whose live value differs from the
// intent's) is, mine being the step's own field managers (khook's, or
// helm's for a release): see the rule above.
func (p Policy) Judge(f Field, mine ...string) Verdict {
	var others []Owner
	for _, o := range f.Owners {
		if containsString(mine, o.Manager) {
			return Verdict{} // still ours: drift
		}
		others = append(others, o)
	}
	if len(others) == 0 {
		return Verdict{}
	}
	best, why := word(0), ""
	for _, o := range others {
		w, reason := p.word(o)
		if w > best {
			best, why = w, reason
		}
	}
	v := Verdict{By: others, Why: why}
	v.Keep = best == keepByDefault || best == keepByPolicy
	return v
}

// word is the policy's word on one owner's write.
func (p Policy) word(o Owner) (word, string) {
	written := "written by " + WriterNames([]Owner{o})
	switch {
	case matchAny(p.Keep, o.Manager):
		return keepByPolicy, written + ", kept by managers.keep"
	case matchAny(p.Take, o.Manager):
		return takeByPolicy, written + ", taken back by managers.take"
	case o.Subresource != "":
		return keepByDefault, written
	case Person(o.Manager):
		return takeByDefault, written
	}
	return keepByDefault, written
}

// Keeps reports whether the policy keeps the writes of a field's live
// owners others (no manager of the step's own among them) even where the
// value is the manifest's: a controller's, or managers.keep's. A repair
// leaves such a field out of its write, so that a write of theirs between
// the check and the repair is not undone.
func (p Policy) Keeps(others []Owner) bool {
	if len(others) == 0 {
		return false
	}
	return p.Judge(Field{Owners: others}).Keep
}

func matchAny(patterns []string, s string) bool {
	for _, pat := range patterns {
		if glob(pat, s) {
			return true
		}
	}
	return false
}

// Person reports whether a field manager is a person's tool: kubectl's
// own managers (kubectl, kubectl-edit, kubectl-patch,
// kubectl-client-side-apply, kubectl-replace, ...: any kubectl-*), and
// before-first-apply, the API server's name for whoever wrote a field
// before managed fields were kept. Anything else is taken for a
// controller.
func Person(manager string) bool {
	return manager == "kubectl" || strings.HasPrefix(manager, "kubectl-") || manager == "before-first-apply"
}

// Sorted is how a policy sorts the fields of an existing object a step
// applies again (Policy.Sort).
type Sorted struct {
	// Kept are the fields left to other writers, Ignored those an ignore
	// rule names: neither is written.
	Kept, Ignored []Kept
	// Left are the fields a person changed that the policy leaves (warn):
	// "data.mode"; not written either.
	Left []string
	// Leave are the paths of all of them: what the write leaves out.
	Leave []fieldpath.Path
}

// LeftLine is the line a plan and an outcome give the fields of ref a
// warn policy leaves as they are.
func LeftLine(ref Ref, fields []string) string {
	return "drift: " + ref.KindName() + " " + strings.Join(fields, ", ") + " (left as it is: drift mode warn)"
}

// Sort sorts the fields intent (a manifest, as written) sets whose live
// value differs, for an apply of intent over live by the step's own
// managers mine: a field mine still owns, or nobody does, is written (the
// spec changed it, or it was removed); so is one whose value in intent
// is not the one previous (what the step applied last, when known: the
// last-applied configuration of client-side apply) holds: the spec
// changed it. One the policy keeps for another writer (Judge), or
// ignores, is left out; one a person changed is written back (repair) or
// left out and reported (warn). Only the fields that differ are read; an
// object holding every field intent sets is decided without reading any
// schema.
func (p Policy) Sort(intent, previous, live *unstructured.Unstructured, mine ...string) (Sorted, error) {
	var out Sorted
	stored := AsStored(intent)
	if live == nil || Contained(stored.Object, live.Object, true) {
		return out, nil
	}
	var before map[string]any
	if previous != nil {
		before = AsStored(previous).Object
	}
	fields, err := Fields(stored, live)
	if err != nil {
		return out, err
	}
	ref := RefOf(intent)
	for _, f := range fields {
		if f.Equal || f.KeyField() || SameField(f.Intent, true, f.Live, f.InLive) {
			continue
		}
		if before != nil {
			if was, ok := LookupPath(before, f.Path); !ok || !SameJSON(was, f.Intent) {
				continue // the spec changed it: written
			}
		}
		v := p.Judge(f, mine...)
		if len(v.By) == 0 {
			continue // ours, or nobody's: written
		}
		name := strings.TrimPrefix(f.Path.String(), ".")
		switch {
		case p.Ignored(stored, f.Path):
			out.Ignored = append(out.Ignored, Kept{Ref: ref, Path: name, Why: "drift.ignore"})
		case v.Keep:
			out.Kept = append(out.Kept, Kept{Ref: ref, Path: name, Why: v.Why})
		case p.Mode == spec.DriftWarn:
			out.Left = append(out.Left, name)
		default:
			continue // a person's: put back
		}
		out.Leave = append(out.Leave, f.Path)
	}
	return out, nil
}
