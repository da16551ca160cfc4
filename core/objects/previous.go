package objects

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// AnnotationPrevious is khook's record, on an object it configured but
// did not create, of what the fields it wrote held before it first wrote
// each (decision 210): destroy puts those values back. Its value is a
// JSON object:
//
//	{"known":  {managedFields set}, "values": {the object's previous values at those fields},
//	 "absent": {set}, "secret": {set}, "large": {set}}
//
// known are the fields that held a value, kept in values (an object of
// the object's shape holding only them); absent the fields that did not
// exist (khook added them); secret and large the fields that held a value
// khook did not keep: a Secret's data or stringData, a value holding a
// secret khook knows (a registered secret, or what a field khook writes a
// secret into held), or more than the record may hold. Sets are written
// as managedFields write them (FieldsV1).
const AnnotationPrevious = "khook.io/previous"

// previousManagerSuffix names the field manager that writes the record
// (the step's field manager plus it), by server-side apply: not the
// manager of client-side apply, whose fields a switch to server-side
// apply hands to khook's server-side apply, which would then remove the
// record as a field it no longer applies; and not an Update, which a
// switch to server-side apply would count as a client-side writer.
const previousManagerSuffix = "-previous"

// lastAppliedField is the last-applied-configuration annotation as a
// field: client-side apply writes it (and a switch to server-side apply
// removes another writer's), so the record keeps what it held before.
var lastAppliedField = fieldpath.MakePathOrDie("metadata", "annotations", corev1.LastAppliedConfigAnnotation)

// previous is khook's record of an object, read (loadPrevious): from
// its annotation or from its companion.
type previous struct {
	known, absent, secret, large *fieldpath.Set
	values                       map[string]any
	exists                       bool // the object has a record
	// the object's annotation as read ("" without one), and whether it is
	// the record itself (not a pointer to the companion)
	annotation                  string
	hasAnnotation, inAnnotation bool
	// companion is the Secret keeping the record, when one does
	companion *corev1.Secret
}

type previousJSON struct {
	// In, on the object, says the record is in its companion
	// ("Secret/<name>", beside it).
	In     string          `json:"in,omitempty"`
	Known  json.RawMessage `json:"known,omitempty"`
	Values map[string]any  `json:"values,omitempty"`
	Absent json.RawMessage `json:"absent,omitempty"`
	Secret json.RawMessage `json:"secret,omitempty"`
	Large  json.RawMessage `json:"large,omitempty"`
}

func newPrevious() *previous {
	return &previous{known: fieldpath.NewSet(), absent: fieldpath.NewSet(), secret: fieldpath.NewSet(), large: fieldpath.NewSet(), values: map[string]any{}}
}

// loadPrevious reads live's record (decision 260): the companion's when
// the object's annotations are copied by a controller or its annotation
// points there, else its annotation. An object without one has an empty
// record (exists false).
func (m *Manager) loadPrevious(ctx context.Context, live *unstructured.Unstructured) (*previous, error) {
	p := newPrevious()
	s, ok := live.GetAnnotations()[AnnotationPrevious]
	var j previousJSON
	if ok {
		p.annotation, p.hasAnnotation = s, true
		if err := json.Unmarshal([]byte(s), &j); err != nil {
			return nil, fmt.Errorf("read khook's record of previous values (%s): %w", AnnotationPrevious, err)
		}
	}
	if j.In != "" || annotationsCopied(live) {
		sec, err := m.readCompanion(ctx, live)
		if err != nil {
			return nil, err
		}
		if sec != nil {
			p.companion = sec
			return p, p.decode(string(sec.Data[companionKey]))
		}
	}
	if ok && j.In == "" {
		p.inAnnotation = true
		return p, p.decode(s)
	}
	return p, nil
}

// decode fills p from a record's JSON.
func (p *previous) decode(s string) error {
	p.exists = true
	var j previousJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return fmt.Errorf("read khook's record of previous values (%s): %w", AnnotationPrevious, err)
	}
	for _, f := range []struct {
		raw json.RawMessage
		set *fieldpath.Set
	}{{j.Known, p.known}, {j.Absent, p.absent}, {j.Secret, p.secret}, {j.Large, p.large}} {
		if len(f.raw) == 0 {
			continue
		}
		if err := f.set.FromJSON(bytes.NewReader(f.raw)); err != nil {
			return fmt.Errorf("read khook's record of previous values (%s): %w", AnnotationPrevious, err)
		}
	}
	if j.Values != nil {
		p.values = j.Values
	}
	return nil
}

