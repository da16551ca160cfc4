package objects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	kubectlutil "k8s.io/kubectl/pkg/util"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// Which fields of an object are khook's, and whose value each field holds
// now: the one answer destroy (giving back what khook took) and re-runs
// (repairing drift) share.
//
// An intent is an object as khook wrote it: a manifest, a chart's
// rendered object, or the last-applied-configuration annotation that
// client-side apply keeps (LastApplied). Fields lists the intent's leaf
// fields, each with the intent's value, the live value and who owns the
// live field according to the live object's managedFields. The fields
// are named as managedFields name them (sigs.k8s.io/structured-merge-diff
// fieldpath), so a Field's Path can be checked against any managedFields
// entry (ManagedSet, Set.Has).
//
// Lists: the kinds built into client-go are read with the schema the API
// server's server-side apply uses for them (client-go's
// applyconfigurations type converter): a list merged by key (containers,
// env, volumes, ports: the strategic-merge key, plus the extra keys
// server-side apply uses, such as a port's protocol, with their defaults)
// is matched entry by entry, an entry named by its keys
// (.spec.containers[name="web"].image); a set of scalars (finalizers)
// element by element; other lists are atomic (one field). Every other kind
// (custom resources, or an object the built-in schema cannot read, such
// as one of a newer API server with fields client-go does not know) is
// read as the API server reads a kind without a schema: maps field by
// field, lists atomic. A Secret's stringData is compared as the server
// stores it: base64-encoded, in data.

// Field is one leaf field an intent sets, compared with the live object.
type Field struct {
	// Path names the field as managedFields do: .data.key,
	// .spec.template.spec.containers[name="web"].image. A key field of a
	// list entry (.spec.containers[name="web"].name) is a field too: it
	// stands for the entry itself (KeyField reports it).
	Path fieldpath.Path
	// Intent is the intent's value, as JSON decodes it (string, bool,
	// int64 or float64, map[string]any, []any, nil).
	Intent any
	// Live is the live value when InLive; InLive is false when the live
	// object has no such field (or there is no live object).
	Live   any
	InLive bool
	// Equal reports whether the live value is the intent's, semantically:
	// equal once both are JSON-normalised (map order, 3 and 3.0 as
	// numbers); an intent's empty map (which sets no field) equals any
	// live map. (An intent's null is no field at all: AsStored.)
	// Quantities are compared as written ("1000m" differs from "1").
	Equal bool
	// Owners are the managedFields entries of the live object that hold
	// the field (or a field under it), in the live object's order. Empty when the live object has no
	// managedFields or nobody owns the field.
	Owners []Owner
}

// Owner is one managedFields entry holding a field: the field manager,
// how it wrote (Apply: server-side apply; Update: any other write, a
// client-side apply included) and through which subresource ("" for the
// object itself, "scale", "status").
type Owner struct {
	Manager     string
	Operation   metav1.ManagedFieldsOperationType
	Subresource string
}

// String is the field's path, as managedFields' fieldpath prints it.
func (f Field) String() string { return f.Path.String() }

// KeyField reports whether the field is a key field of a list entry
// (.spec.containers[name="web"].name): it stands for the entry itself.
func (f Field) KeyField() bool { return keyField(f.Path) }

// keyField reports whether p is a key field of a list entry.
func keyField(p fieldpath.Path) bool {
	n := len(p)
	if n < 2 || p[n-1].FieldName == nil || p[n-2].Key == nil {
		return false
	}
	for _, k := range *p[n-2].Key {
		if k.Name == *p[n-1].FieldName {
			return true
		}
	}
	return false
}

// OwnedBy reports whether manager owns the live field (by any
// operation, through any subresource).
func (f Field) OwnedBy(manager string) bool {
	for _, o := range f.Owners {
		if o.Manager == manager {
			return true
		}
	}
	return false
}

// OtherOwners returns the owners of the live field other than manager's
// entries.
func (f Field) OtherOwners(manager string) []Owner {
	var out []Owner
	for _, o := range f.Owners {
		if o.Manager != manager {
			out = append(out, o)
		}
	}
	return out
}

// ThroughSubresource returns the owners other than manager that wrote the
// live field through a subresource: an autoscaler's replicas (scale),
// a controller's status.
func (f Field) ThroughSubresource(manager string) []Owner {
	var out []Owner
	for _, o := range f.OtherOwners(manager) {
		if o.Subresource != "" {
			out = append(out, o)
		}
	}
	return out
}

// Drifted reports whether the field has drifted from the intent that
// manager (khook's field manager) wrote: the live value differs from the
// intent's (or the live field is missing), unless another manager owns
// the live value through a subresource (a HorizontalPodAutoscaler's
// replicas, written through scale, are the autoscaler's to set).
func (f Field) Drifted(manager string) bool {
	return !f.Equal && len(f.ThroughSubresource(manager)) == 0
}

// Fields lists the leaf fields intent sets (see the package notes above
// Field), ordered by path, each compared with live (nil: no live
// object, every field missing). Fields that name the object or that the
// server sets are left out: apiVersion, kind, metadata.name, namespace,
// uid, resourceVersion, generation, creationTimestamp, deletion fields,
// managedFields, the last-applied-configuration annotation (client-side
// apply's bookkeeping, not the intent), and status (written through its
// own subresource).
func Fields(intent, live *unstructured.Unstructured) ([]Field, error) {
	if intent == nil {
		return nil, nil
	}
	itv, err := typedIntent(AsStored(intent))
	if err != nil {
		return nil, fmt.Errorf("read the intent: %w", err)
	}
	set, err := itv.ToFieldSet()
	if err != nil {
		return nil, fmt.Errorf("read the intent's fields: %w", err)
	}
	var owners []managedSet
	var liveObj map[string]any
	if live != nil {
		liveObj = live.Object
		owners = managedSets(live)
	}
	var out []Field
	for p := range set.Leaves().All() {
		if !intentField(p) {
			continue
		}
		f := Field{Path: p.Copy()}
		f.Intent, _ = valueAt(itv, p)
		f.Live, f.InLive = LookupPath(liveObj, p)
		f.Equal = jsonEqual(f.Intent, f.InLive, f.Live) || emptyMapIn(f.Intent, f.Live)
		for _, ms := range owners {
			if holds(ms.set, p) {
				f.Owners = append(f.Owners, ms.owner)
			}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Field) int { return a.Path.Compare(b.Path) })
	return out, nil
}

