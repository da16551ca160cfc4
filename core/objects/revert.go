package objects

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Owned says which of khook's writes an object holds: fields of its
// client-side apply (khook's field manager owns the last-applied
// annotation, so the annotation is khook's manifest) and fields of its
// server-side apply (an Apply entry of khook's field manager).
type Owned struct {
	ClientSide, ServerSide bool
}

// Any reports whether khook owns anything of the object.
func (o Owned) Any() bool { return o.ClientSide || o.ServerSide }

// OwnedBy returns what the manager's field manager wrote of live.
func (m *Manager) OwnedBy(live *unstructured.Unstructured) Owned {
	var o Owned
	if _, ok := live.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok {
		for _, f := range csaupgrade.FindFieldsOwners(live.GetManagedFields(), metav1.ManagedFieldsOperationUpdate, lastAppliedPath) {
			if f.Manager == m.fieldManager {
				o.ClientSide = true
			}
		}
	}
	for _, f := range live.GetManagedFields() {
		if f.Manager == m.fieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			o.ServerSide = true
		}
	}
	return o
}

// FieldOutcome is what destroy does with one field khook wrote on an
// object it configured but did not create.
type FieldOutcome string

// The field outcomes.
const (
	// FieldRestore: khook overwrote a value it recorded; the field goes
	// back to it (FieldUndo.Value).
	FieldRestore FieldOutcome = "restore"
	// FieldRemove: khook added the field (or wrote it before it kept a
	// record); it is removed. FieldUndo.Value is what the server puts
	// there instead (a default), when it does.
	FieldRemove FieldOutcome = "remove"
	// FieldStay: another writer changed, removed or shares the field since
	// khook wrote it: it stays as it is (Reason names who).
	FieldStay FieldOutcome = "stay"
	// FieldLost: khook overwrote a value it did not keep (a Secret's
	// value, one holding a secret, one too large), or whose removal the
	// server refuses: it stays as khook wrote it (Reason says why).
	FieldLost FieldOutcome = "lost"
	// FieldSame: khook's write did not change the field (it held this
	// value before): it stays.
	FieldSame FieldOutcome = "same"
)

// FieldUndo is what destroy does with one field khook wrote on an object
// it configured but did not create: its path (managedFields' form; a list
// entry destroy removes whole is one field), the outcome, the value
// (JSON) it goes back to or the server gives it, and why.
type FieldUndo struct {
	Path    string
	Outcome FieldOutcome
	Value   string
	Reason  string
}

// revertPlan is how destroy gives back khook's fields of one object: the
// fields' fates, the patch that does it (nil: nothing to patch), checked
// by a server dry run (rejected: the server's refusal), and then khook's
// managedFields entries are dropped.
type revertPlan struct {
	fields    []FieldUndo
	patchType types.PatchType
	patch     []byte
	rejected  error
	recorded  bool   // the object carries khook's record: it existed before khook
	conf      string // the configuration khook's apply of the manifest writes (lastApplied)
	rec       *previous
	// expect is the object the dry run of patch returned: what the
	// write leaves (a write whose answer was lost, sent again, meets it)
	expect *unstructured.Unstructured
}

// fate is what becomes of one field.
type fate struct {
	path    fieldpath.Path
	outcome FieldOutcome
	value   any // FieldRestore's
	reason  string
	// unknown: a removal without knowing what the field held before
	// khook; the server's refusal turns it into FieldLost.
	unknown bool
	key     bool // a key field of a list entry: the entry itself
	// record: khook's record, which goes only after the fields it
	// describes are given back (finishRevert), never with the patch
	record bool
	// removed: the value the server's dry run leaves at a removed field
	removed    any
	hasRemoved bool
}

// maxRevertRounds bounds the dry runs of one revert: each round that the
// server refuses for fields whose earlier values khook does not know
// keeps those fields and tries again.
const maxRevertRounds = 5