// encoded is the record as it was read ("" when none).
func (p *previous) encoded() string {
	switch {
	case p.companion != nil:
		return string(p.companion.Data[companionKey])
	case p.inAnnotation:
		return p.annotation
	}
	return ""
}

// covers reports whether the record says anything of field p.
func (p *previous) covers(path fieldpath.Path) bool {
	return p.known.Has(path) || p.absent.Has(path) || p.secret.Has(path) || p.large.Has(path)
}

// encode is the record as the annotation holds it.
func (p *previous) encode() (string, error) {
	var j previousJSON
	for _, f := range []struct {
		set *fieldpath.Set
		raw *json.RawMessage
	}{{p.known, &j.Known}, {p.absent, &j.Absent}, {p.secret, &j.Secret}, {p.large, &j.Large}} {
		if f.set.Empty() {
			continue
		}
		b, err := f.set.ToJSON()
		if err != nil {
			return "", err
		}
		*f.raw = b
	}
	if len(p.values) > 0 {
		j.Values = p.values
	}
	b, err := json.Marshal(j)
	return string(b), err
}

// recordPrevious is called by Apply before it writes o over live, an
// object that exists. When the manager writes for a spec (CreatedBy) that
// did not create live, it adds to live's record (AnnotationPrevious) what
// each field o sets held before khook first wrote it: the fields the
// record does not cover yet and that khook's field manager does not own
// already (a field khook owns holds khook's own value: what it held
// before, an earlier khook never kept; for DefaultFieldManager only, and
// for another manager the fields its server-side apply holds and o does
// not are recorded too: see below). The last-applied annotation is
// such a field too unless it holds khook's configuration (khook's
// client-side apply wrote it, or khook's server-side apply keeps it:
// lastAppliedKhooks), and so, when another writer's client-side apply
// holds it, are the fields it names that o does not set: khook's write
// removes them. The record is written before the apply, by a server-side
// apply of the annotation alone as the record's own field manager
// (recordManager: so that no client-side writer's entry holds it), only
// when it gains something; a dry run records nothing.
//
// It returns how to take the record back to what it was, for Apply to
// call when the write it was made for is refused (nil when it wrote
// nothing): the record says what fields held before khook's first write,
// and a refused write is none; kept, it would freeze values other writers
// may change before khook's first write that succeeds, which destroy
// would then give back instead of theirs.
func (m *Manager) recordPrevious(ctx context.Context, ri dynamic.ResourceInterface, o, live *unstructured.Unstructured, opts ApplyOptions) (func(context.Context) error, error) {
	if opts.DryRun || live == nil || m.createdBy == "" || m.CreatedByThis(live) {
		return nil, nil
	}
	rec, err := m.loadPrevious(ctx, live)
	if err != nil {
		return nil, err
	}
	add, conf, err := m.previousGains(rec, o, live, opts)
	if err != nil || len(add) == 0 {
		return nil, err
	}
	before := rec.encoded()
	m.recordGains(rec, live, add, len(before))
	s, err := rec.encode()
	if err != nil {
		return nil, err
	}
	// where it is kept (decision 260): beside the object when a
	// controller copies the object's annotations, when it is kept there
	// already, or when it does not fit its annotations
	if annotationsCopied(live) || rec.companion != nil || len(s) > maxAnnotationRecord || annotationBytes(live, o, conf, s) > totalAnnotationBytes {
		return m.recordBeside(ctx, ri, live, rec, s, before)
	}
	written, err := m.applyRecordAnnotation(ctx, ri, live, s)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return m.takeBackRecord(ctx, ri, written, s, rec.annotation, rec.hasAnnotation)
	}, nil
}

// previousGain is a field the record gains: its value in live before
// khook's write (absent unless inLive), and what the write sets it to.
type previousGain struct {
	path          fieldpath.Path
	value, intent any
	inLive        bool
}

