package objects

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/csaupgrade"
	kubectlutil "k8s.io/kubectl/pkg/util"
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

// Revert gives up what khook wrote on live, an object it configured but
// did not create, so the object returns to what its owner had:
//   - client-side: the fields khook's last-applied annotation names are
//     removed by one patch (strategic merge for built-in kinds, JSON
//     merge for others), the annotation with them. Lists of built-in
//     kinds merged by key lose the entries khook's manifest holds (an
//     entry of only scalars, such as an env var, whole; one holding more,
//     such as a container, field by field); other lists go whole;
//   - server-side: an apply of an empty intent (apiVersion, kind, name)
//     as khook's field manager, the documented way to give up fields:
//     fields only khook owned are removed, fields shared with another
//     manager stay (they are that manager's too).
//
// It returns what it reverted; nothing when khook owns nothing of live.
func (m *Manager) Revert(ctx context.Context, mapping *meta.RESTMapping, live *unstructured.Unstructured) (Owned, error) {
	owned := m.OwnedBy(live)
	ri := m.Client(mapping, live.GetNamespace())
	if owned.ClientSide {
		patchType, patch, err := RevertPatch(live)
		if err != nil {
			return Owned{}, err
		}
		_, err = ri.Patch(ctx, live.GetName(), patchType, patch, metav1.PatchOptions{FieldManager: m.fieldManager})
		if err != nil {
			return Owned{}, fmt.Errorf("remove the fields of khook's client-side apply: %w", err)
		}
	}
	if owned.ServerSide {
		empty := map[string]any{"apiVersion": live.GetAPIVersion(), "kind": live.GetKind(), "metadata": map[string]any{"name": live.GetName()}}
		if ns := live.GetNamespace(); ns != "" {
			empty["metadata"].(map[string]any)["namespace"] = ns
		}
		data, err := json.Marshal(empty)
		if err != nil {
			return Owned{}, err
		}
		force := false
		_, err = ri.Patch(ctx, live.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: m.fieldManager, Force: &force})
		if err != nil {
			return Owned{}, fmt.Errorf("give up the fields of khook's server-side apply: %w", err)
		}
	}
	return owned, nil
}

// RevertPatch is the patch that removes from live every field its
// last-applied annotation names, and the annotation (see Revert).
func RevertPatch(live *unstructured.Unstructured) (types.PatchType, []byte, error) {
	raw, err := kubectlutil.GetOriginalConfiguration(live)
	if err != nil {
		return "", nil, fmt.Errorf("read the last-applied configuration: %w", err)
	}
	var original map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &original); err != nil {
			return "", nil, fmt.Errorf("read the last-applied configuration: %w", err)
		}
	}
	patchType := types.MergePatchType
	var lookup strategicpatch.LookupPatchMeta
	if versioned, err := scheme.Scheme.New(live.GroupVersionKind()); err == nil {
		if lookup, err = strategicpatch.NewPatchMetaFromStruct(versioned); err != nil {
			return "", nil, err
		}
		patchType = types.StrategicMergePatchType
	} else if !runtime.IsNotRegisteredError(err) {
		return "", nil, err
	}
	delete(original, "apiVersion")
	delete(original, "kind")
	if md, ok := original["metadata"].(map[string]any); ok {
		delete(md, "name")
		delete(md, "namespace")
	}
	patch := removal(original, lookup)
	md, _ := patch["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		patch["metadata"] = md
	}
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[corev1.LastAppliedConfigAnnotation] = nil
	data, err := json.Marshal(patch)
	return patchType, data, err
}

// removal is the patch that removes every leaf of orig: null for a
// scalar or an unkeyed list, the same for each field of a map; for a list
// merged by key (lookup, strategic merge only), each entry by its key.
func removal(orig map[string]any, lookup strategicpatch.LookupPatchMeta) map[string]any {
	out := map[string]any{}
	for k, v := range orig {
		switch tv := v.(type) {
		case map[string]any:
			if len(tv) == 0 {
				out[k] = nil
				continue
			}
			var sub strategicpatch.LookupPatchMeta
			if lookup != nil {
				sub, _, _ = lookup.LookupPatchMetadataForStruct(k)
			}
			out[k] = removal(tv, sub)
		case []any:
			out[k] = listRemoval(k, tv, lookup)
		default:
			out[k] = nil
		}
	}
	return out
}

func listRemoval(key string, list []any, lookup strategicpatch.LookupPatchMeta) any {
	if lookup == nil {
		return nil
	}
	sub, pm, err := lookup.LookupPatchMetadataForSlice(key)
	mergeKey := pm.GetPatchMergeKey()
	if err != nil || mergeKey == "" || !slices.Contains(pm.GetPatchStrategies(), "merge") {
		return nil
	}
	out := make([]any, 0, len(list))
	for _, e := range list {
		em, ok := e.(map[string]any)
		if !ok || em[mergeKey] == nil {
			return nil // not keyed as declared: remove the list whole
		}
		if scalarsOnly(em) {
			out = append(out, map[string]any{mergeKey: em[mergeKey], "$patch": "delete"})
			continue
		}
		rest := map[string]any{}
		for k, v := range em {
			if k != mergeKey {
				rest[k] = v
			}
		}
		r := removal(rest, sub)
		r[mergeKey] = em[mergeKey]
		out = append(out, r)
	}
	return out
}

func scalarsOnly(m map[string]any) bool {
	for _, v := range m {
		switch v.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}