// planRevert says how destroy gives back what khook wrote on live, an
// object khook configured but did not create (decision 151): each field
// khook's client-side apply recorded (its last-applied annotation) or its
// server-side apply owns goes back to the value khook's record holds
// (rec, loadPrevious's), is removed when khook added it, and stays when
// another writer changed, removed or shares it since; then the patch is
// sent as a server dry run. The server refusing it makes the plan
// rejected; when it names fields whose earlier values khook never knew
// (objects configured before the record), those fields stay and it is
// tried again. The record itself goes after the patch (finishRevert).
func (m *Manager) planRevert(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured, conf string, rec *previous) (*revertPlan, error) {
	fates, err := m.fates(live, rec, conf)
	if err != nil {
		return nil, err
	}
	plan := &revertPlan{recorded: rec.exists || rec.hasAnnotation, conf: conf, rec: rec}
	for round := 1; ; round++ {
		desired, err := applyFates(live, fates)
		if err != nil {
			return nil, err
		}
		plan.patchType, plan.patch, err = twoWayPatch(live, desired)
		if err != nil {
			return nil, err
		}
		if plan.patch == nil {
			break
		}
		out, err := m.sendRevert(ctx, ri, live, plan.patchType, plan.patch, true, nil)
		if err == nil {
			plan.expect = out
			for i := range fates {
				if fates[i].outcome == FieldRemove && !fates[i].record {
					fates[i].removed, fates[i].hasRemoved = LookupPath(out.Object, fates[i].path)
				}
			}
			break
		}
		if !rejection(err) {
			return nil, err
		}
		if round == maxRevertRounds || !keepRefused(fates, err) {
			plan.rejected = err
			break
		}
	}
	plan.fields = exportFates(live, fates)
	if rec.companion != nil {
		plan.fields = append(plan.fields, FieldUndo{Path: recordBesideLine, Outcome: FieldRemove,
			Reason: "the values before khook, kept in a Secret beside the object, which is deleted once they are back"})
	}
	return plan, nil
}

// recordBesideLine names, in the plan, the record kept beside the object.
const recordBesideLine = "khook's record"

// planRevertFresh is planRevert, read again and planned again while the
// object changes under it (a controller writing its status): the dry
// run's patch carries the resourceVersion it was planned from. It
// returns the object it planned for. conf is the configuration khook's
// apply of the object's manifest writes (lastApplied); rec the record of
// live (loadPrevious), read again with the object.
func (m *Manager) planRevertFresh(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured, conf string, rec *previous) (*revertPlan, *unstructured.Unstructured, error) {
	plan, err := m.planRevert(ctx, ri, live, conf, rec)
	for attempt := 1; apierrors.IsConflict(err) && attempt < maxPatchAttempts; attempt++ {
		if live, err = ri.Get(ctx, live.GetName(), metav1.GetOptions{}); err != nil {
			break
		}
		if rec, err = m.loadPrevious(ctx, live); err != nil {
			break
		}
		plan, err = m.planRevert(ctx, ri, live, conf, rec)
	}
	return plan, live, err
}

// fates decides each field khook wrote on live (see planRevert); conf is
// the configuration khook's apply of the manifest writes (lastApplied).
func (m *Manager) fates(live *unstructured.Unstructured, rec *previous, conf string) ([]fate, error) {
	owned := m.OwnedBy(live)
	fields, err := m.khooksFields(live, owned)
	if err != nil {
		return nil, err
	}
	secretKind := isSecretKind(live)
	var out []fate
	for _, f := range fields {
		if emptyMapIn(f.Intent, f.Live) {
			continue // sets no field
		}
		out = append(out, m.decide(f, rec, secretKind))
	}
	if fa, ok := m.lastAppliedFate(live, rec, owned, conf); ok {
		out = append(out, fa)
	}
	// fields the record holds that khook's fields no longer name: gone
	// with khook's write (another writer's client-side apply named them,
	// khook's manifest does not; or khook's manifest dropped them) and
	// given back, or changed by another writer since and left
	owners := managedSets(live)
	for p := range rec.known.Union(rec.absent).Leaves().All() {
		p = p.Copy() // the iteration reuses its path
		if p.Equals(lastAppliedField) || slices.ContainsFunc(out, func(f fate) bool { return under(p, f.path) }) {
			continue
		}
		prev, known := LookupPath(rec.values, p)
		known = known && rec.known.Has(p)
		cur, ok := LookupPath(live.Object, p)
		switch {
		case !ok && known && restorable(live.Object, rec, p):
			out = append(out, fate{path: p, outcome: FieldRestore, value: prev, reason: "khook's write removed it", key: keyField(p)})
		case ok && !(known && jsonEqual(prev, true, cur)):
			var others []Owner
			for _, ms := range owners {
				if holds(ms.set, p) && ms.owner.Manager != m.fieldManager && ms.owner.Manager != m.recordManager() {
					others = append(others, ms.owner)
				}
			}
			out = append(out, fate{path: p, outcome: FieldStay, reason: "changed since khook" + by(others), key: keyField(p)})
		}
	}
	switch {
	case rec.inAnnotation:
		out = append(out, fate{path: fieldpath.MakePathOrDie("metadata", "annotations", AnnotationPrevious), outcome: FieldRemove, record: true, reason: "khook's record of the values before it, once they are back"})
	case rec.hasAnnotation:
		out = append(out, fate{path: fieldpath.MakePathOrDie("metadata", "annotations", AnnotationPrevious), outcome: FieldRemove, record: true, reason: "where khook's record is kept, once the values are back"})
	}
	resolveEntries(out)
	return out, nil
}