// previousGains lists what rec gains before o is written over live (see
// recordPrevious), and o's last-applied configuration.
func (m *Manager) previousGains(rec *previous, o, live *unstructured.Unstructured, opts ApplyOptions) ([]previousGain, string, error) {
	fields, err := Fields(o, live)
	if err != nil {
		return nil, "", fmt.Errorf("read the fields khook writes: %w", err)
	}
	// A field khook's field manager owns holds khook's own value (what it
	// held before, an earlier khook never kept) when the manager is
	// khook's own, DefaultFieldManager, as earlier khooks wrote. A name
	// given with --field-manager may be another tool's (kubectl's: it is
	// how objects are taken along from it), whose values khook's first
	// write overwrites as anyone's; khook never wrote as such a name
	// without recording first, so its ownership proves nothing.
	g := &gains{rec: rec, fields: fields, legacy: m.fieldManager == DefaultFieldManager, manager: m.fieldManager}
	for _, f := range fields {
		if im, ok := f.Intent.(map[string]any); ok && len(im) == 0 {
			continue // sets no field
		}
		if !rec.covers(f.Path) && !g.khooks(f) {
			g.add = append(g.add, previousGain{f.Path, f.Live, f.Intent, f.InLive})
		}
	}
	conf, err := lastApplied(o)
	if err != nil {
		return nil, "", err
	}
	clientSide := m.OwnedBy(live).ClientSide && (g.legacy || rec.covers(lastAppliedField))
	if !clientSide && !m.lastAppliedKhooks(live, conf) {
		if err := g.lastApplied(live); err != nil {
			return nil, "", err
		}
	}
	if !g.legacy && opts.ServerSide {
		if err := g.appliedSet(live); err != nil {
			return nil, "", err
		}
	}
	return g.add, conf, nil
}

// gains gathers what a record gains (previousGains).
type gains struct {
	rec     *previous
	fields  []Field // what the write sets
	legacy  bool    // the manager is DefaultFieldManager
	manager string
	add     []previousGain
}

// khooks reports whether f holds khook's own value (see previousGains).
func (g *gains) khooks(f Field) bool { return g.legacy && f.OwnedBy(g.manager) }

// adding reports whether the write sets p or the record gains it already.
func (g *gains) adding(p fieldpath.Path) bool {
	return slices.ContainsFunc(g.fields, func(f Field) bool { return f.Path.Equals(p) }) ||
		slices.ContainsFunc(g.add, func(e previousGain) bool { return e.path.Equals(p) })
}

// lastApplied adds live's last-applied annotation, which is not khook's,
// and the fields it names.
func (g *gains) lastApplied(live *unstructured.Unstructured) error {
	if !g.rec.covers(lastAppliedField) {
		v, ok := LookupPath(live.Object, lastAppliedField)
		g.add = append(g.add, previousGain{lastAppliedField, v, nil, ok})
	}
	// Another writer's client-side apply: the fields its
	// last-applied annotation names that o does not set go with
	// khook's write (client-side apply's three-way patch removes
	// them; server-side apply, having taken them over, drops them).
	foreign, err := LastApplied(live)
	if err != nil {
		return err
	}
	theirs, err := Fields(foreign, live)
	if err != nil {
		return fmt.Errorf("read the fields of the last-applied configuration: %w", err)
	}
	for _, f := range theirs {
		if f.InLive && !g.rec.covers(f.Path) && !g.khooks(f) && !g.adding(f.Path) {
			g.add = append(g.add, previousGain{f.Path, f.Live, nil, true})
		}
	}
	return nil
}

// appliedSet adds, for a field manager not khook's own, the fields live's
// server-side apply as that manager holds.
func (g *gains) appliedSet(live *unstructured.Unstructured) error {
	// Another tool's server-side apply as the same field manager:
	// the fields it applied that o does not set go with khook's
	// apply, which replaces the manager's fields with o's.
	set, err := ManagedSet(live, g.manager, metav1.ManagedFieldsOperationApply)
	if err != nil {
		return err
	}
	for p := range set.Leaves().All() {
		p = p.Copy() // the iteration reuses its path
		if !intentField(p) || g.rec.covers(p) || g.adding(p) {
			continue
		}
		if v, ok := LookupPath(live.Object, p); ok {
			g.add = append(g.add, previousGain{p, v, nil, true})
		}
	}
	return nil
}