// LastApplied returns the intent client-side apply recorded on live (its
// last-applied-configuration annotation), nil when it has none.
func LastApplied(live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	raw, err := kubectlutil.GetOriginalConfiguration(live)
	if err != nil || len(raw) == 0 {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("read the last-applied configuration: %w", err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// ManagedSet returns the fields live's managedFields entries of manager
// with operation op hold, through no subresource (the object itself),
// merged: for server-side apply, the fields manager applied.
func ManagedSet(live *unstructured.Unstructured, manager string, op metav1.ManagedFieldsOperationType) (*fieldpath.Set, error) {
	out := fieldpath.NewSet()
	for _, f := range live.GetManagedFields() {
		if f.Manager != manager || f.Operation != op || f.Subresource != "" || f.FieldsV1 == nil {
			continue
		}
		s := fieldpath.NewSet()
		if err := s.FromJSON(bytes.NewReader(f.FieldsV1.Raw)); err != nil {
			return nil, fmt.Errorf("read the managed fields of %q: %w", manager, err)
		}
		out = out.Union(s)
	}
	return out, nil
}

// managedSet is one managedFields entry, read.
type managedSet struct {
	owner Owner
	set   *fieldpath.Set
}

// managedSets reads live's managedFields; an entry that cannot be read
// owns nothing.
func managedSets(live *unstructured.Unstructured) []managedSet {
	var out []managedSet
	for _, f := range live.GetManagedFields() {
		if f.FieldsV1 == nil {
			continue
		}
		s := fieldpath.NewSet()
		if err := s.FromJSON(bytes.NewReader(f.FieldsV1.Raw)); err != nil {
			continue
		}
		out = append(out, managedSet{owner: Owner{Manager: f.Manager, Operation: f.Operation, Subresource: f.Subresource}, set: s})
	}
	return out
}

// holds reports whether s holds the field p: p itself, or a field under
// it (a list the intent's schema reads as atomic that the server's reads
// by key). A member above p does not hold it: managedFields write a map
// whose own entry is all a manager holds of it ({".": {}}) as they write
// an atomic field ({}), so the two cannot be told apart.
func holds(s *fieldpath.Set, p fieldpath.Path) bool {
	cur := s
	for i, pe := range p {
		child, ok := cur.Children.Get(pe)
		if i == len(p)-1 {
			return cur.Members.Has(pe) || (ok && !child.Empty())
		}
		if !ok {
			return false
		}
		cur = child
	}
	return false
}

// intentField reports whether p is a field of the intent rather than the
// object's name or what the server sets (see Fields).
func intentField(p fieldpath.Path) bool {
	if len(p) == 0 || p[0].FieldName == nil {
		return false
	}
	switch *p[0].FieldName {
	case "apiVersion", "kind", "status":
		return false
	case "metadata":
		if len(p) < 2 || p[1].FieldName == nil {
			return true
		}
		switch *p[1].FieldName {
		case "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
			"deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink":
			return false
		case "annotations":
			return len(p) < 3 || p[2].FieldName == nil || *p[2].FieldName != corev1.LastAppliedConfigAnnotation
		}
	}
	return true
}

// converter reads the kinds built into client-go with the API server's
// server-side apply schema; built once, on first use.
var converter = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(scheme.Scheme)
})

// typedIntent reads intent with the built-in schema of its kind when it
// has one and conforms to it, else as the deduced type (maps field by
// field, lists atomic).
func typedIntent(intent *unstructured.Unstructured) (*typed.TypedValue, error) {
	if _, err := scheme.Scheme.New(intent.GroupVersionKind()); err == nil {
		if tv, err := converter().ObjectToTyped(intent, typed.AllowDuplicates); err == nil {
			return tv, nil
		}
	}
	return typed.DeducedParseableType.FromUnstructured(intent.Object, typed.AllowDuplicates)
}

// valueAt is tv's value at the leaf p, found as server-side apply finds
// it (list entries by their keys, key defaults included): tv reduced to
// p alone, then followed down.
func valueAt(tv *typed.TypedValue, p fieldpath.Path) (any, bool) {
	v := tv.ExtractItems(fieldpath.NewSet(p)).AsValue().Unstructured()
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[*pe.FieldName]; !ok {
				return nil, false
			}
		default:
			l, ok := v.([]any)
			if !ok || len(l) != 1 {
				return nil, false
			}
			v = l[0]
		}
	}
	return v, true
}

// emptyMapIn reports whether intent is an empty map and live a map.
func emptyMapIn(intent, live any) bool {
	im, ok := intent.(map[string]any)
	_, isMap := live.(map[string]any)
	return ok && len(im) == 0 && isMap
}

// jsonEqual reports whether the intent's value a equals the live value b
// (present when inLive) once both are JSON-normalised.
func jsonEqual(a any, inLive bool, b any) bool {
	if !inLive {
		return a == nil
	}
	return SameJSON(a, b)
}
