package objects

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"khook.io/core/spec"
	"khook.io/core/waiter"
)

// servedPoll is how often discovery is asked whether a just-established
// CRD's kind is listed. Discovery has no watch, so this is the one poll of
// the package; it normally ends on its first try.
const servedPoll = 50 * time.Millisecond

// Establish makes a CustomResourceDefinition applied by res usable by
// the very next object: it waits for the Established condition (a watch,
// through the waiter), then until discovery lists its served versions,
// then forgets the unserved kinds and resets the shared RESTMapper so the
// next Mapping sees the kind.
func (m *Manager) Establish(ctx context.Context, res Change, progress func(string)) error {
	c := m.kube
	name := res.Object.GetName()
	err := waiter.Until(ctx, c, []waiter.Target{{Mapping: res.Mapping, Name: name}},
		spec.WaitFor{Kind: spec.ForCondition, Name: "Established", Value: "True"}, progress)
	if err != nil {
		return fmt.Errorf("wait for the CRD to be established: %w", err)
	}
	gvs, kind := servedVersions(res.Object)
	if res.Action != Unchanged && kind != "" {
		err := wait.PollUntilContextCancel(ctx, servedPoll, true, func(ctx context.Context) (bool, error) {
			for _, gv := range gvs {
				list, err := discovery.ToDiscoveryInterfaceWithContext(c.Typed.Discovery()).ServerResourcesForGroupVersionWithContext(ctx, gv.String())
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				if err != nil {
					return false, err
				}
				found := false
				for _, r := range list.APIResources {
					if r.Kind == kind {
						found = true
						break
					}
				}
				if !found {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("wait for the API server to serve %s: %w", kind, err)
		}
		m.ForgetUnserved()
	}
	return nil
}

// servedVersions returns the group versions a CRD serves, and its kind.
func servedVersions(crd *unstructured.Unstructured) ([]schema.GroupVersion, string) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var out []schema.GroupVersion
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		if served, _ := m["served"].(bool); served && name != "" {
			out = append(out, schema.GroupVersion{Group: group, Version: name})
		}
	}
	return out, kind
}

// CRDGroupKind returns the group and kind a CRD manifest defines.
func CRDGroupKind(crd *unstructured.Unstructured) schema.GroupKind {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}
}

// CRDNamespaced reports whether a CRD manifest defines a namespaced kind.
func CRDNamespaced(crd *unstructured.Unstructured) bool {
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	return scope != "Cluster"
}