// recordGains puts add in rec: absent, secret, known by value, or too
// large to keep (size: the record's encoded size so far).
func (m *Manager) recordGains(rec *previous, live *unstructured.Unstructured, add []previousGain, size int) {
	secretKind := isSecretKind(live)
	for _, e := range add {
		switch {
		case !e.inLive:
			rec.absent.Insert(e.path)
		case secretKind && (secretValue(e.path) || e.path.Equals(lastAppliedField)):
			rec.secret.Insert(e.path)
		case m.holdsSecret(e.value) || m.holdsSecret(e.intent):
			rec.secret.Insert(e.path)
		default:
			b, err := json.Marshal(e.value)
			if err != nil || size+len(b) > maxRecordValues || !setPath(rec.values, e.path, e.value) {
				rec.large.Insert(e.path)
				continue
			}
			size += len(b)
			rec.known.Insert(e.path)
		}
	}
}

// applyRecordAnnotation writes value as live's annotation
// AnnotationPrevious: a server-side apply of that annotation alone, as
// the record's own field manager. It returns the object written.
func (m *Manager) applyRecordAnnotation(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured, value string) (*unstructured.Unstructured, error) {
	md := map[string]any{"name": live.GetName(), "annotations": map[string]any{AnnotationPrevious: value}}
	if ns := live.GetNamespace(); ns != "" {
		md["namespace"] = ns
	}
	patch, err := json.Marshal(map[string]any{"apiVersion": live.GetAPIVersion(), "kind": live.GetKind(), "metadata": md})
	if err != nil {
		return nil, err
	}
	force := true // the record is khook's: taken back should anyone have written it
	written, err := ri.Patch(ctx, live.GetName(), types.ApplyPatchType, patch, metav1.PatchOptions{FieldManager: m.recordManager(), Force: &force})
	if err != nil {
		return nil, fmt.Errorf("record the values khook overwrites (%s): %w", AnnotationPrevious, err)
	}
	return written, nil
}

// recordBeside keeps the record s in live's companion (decision 260),
// the record read being rec (before, as encoded; "" none): first the
// companion, then the object's annotation: none on an object whose
// annotations a controller copies (one kept there by an earlier khook
// goes, its content now in the companion), a pointer to the companion on
// any other. Killed in between, the companion holds what the object's
// own record holds and more. The take-back restores both.
func (m *Manager) recordBeside(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured, rec *previous, s, before string) (func(context.Context) error, error) {
	wrote, err := m.writeCompanion(ctx, live, rec.companion, s)
	if err != nil {
		return nil, err
	}
	var annotated *unstructured.Unstructured // the object, when its annotation changed
	moved := false                           // the object's own record went: the companion keeps it
	switch {
	case annotationsCopied(live) && rec.hasAnnotation:
		err = m.removeAnnotationRecord(ctx, ri, live, rec.annotation)
		moved = err == nil && rec.inAnnotation
	case !annotationsCopied(live) && rec.annotation != pointer(live):
		annotated, err = m.applyRecordAnnotation(ctx, ri, live, pointer(live))
	}
	takeBack := func(ctx context.Context) error {
		errs := []error{m.restoreCompanion(ctx, live, wrote, before, rec.companion != nil || moved)}
		if annotated != nil {
			errs = append(errs, m.takeBackRecord(ctx, ri, annotated, pointer(live), rec.annotation, rec.hasAnnotation))
		}
		return errors.Join(errs...)
	}
	if err != nil {
		return nil, errors.Join(err, takeBack(ctx))
	}
	return takeBack, nil
}

// takeBackRecord makes the record of obj (which holds wrote, as
// recordPrevious wrote it) what it was before (before; none when not
// existed), by a JSON patch that first tests obj's uid and that the
// record still holds wrote: it never creates the object again (a
// server-side apply would, had it been deleted since), nor undoes a
// record written since. An object that is gone took its record along.
func (m *Manager) takeBackRecord(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, wrote, before string, existed bool) error {
	if err := m.swapRecord(ctx, ri, obj, wrote, before, existed); err != nil {
		return fmt.Errorf("take back khook's record of previous values (%s), written before the refused write (destroy removes it): %w", AnnotationPrevious, err)
	}
	return nil
}