// khooksFields are the fields khook wrote on live: those its client-side
// apply's last-applied configuration names, then those its server-side
// apply holds (as they are in live, with their owners).
func (m *Manager) khooksFields(live *unstructured.Unstructured, owned Owned) ([]Field, error) {
	var fields []Field
	if owned.ClientSide {
		intent, err := LastApplied(live)
		if err != nil {
			return nil, err
		}
		if fields, err = Fields(intent, live); err != nil {
			return nil, fmt.Errorf("read the fields of khook's client-side apply: %w", err)
		}
	}
	if owned.ServerSide {
		set, err := ManagedSet(live, m.fieldManager, metav1.ManagedFieldsOperationApply)
		if err != nil {
			return nil, err
		}
		owners := managedSets(live)
		for p := range set.Leaves().All() {
			if !intentField(p) || slices.ContainsFunc(fields, func(f Field) bool { return f.Path.Equals(p) }) {
				continue
			}
			f := Field{Path: p.Copy(), Equal: true}
			f.Live, f.InLive = LookupPath(live.Object, p)
			f.Intent = f.Live
			if !f.InLive {
				continue // a field the server no longer holds
			}
			for _, ms := range owners {
				if holds(ms.set, p) {
					f.Owners = append(f.Owners, ms.owner)
				}
			}
			fields = append(fields, f)
		}
	}
	return fields, nil
}

// lastAppliedFate is the fate of the last-applied annotation: back to
// what it held before khook (another writer's client-side apply) when it
// holds khook's configuration now (lastAppliedKhooks) or khook removed
// it, removed when it holds khook's configuration and held none before
// khook (or what it held is not recorded), and left when another writer
// wrote it since.
func (m *Manager) lastAppliedFate(live *unstructured.Unstructured, rec *previous, owned Owned, conf string) (fate, bool) {
	cur, inLive := LookupPath(live.Object, lastAppliedField)
	khooks := owned.ClientSide || m.lastAppliedKhooks(live, conf)
	fa := fate{path: lastAppliedField}
	if prev, ok := LookupPath(rec.values, lastAppliedField); ok && rec.known.Has(lastAppliedField) {
		switch {
		case inLive && jsonEqual(prev, true, cur):
			return fa, false
		case !inLive || khooks:
			fa.outcome, fa.value, fa.reason = FieldRestore, prev, "another writer's client-side apply held it before khook"
			return fa, true
		}
		fa.outcome, fa.reason = FieldStay, "written since khook"+by(lastAppliedOwners(live))
		if !owned.ServerSide || !slices.ContainsFunc(lastAppliedOwners(live), func(o Owner) bool { return o.Manager == LastAppliedManager }) {
			return fa, true
		}
		// kept by kubectl's server-side apply (the API server writes it
		// for the field manager kubectl) or by khook's for an earlier
		// manifest: which, the object does not tell
		fa.reason = "it is not the configuration of khook's manifest, and kubectl's server-side apply rewrote it since khook (or khook's apply of an earlier manifest did)"
		return fa, true
	}
	if !inLive || !khooks {
		return fa, false
	}
	fa.outcome, fa.reason = FieldRemove, "khook's client-side apply wrote it"
	if !owned.ClientSide {
		fa.reason = "khook's server-side apply keeps it current, as kubectl's does"
		switch {
		case rec.absent.Has(lastAppliedField):
			fa.reason += ", and it held none before khook"
		case !rec.covers(lastAppliedField):
			fa.reason += ", and what it held before khook is unknown (no record of it)"
		}
	}
	switch {
	case rec.secret.Has(lastAppliedField):
		fa.reason += "; what it held before khook was a Secret's, which khook never records"
	case rec.large.Has(lastAppliedField):
		fa.reason += "; what it held before khook was too large to record"
	}
	return fa, true
}

// lastAppliedKhooks reports whether live's last-applied annotation holds
// the configuration khook's server-side apply keeps in it (decision 224):
// owned by no client-side writer (an Update: kubectl apply, edit,
// annotate take it so) and only by server-side appliers of it, kubectl's
// kubectl-last-applied (as khook writes it) or khook's field manager (a
// manifest carrying the annotation); and either holding conf, the
// configuration of khook's manifest, or written by no one else since:
// the API server rewrites it for kubectl's own server-side apply (field
// manager kubectl) without changing its owner, so when the object has
// such an apply that is not khook's, only the content can tell.
// Client-side, khook's field manager owns the annotation (Owned).
func (m *Manager) lastAppliedKhooks(live *unstructured.Unstructured, conf string) bool {
	cur, ok := live.GetAnnotations()[corev1.LastAppliedConfigAnnotation]
	owners := lastAppliedOwners(live)
	if !ok || len(owners) == 0 {
		return false
	}
	for _, o := range owners {
		if o.Operation != metav1.ManagedFieldsOperationApply || (o.Manager != LastAppliedManager && o.Manager != m.fieldManager) {
			return false
		}
	}
	if conf != "" && sameConfiguration(cur, conf) {
		return true
	}
	if m.fieldManager == kubectlManager || !m.OwnedBy(live).ServerSide {
		return false
	}
	return !slices.ContainsFunc(live.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == kubectlManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == ""
	})
}

