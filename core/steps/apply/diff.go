package apply

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubectlutil "k8s.io/kubectl/pkg/util"

	"khook.io/core/kube"
	"khook.io/core/manifest"
	"khook.io/core/spec"
	"khook.io/core/step"
)

// Diff is what Run would change, object by object, changing nothing: each
// object is sent exactly as Run sends it (client-side or server-side
// apply, the same field manager, strict field validation) with
// dryRun=All, and the server's answer is the merged object, next to the
// live one. With createNamespace, a missing namespace is a dry-run create
// too.
//
// An object whose namespace or CustomResourceDefinition this step creates
// first cannot be dry-run (a dry-run create persists nothing): its merged
// version is the manifest as apply would send it, with a note. One whose
// kind or namespace only an earlier step can create is unavailable, with
// the reason; the other objects are still diffed. A dry run the server
// refuses (an invalid object, a server-side apply conflict) is the
// error: apply would fail there.
func (e *Executor) Diff(ctx context.Context, req *step.Request) (step.Diff, error) {
	d, err := e.diff(ctx, req)
	if err != nil {
		return step.Diff{}, req.Redact(err)
	}
	return d.Redacted(req.Redactor), nil
}

func (e *Executor) diff(ctx context.Context, req *step.Request) (step.Diff, error) {
	objs, err := Objects(ctx, req)
	if err != nil {
		return step.Diff{}, err
	}
	a := req.Step.Apply
	ns := req.Namespace(a.Namespace)
	if a.SkipIf == spec.SkipIfExists {
		_, all, err := existing(ctx, req.Kube, objs, ns)
		if err != nil {
			return step.Diff{}, err
		}
		if all {
			return step.Diff{Skip: allExist(len(objs))}, nil
		}
	}

	// What this step itself creates before later objects need it.
	crdsHere := map[schema.GroupKind]*unstructured.Unstructured{}
	nsHere := map[string]bool{}
	for _, o := range objs {
		switch gvk := o.GroupVersionKind(); {
		case manifest.IsCRD(gvk):
			crdsHere[crdGroupKind(o)] = o
		case manifest.IsNamespace(gvk):
			nsHere[o.GetName()] = true
		}
	}

	var d step.Diff
	nsExists := map[string]bool{}
	if a.CreateNamespace && a.Namespace != "" {
		ok, err := namespaceExists(ctx, req.Kube, a.Namespace)
		switch {
		case apierrors.IsForbidden(err):
			ok = true // EnsureNamespace tries the create and finds it exists (or says it may not)
		case err != nil:
			return step.Diff{}, err
		}
		nsExists[a.Namespace] = ok
		if !ok {
			od, err := dryRunNamespace(ctx, req.Kube, a.Namespace)
			if err != nil {
				return step.Diff{}, err
			}
			d.Objects = append(d.Objects, od)
			nsHere[a.Namespace] = true
		}
	}

	ap := &Applier{Kube: req.Kube, ServerSide: a.ServerSide, FieldManager: e.fieldManager, DryRun: true, Redactor: req.Redactor}
	// kinds found unserved: one discovery reset each, not one per object
	unserved := map[schema.GroupVersionKind]error{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		var mapping *meta.RESTMapping
		err := unserved[gvk]
		if err == nil {
			if mapping, err = req.Kube.MappingFor(ctx, gvk); meta.IsNoMatchError(err) {
				unserved[gvk] = err
			}
		}
		if meta.IsNoMatchError(err) {
			if crd := crdsHere[gvk.GroupKind()]; crd != nil {
				p := o.DeepCopy()
				manifest.SetNamespace(p, crdNamespaced(crd), ns)
				od, err := e.asSent(p, a.ServerSide, "not a server dry run: its CustomResourceDefinition is created by this step first")
				if err != nil {
					return step.Diff{}, err
				}
				d.Objects = append(d.Objects, od)
				continue
			}
			d.Objects = append(d.Objects, step.ObjectDiff{Name: objectName(o),
				Unavailable: fmt.Sprintf("the cluster does not serve %s: its CustomResourceDefinition does not exist yet (an earlier step may create it)", kindString(gvk))})
			continue
		}
		if err != nil {
			return step.Diff{}, fmt.Errorf("%s: %w", manifest.Ref(o), err)
		}
		p := Prepare(o, mapping, ns)
		if kube.Namespaced(mapping) {
			present, seen := nsExists[p.GetNamespace()]
			if !seen {
				present, err = namespaceExists(ctx, req.Kube, p.GetNamespace())
				switch {
				case apierrors.IsForbidden(err):
					present = true // may not read namespaces: the dry run will tell
				case err != nil:
					return step.Diff{}, err
				}
				nsExists[p.GetNamespace()] = present
			}
			switch {
			case !present && nsHere[p.GetNamespace()]:
				od, err := e.asSent(p, a.ServerSide, "not a server dry run: its namespace is created by this step first")
				if err != nil {
					return step.Diff{}, err
				}
				d.Objects = append(d.Objects, od)
				continue
			case !present:
				d.Objects = append(d.Objects, step.ObjectDiff{Name: objectName(p),
					Unavailable: fmt.Sprintf("namespace %s does not exist (an earlier step may create it)", p.GetNamespace())})
				continue
			}
		}
		res, err := ap.Apply(ctx, o, ns)
		if err != nil {
			return step.Diff{}, fmt.Errorf("%s: dry run: %w", manifest.Ref(p), err)
		}
		d.Objects = append(d.Objects, step.ObjectDiff{Name: objectName(res.Object), Live: res.Live, Merged: res.Object})
	}
	return d, nil
}

// asSent is an object that cannot be dry-run, as apply would create it:
// with the last-applied-configuration annotation of client-side apply.
func (e *Executor) asSent(o *unstructured.Unstructured, serverSide bool, note string) (step.ObjectDiff, error) {
	if !serverSide {
		if err := kubectlutil.CreateApplyAnnotation(o, unstructured.UnstructuredJSONScheme); err != nil {
			return step.ObjectDiff{}, fmt.Errorf("%s: record the last-applied configuration: %w", manifest.Ref(o), err)
		}
	}
	return step.ObjectDiff{Name: objectName(o), Merged: o, Note: note}, nil
}

// dryRunNamespace is createNamespace's create, as a dry run.
func dryRunNamespace(ctx context.Context, c *kube.Clients, name string) (step.ObjectDiff, error) {
	created, err := c.Typed.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{FieldManager: FieldManager, DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return step.ObjectDiff{}, fmt.Errorf("namespace %s: dry-run create: %w", name, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(created)
	if err != nil {
		return step.ObjectDiff{}, fmt.Errorf("namespace %s: %w", name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	return step.ObjectDiff{Name: "Namespace " + name, Merged: u}, nil
}

// objectName is "Kind namespace/name", or "Kind name" without a
// namespace.
func objectName(o *unstructured.Unstructured) string {
	name := o.GetName()
	if name == "" {
		name = o.GetGenerateName() + "*"
	}
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + " " + ns + "/" + name
	}
	return o.GetKind() + " " + name
}

// crdNamespaced reports whether a CRD manifest defines a namespaced kind.
func crdNamespaced(crd *unstructured.Unstructured) bool {
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	return scope != "Cluster"
}

var _ step.Differ = (*Executor)(nil)