// swapRecord replaces obj's record annotation, when it holds was, with
// now (or removes it, when not keep), by a JSON patch that first tests
// obj's uid and the annotation's value; an object gone is no error.
func (m *Manager) swapRecord(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, was, now string, keep bool) error {
	ptr := annotationPointer(AnnotationPrevious)
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(obj.GetUID())},
		{"op": "test", "path": ptr, "value": was},
	}
	if keep {
		ops = append(ops, map[string]any{"op": "replace", "path": ptr, "value": now})
	} else {
		ops = append(ops, map[string]any{"op": "remove", "path": ptr})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: m.recordManager()})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// recordManager is the field manager that writes the record: the step's
// field manager plus previousManagerSuffix, the name cut (at a character)
// so that the whole stays within the API server's limit.
func (m *Manager) recordManager() string {
	name := m.fieldManager
	if over := len(name) + len(previousManagerSuffix) - metav1validation.FieldManagerMaxLength; over > 0 {
		name = name[:max(len(name)-over, 0)]
		for !utf8.ValidString(name) {
			name = name[:len(name)-1]
		}
	}
	return name + previousManagerSuffix
}

// holdsSecret reports whether v, as JSON, holds a secret the manager's
// redactor knows.
func (m *Manager) holdsSecret(v any) bool {
	if m.redactor == nil || v == nil {
		return false
	}
	if s, ok := v.(string); ok {
		return len(m.redactor.Occurrences(s)) > 0
	}
	b, err := json.Marshal(v)
	return err == nil && len(m.redactor.Occurrences(string(b))) > 0
}

// isSecretKind reports whether obj is a core Secret.
func isSecretKind(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// secretValue reports whether path is under a Secret's data or
// stringData.
func secretValue(path fieldpath.Path) bool {
	return len(path) > 0 && path[0].FieldName != nil && (*path[0].FieldName == "data" || *path[0].FieldName == "stringData")
}

// setPath sets obj's value at path to v, making the maps and list
// entries on the way (a list entry with its key fields, a set element
// as itself). A path through a list index cannot be made: false.
func setPath(obj map[string]any, path fieldpath.Path, v any) bool {
	var parent any = obj
	for i, pe := range path {
		last := i == len(path)-1
		switch {
		case pe.FieldName != nil:
			m, ok := parent.(map[string]any)
			if !ok {
				return false
			}
			if last {
				m[*pe.FieldName] = v
				return true
			}
			next, ok := m[*pe.FieldName]
			if !ok || next == nil {
				if path[i+1].FieldName != nil {
					next = map[string]any{}
				} else {
					next = []any{}
				}
				m[*pe.FieldName] = next
			}
			if path[i+1].FieldName == nil {
				// a list entry: the list is changed through its map
				return setInList(m, *pe.FieldName, path[i+1:], v)
			}
			parent = next
		default:
			return false
		}
	}
	return false
}

// setInList sets, in the list m[field], the value at rest (which begins
// with the entry's element).
func setInList(m map[string]any, field string, rest fieldpath.Path, v any) bool {
	l, ok := m[field].([]any)
	if !ok && m[field] != nil {
		return false
	}
	pe := rest[0]
	switch {
	case pe.Value != nil:
		if len(rest) != 1 {
			return false
		}
		if EntryIndex(l, pe, false) < 0 {
			m[field] = append(l, (*pe.Value).Unstructured())
		}
		return true
	case pe.Key != nil:
		i := EntryIndex(l, pe, false)
		if i < 0 {
			entry := map[string]any{}
			for _, k := range *pe.Key {
				entry[k.Name] = k.Value.Unstructured()
			}
			l = append(l, entry)
			i = len(l) - 1
			m[field] = l
		}
		if len(rest) == 1 {
			l[i] = v
			return true
		}
		entry, ok := l[i].(map[string]any)
		return ok && setPath(entry, rest[1:], v)
	}
	return false
}