// lastAppliedOwners are the managedFields entries owning live's
// last-applied annotation.
func lastAppliedOwners(live *unstructured.Unstructured) []Owner {
	var out []Owner
	for _, ms := range managedSets(live) {
		if ms.owner.Subresource == "" && ms.set.Has(lastAppliedField) {
			out = append(out, ms.owner)
		}
	}
	return out
}

// sameConfiguration reports whether two last-applied configurations are
// the same JSON (keys in any order, spacing aside).
func sameConfiguration(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// restorable reports whether the field p can be given back to obj: every
// list entry on the way exists, or existed before khook (the record
// holds its key fields); maps are made as needed.
func restorable(obj map[string]any, rec *previous, p fieldpath.Path) bool {
	for i, pe := range p {
		if pe.FieldName != nil {
			continue
		}
		if _, ok := LookupPath(obj, p[:i+1]); ok {
			continue
		}
		if pe.Key == nil {
			return false
		}
		for _, k := range *pe.Key {
			if !rec.known.Has(append(p[:i+1:i+1], fieldpath.PathElement{FieldName: &k.Name})) {
				return false
			}
		}
	}
	return true
}

// decide is the fate of one field khook wrote (see planRevert).
func (m *Manager) decide(f Field, rec *previous, secretKind bool) fate {
	fa := fate{path: f.Path, key: f.KeyField()}
	var others []Owner
	for _, o := range f.OtherOwners(m.fieldManager) {
		if o.Manager != m.recordManager() {
			others = append(others, o)
		}
	}
	prev, hasPrev := LookupPath(rec.values, f.Path)
	hasPrev = hasPrev && rec.known.Has(f.Path)
	// A value that differs from khook's in a field khook alone owns was
	// changed by nobody: the server normalised it (1000m is 1).
	changed := !f.Equal && (len(others) > 0 || !f.OwnedBy(m.fieldManager))
	switch {
	case !f.InLive && f.Intent != nil:
		fa.outcome, fa.reason = FieldStay, "removed since khook"+by(others)
	case changed:
		fa.outcome, fa.reason = FieldStay, "changed since khook"+by(others)
	case hasPrev && jsonEqual(prev, true, f.Live):
		fa.outcome, fa.reason = FieldSame, "it held this value before khook"
	case len(others) > 0 && f.OwnedBy(m.fieldManager):
		fa.outcome, fa.reason = FieldStay, "shared with "+names(others)
	case len(others) > 0 && (hasPrev || rec.absent.Has(f.Path)):
		fa.outcome, fa.reason = FieldStay, "written since khook"+by(others)
	case len(others) > 0:
		fa.outcome, fa.reason = FieldSame, "khook's write did not change it"
	case hasPrev:
		fa.outcome, fa.value, fa.reason = FieldRestore, prev, "khook overwrote it"
	case rec.absent.Has(f.Path):
		fa.outcome, fa.reason = FieldRemove, "khook added it"
	case rec.secret.Has(f.Path) && secretKind && secretValue(f.Path):
		fa.outcome, fa.reason = FieldLost, "cannot be given back: khook never records a Secret's values"
	case rec.secret.Has(f.Path):
		fa.outcome, fa.reason = FieldLost, "cannot be given back: its value before khook held a secret, which khook never records"
	case rec.large.Has(f.Path):
		fa.outcome, fa.reason = FieldLost, "cannot be given back: its value before khook was too large to record"
	default:
		fa.outcome, fa.unknown = FieldRemove, true
		fa.reason = "khook wrote it, and what it held before is unknown (no record of it)"
	}
	return fa
}

// by is " by m1, m2" naming owners, or "".
func by(owners []Owner) string {
	if len(owners) == 0 {
		return ""
	}
	return " by " + names(owners)
}

// names lists owners once each: "kubectl-patch", "kubectl, through the
// scale subresource".
func names(owners []Owner) string {
	var out []string
	for _, o := range owners {
		s := o.Manager
		if o.Subresource != "" {
			s += ", through the " + o.Subresource + " subresource"
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// resolveEntries decides the list entries: an entry whose key field is
// to be removed goes whole when every field of it khook wrote is removed
// too; otherwise the entry stays (its key field is the same) and only
// those fields go.
func resolveEntries(fates []fate) {
	for i := range fates {
		k := &fates[i]
		if !k.key || k.outcome != FieldRemove {
			continue
		}
		entry := k.path[:len(k.path)-1]
		for _, o := range fates {
			if under(o.path, entry) && o.outcome != FieldRemove {
				k.outcome, k.reason, k.unknown = FieldSame, "the entry stays", false
				break
			}
		}
	}
}

// under reports whether p is prefix or a field under it.
func under(p, prefix fieldpath.Path) bool {
	return len(p) >= len(prefix) && p[:len(prefix)].Equals(prefix)
}

// entryRemoved reports whether p lies in a list entry fates remove whole
// (its key field's fate is FieldRemove), and returns that entry.
func entryRemoved(fates []fate, p fieldpath.Path) (fieldpath.Path, bool) {
	for _, k := range fates {
		if k.key && k.outcome == FieldRemove {
			entry := k.path[:len(k.path)-1]
			if under(p, entry) {
				return entry, true
			}
		}
	}
	return nil, false
}

// applyFates is live with the fates applied: the object destroy leaves.
func applyFates(live *unstructured.Unstructured, fates []fate) (*unstructured.Unstructured, error) {
	desired := live.DeepCopy()
	removedEntries := map[string]bool{}
	for _, f := range fates {
		if f.record {
			continue // goes once the fields are back (finishRevert)
		}
		switch f.outcome {
		case FieldRestore:
			if !setPath(desired.Object, f.path, f.value) {
				return nil, fmt.Errorf("give back %s: cannot be written", f.path)
			}
		case FieldRemove:
			p := f.path
			if entry, ok := entryRemoved(fates, p); ok {
				if removedEntries[entry.String()] {
					continue
				}
				removedEntries[entry.String()] = true
				p = entry
			}
			deletePath(desired.Object, p)
			pruneEmpty(desired.Object, p[:len(p)-1])
		}
	}
	return desired, nil
}

// pruneEmpty removes the maps along p (reached by field names only) that
// a removal left empty, from the deepest up: a map khook added with its
// fields goes with them. metadata itself stays.
func pruneEmpty(obj map[string]any, p fieldpath.Path) {
	for n := len(p); n > 0; n-- {
		for _, pe := range p[:n] {
			if pe.FieldName == nil {
				return
			}
		}
		if n == 1 && *p[0].FieldName == "metadata" {
			return
		}
		v, ok := LookupPath(obj, p[:n])
		if m, isMap := v.(map[string]any); !ok || !isMap || len(m) > 0 {
			return
		}
		deletePath(obj, p[:n])
	}
}

// deletePath removes obj's value at p (a map field, or a list entry);
// nothing when there is none.
func deletePath(obj map[string]any, p fieldpath.Path) {
	if len(p) == 0 || p[0].FieldName == nil || obj == nil {
		return
	}
	name := *p[0].FieldName
	if len(p) == 1 {
		delete(obj, name)
		return
	}
	next, ok := obj[name]
	if !ok {
		return
	}
	if p[1].FieldName != nil {
		deletePath(mapOrNil(next), p[1:])
		return
	}
	l, ok := next.([]any)
	if !ok {
		return
	}
	j := EntryIndex(l, p[1], false)
	if j < 0 {
		return
	}
	if len(p) == 2 {
		obj[name] = append(l[:j:j], l[j+1:]...)
		return
	}
	deletePath(mapOrNil(l[j]), p[2:])
}

func mapOrNil(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// twoWayPatch is the patch from live to desired (strategic merge for
// kinds built into client-go, JSON merge for others), carrying live's
// resourceVersion so that it applies to exactly the object planned; nil
// when they are the same.
func twoWayPatch(live, desired *unstructured.Unstructured) (types.PatchType, []byte, error) {
	cur, err := json.Marshal(live.Object)
	if err != nil {
		return "", nil, err
	}
	mod, err := json.Marshal(desired.Object)
	if err != nil {
		return "", nil, err
	}
	patchType := types.MergePatchType
	var patch []byte
	if versioned, err := scheme.Scheme.New(live.GroupVersionKind()); err == nil {
		patchType = types.StrategicMergePatchType
		patch, err = strategicpatch.CreateTwoWayMergePatch(cur, mod, versioned)
		if err != nil {
			return "", nil, fmt.Errorf("compute the patch: %w", err)
		}
	} else if patch, err = jsonmergepatch.CreateThreeWayJSONMergePatch(cur, mod, cur); err != nil {
		return "", nil, fmt.Errorf("compute the patch: %w", err)
	}
	var pm map[string]any
	if err := json.Unmarshal(patch, &pm); err != nil {
		return "", nil, fmt.Errorf("compute the patch: %w", err)
	}
	if len(pm) == 0 {
		return patchType, nil, nil
	}
	md, _ := pm["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		pm["metadata"] = md
	}
	md["resourceVersion"] = live.GetResourceVersion()
	patch, err = json.Marshal(pm)
	return patchType, patch, err
}

// rejection reports whether err is the server refusing the request (a
// client error other than not found, a conflict, a timeout or
// throttling): sending it again changes nothing.
func rejection(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	code := int(status.Status().Code)
	switch code {
	case http.StatusNotFound, http.StatusConflict, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return code >= 400 && code < 500
}

// keepRefused turns the removals of fields whose earlier values khook
// does not know, and which the server's refusal names (a field it
// requires, or one it does not allow to change), into FieldLost. It
// reports whether it turned any.
func keepRefused(fates []fate, err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	changed := false
	for _, c := range status.Status().Details.Causes {
		named := causePath(c.Field)
		if named == "" {
			continue
		}
		for i := range fates {
			f := &fates[i]
			if !f.unknown || f.outcome != FieldRemove {
				continue
			}
			mine := fieldNames(f.path)
			if prefixOf(named, mine) || prefixOf(mine, named) {
				f.outcome, f.unknown = FieldLost, false
				f.reason = "cannot be given back: what it held before khook is unknown (no record of it), and the server refuses the object without it (" + c.Field + ": " + c.Message + ")"
				changed = true
			}
		}
	}
	if changed {
		resolveEntries(fates)
	}
	return changed
}

// causePath is a field a server's cause names (spec.template.spec.containers[0].image)
// without its list indexes: spec.template.spec.containers.image.
func causePath(field string) string {
	var b strings.Builder
	depth := 0
	for _, r := range field {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return strings.Trim(b.String(), ".")
}

// fieldNames is p's field names joined by dots, list entries left out.
func fieldNames(p fieldpath.Path) string {
	var parts []string
	for _, pe := range p {
		if pe.FieldName != nil {
			parts = append(parts, *pe.FieldName)
		}
	}
	return strings.Join(parts, ".")
}

// prefixOf reports whether a is b or a field path above it.
func prefixOf(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+".")
}

// exportFates is the fates as the plan shows them, ordered by path: a
// list entry removed whole is one field (its path without the key
// field), the fields in it not shown; key fields of entries that stay
// are not shown.
func exportFates(live *unstructured.Unstructured, fates []fate) []FieldUndo {
	var out []FieldUndo
	secretKind := isSecretKind(live)
	for _, f := range fates {
		if _, ok := entryRemoved(fates, f.path); ok && !f.key {
			continue
		}
		if f.key && f.outcome != FieldRemove {
			continue
		}
		p := f.path
		if f.key {
			p = p[:len(p)-1]
		}
		fu := FieldUndo{Path: p.String(), Outcome: f.outcome, Reason: f.reason}
		switch {
		case f.outcome == FieldRestore:
			fu.Value = showValue(f.value, secretKind && (secretValue(f.path) || f.path.Equals(lastAppliedField)))
		case f.outcome == FieldRemove && f.hasRemoved && !f.key:
			fu.Value = showValue(f.removed, secretKind && secretValue(f.path))
		}
		out = append(out, fu)
	}
	slices.SortStableFunc(out, func(a, b FieldUndo) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// showValue is v as JSON, "***" for a Secret's value.
func showValue(v any, secret bool) string {
	if secret {
		return "***"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// revert gives back khook's fields of live as plan says, as the plan
// was read (decision 261): the plan's patch, sent for real as the
// record's field manager, carrying the resourceVersion it was planned
// from; an object changed since in more than what its controllers keep
// (status, the control plane's own metadata: unchangedSince) is refused
// (*StaleError), never planned again. Then khook's managedFields entries
// and its record go (finishRevert): the record only once the values it
// holds are back, so that a destroy killed at any point and run again
// still reads it.
func (m *Manager) revert(ctx context.Context, mapping *meta.RESTMapping, live *unstructured.Unstructured, plan *revertPlan) error {
	ri := m.Client(mapping, live.GetNamespace())
	if plan.rejected != nil {
		return fmt.Errorf("the server rejects giving back khook's fields: %w", plan.rejected)
	}
	obj, planned := live, live // planned: the finish is the first write, checked against the plan
	if plan.patch != nil {
		out, err := m.sendRevert(ctx, ri, live, plan.patchType, plan.patch, false, plan.expect)
		var stale *StaleError
		if errors.As(err, &stale) {
			return err
		}
		if err != nil {
			return fmt.Errorf("give back khook's fields: %w", err)
		}
		obj, planned = out, nil
	}
	return m.finishRevert(ctx, ri, obj, plan.rec, planned)
}

// StaleError is a write of destroy refused because its object changed
// since destroy's plan was read (its resourceVersion, in more than what
// its controllers keep: unchangedSince), as Terraform refuses a stale
// saved plan: what runs is what was shown.
type StaleError struct {
	// Was and Now are the object's resourceVersions in the plan and now.
	Was, Now string
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("changed since destroy's plan (resourceVersion %s, now %s), so it is left as it is: a stale plan is refused; run destroy again to see what it would do now", e.Was, e.Now)
}

// sendRevert sends a revert's patch planned from live (whose
// resourceVersion it carries; a server dry run when dryRun), as the
// record's field manager: khook's own field manager never comes to own
// what is given back (a destroy killed before finishRevert, run again,
// reads khook's fields as before). When the object changed meanwhile only
// where its controllers write (unchangedSince: a Deployment's rollout
// status, its revision annotation), the plan still holds: the patch is
// sent again with the new resourceVersion, at once, up to
// maxPatchAttempts times. Any other change is a conflict for a dry run
// (the caller plans again) and a *StaleError for the write, unless the
// object is what the write leaves (expect, its dry run's result): a
// write that landed and whose answer was lost, sent again by the
// connection's retries, meets its own change, and that is its success.
func (m *Manager) sendRevert(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured, patchType types.PatchType, patch []byte, dryRun bool, expect *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	opts := metav1.PatchOptions{FieldManager: m.recordManager()}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	planned := live
	for attempt := 1; ; attempt++ {
		out, err := ri.Patch(ctx, live.GetName(), patchType, patch, opts)
		if !apierrors.IsConflict(err) || attempt == maxPatchAttempts {
			return out, err
		}
		fresh, gerr := ri.Get(ctx, live.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return nil, gerr
		}
		if !unchangedSince(planned, fresh, true) {
			if dryRun {
				return nil, err
			}
			if expect != nil && unchangedSince(expect, fresh, false) {
				return fresh, nil // it landed: its answer was lost
			}
			return nil, &StaleError{Was: planned.GetResourceVersion(), Now: fresh.GetResourceVersion()}
		}
		var pm map[string]any
		if gerr := json.Unmarshal(patch, &pm); gerr != nil {
			return nil, gerr
		}
		md, _ := pm["metadata"].(map[string]any)
		if md == nil {
			return nil, err // a patch without its precondition: not ours
		}
		md["resourceVersion"] = fresh.GetResourceVersion()
		if patch, gerr = json.Marshal(pm); gerr != nil {
			return nil, gerr
		}
		live = fresh
	}
}

// unchangedSince reports whether fresh is the object planned as it was
// planned, but for what its controllers and the API server keep: status,
// the resourceVersion, and annotations, labels and finalizers of the
// Kubernetes project's own domains (kubernetes.io, k8s.io: a
// Deployment's revision, a claim's protection), the last-applied
// annotation aside. With ownership, who owns what counts too (a revert's
// fates depend on it), those same fields aside.
func unchangedSince(planned, fresh *unstructured.Unstructured, ownership bool) bool {
	if planned.GetUID() != fresh.GetUID() {
		return false
	}
	if !reflect.DeepEqual(significantContent(planned), significantContent(fresh)) {
		return false
	}
	return !ownership || reflect.DeepEqual(significantOwners(planned), significantOwners(fresh))
}

// controlPlaneKey reports whether an annotation, label or finalizer key
// is of the Kubernetes project's own domains, which its controllers
// write (the last-applied annotation is a person's apply).
func controlPlaneKey(k string) bool {
	if k == corev1.LastAppliedConfigAnnotation {
		return false
	}
	domain, _, ok := strings.Cut(k, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// significantContent is u without what unchangedSince leaves out.
func significantContent(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	delete(c.Object, "status")
	for _, f := range []string{"resourceVersion", "managedFields"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	for _, f := range []string{"annotations", "labels"} {
		if m, ok, _ := unstructured.NestedStringMap(c.Object, "metadata", f); ok {
			for k := range m {
				if controlPlaneKey(k) {
					delete(m, k)
				}
			}
			if len(m) == 0 {
				unstructured.RemoveNestedField(c.Object, "metadata", f)
			} else {
				_ = unstructured.SetNestedStringMap(c.Object, m, "metadata", f)
			}
		}
	}
	if fin := slices.DeleteFunc(c.GetFinalizers(), controlPlaneKey); len(fin) > 0 {
		c.SetFinalizers(fin)
	} else {
		unstructured.RemoveNestedField(c.Object, "metadata", "finalizers")
	}
	return c.Object
}

// significantOwners is who owns what of u (manager, operation and
// subresource, to the fields each owns), what unchangedSince leaves out
// aside: the status subresource's entries, and the fields of status and
// of the control plane's metadata keys.
func significantOwners(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, e := range u.GetManagedFields() {
		if e.Subresource == "status" || e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			out[e.Manager+"\x00"+string(e.Operation)+"\x00"+e.Subresource] = string(e.FieldsV1.Raw)
			continue
		}
		kept := fieldpath.NewSet()
		set.Leaves().Iterate(func(p fieldpath.Path) {
			if !ignoredField(p) {
				kept.Insert(p.Copy())
			}
		})
		if kept.Empty() {
			continue
		}
		b, _ := kept.ToJSON()
		out[e.Manager+"\x00"+string(e.Operation)+"\x00"+e.Subresource] = string(b)
	}
	return out
}

// ignoredField reports whether p is a field unchangedSince leaves out:
// under status, or an annotation, label or finalizer of the control
// plane's.
func ignoredField(p fieldpath.Path) bool {
	if len(p) == 0 || p[0].FieldName == nil {
		return false
	}
	switch *p[0].FieldName {
	case "status":
		return true
	case "metadata":
	default:
		return false
	}
	if len(p) < 2 || p[1].FieldName == nil {
		return false
	}
	if len(p) == 2 {
		// the map or list itself (".": its owner made it): who owns
		// the keys in it is what counts
		return *p[1].FieldName == "annotations" || *p[1].FieldName == "labels" || *p[1].FieldName == "finalizers"
	}
	switch *p[1].FieldName {
	case "annotations", "labels":
		return p[2].FieldName != nil && controlPlaneKey(*p[2].FieldName)
	case "finalizers":
		if p[2].Value != nil {
			if v, ok := (*p[2].Value).Unstructured().(string); ok {
				return controlPlaneKey(v)
			}
		}
	}
	return false
}

// finishRevert removes, once the fields are given back (obj, as the
// revert left it), khook's managedFields entries (the step's field
// manager's and the record's: decision 212) and khook's record: its
// annotation, by one JSON patch that replaces the list and tests obj's
// UID and resourceVersion (as csaupgrade rewrites managedFields; a
// changed object is read again and the patch retried), then its
// companion. The fields stay, owned by their other owners or by nobody,
// so that a later kubectl apply --server-side by their owner does not
// conflict with khook, and a second destroy finds nothing of khook's.
// Killed before the patch, the record is still there with every field
// given back; after it, the companion alone is left, and a second
// destroy finds nothing to give back but it.
//
// When it is destroy's first write to the object (planned, as the plan
// read it: nothing was to be given back), an object changed since in
// more than its controllers keep is refused as stale (decision 261).
func (m *Manager) finishRevert(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, rec *previous, planned *unstructured.Unstructured) error {
	for attempt := 1; ; attempt++ {
		entries := obj.GetManagedFields()
		kept := slices.DeleteFunc(slices.Clone(entries), func(e metav1.ManagedFieldsEntry) bool {
			return e.Manager == m.fieldManager || e.Manager == m.recordManager()
		})
		ops := []map[string]any{{"op": "test", "path": "/metadata/uid", "value": string(obj.GetUID())}}
		if len(kept) != len(entries) {
			var value any = kept
			if len(kept) == 0 {
				value = []map[string]any{{}} // an empty list would keep them
			}
			ops = append(ops, map[string]any{"op": "replace", "path": "/metadata/managedFields", "value": value})
		}
		if _, ok := obj.GetAnnotations()[AnnotationPrevious]; ok && rec != nil && rec.hasAnnotation {
			ops = append(ops, map[string]any{"op": "remove", "path": annotationPointer(AnnotationPrevious)})
		}
		if len(ops) == 1 {
			break
		}
		ops = append(ops, map[string]any{"op": "replace", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()})
		patch, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		_, err = ri.Patch(ctx, obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: m.recordManager()})
		if err == nil || apierrors.IsNotFound(err) {
			break // gone: its companion goes with it (its owner)
		}
		if !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) || attempt == maxPatchAttempts {
			return fmt.Errorf("give up khook's field ownership and its record: %w", err)
		}
		// changed since (a failed test is invalid): read it again
		fresh, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && fresh.GetUID() != obj.GetUID() {
			return nil // gone, replaced: khook's record went with it
		}
		if err != nil {
			return err
		}
		if planned != nil && !unchangedSince(planned, fresh, true) {
			return &StaleError{Was: planned.GetResourceVersion(), Now: fresh.GetResourceVersion()}
		}
		obj = fresh
	}
	if rec != nil && rec.companion != nil {
		return m.deleteCompanion(ctx, obj, rec.companion)
	}
	return nil
}
