package helm

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"khook.io/core/objects"
)

// An upgrade khook makes puts back what drifted, whichever way the
// release applies (decision 191):
//
//   - client-side (Helm 3's three-way strategic merge of the last
//     revision's manifest, the new one and the live object): Helm merges
//     custom resources two-way, from the old manifest to the new one only,
//     which leaves a drifted field of a custom resource drifted when the
//     chart did not change it; khook's upgrades merge them three-way, as
//     kubectl apply does (Helm's ThreeWayMergeForUnstructured, which its
//     install --replace uses);
//   - server-side: a repair (and an upgrade --replace forces) applies with
//     force-conflicts (helm upgrade --force-conflicts), so a field another
//     manager edited is taken back instead of failing as a conflict.
//
// Either way, a repair (and an upgrade --replace forces) writes only what
// it repairs and what helm still owns (decision 253): the fields the drift
// check found to be another writer's, kept, ignored, or holding the
// manifest's value written by someone else since helm, are left out of
// what the upgrade applies (Drift.leave): server-side, a field helm does
// not own and does not apply is left as it is; client-side, a field that
// neither the last manifest nor the new one has is not in the three-way
// patch. A write of theirs between the check and the repair (an
// autoscaler scaling) so stands.

// readyUpgrade readies up, an upgrade of last to ch, as khook's upgrades
// are (above): its Kubernetes client, and force conflicts for a repair or
// an upgrade --replace forces of a release that applies server-side. An
// upgrade to another chart, values or manifests leaves out what owners
// (last's objects as read, nil when unknown) says is another writer's,
// where the chart did not change it (Update). It logs what the upgrade
// is for.
func (c *Client) readyUpgrade(cfg *configuration, up *action.Upgrade, r Release, ch *Chart, last *release.Release, res Result, owners *Drift) {
	uc := &upgradeClient{kubeClient: cfg.kube}
	switch {
	case res.Drift.Repairs() || res.Forced:
		uc.leave = res.Drift.leave
		uc.before = c.beforeRepair
	case owners != nil:
		uc.leave = owners.leave
	}
	cfg.KubeClient = uc
	if res.Drift.Repairs() || res.Forced {
		up.ForceConflicts = forceConflicts(up, last)
	}
	switch {
	case res.Drift.Repairs():
		c.env.logf("repairing release %s in %s at %s: %s", r.Name, r.Namespace, statusOf(last), res.Drift.Summary("missing"))
	case res.Forced:
		c.env.logf("upgrading release %s in %s from %s to a new revision of the same chart and values: forced by --replace", r.Name, r.Namespace, statusOf(last))
	default:
		c.env.logf("upgrading release %s in %s from %s to chart %s", r.Name, r.Namespace, statusOf(last), ch.Ref)
	}
}

// forceConflicts reports whether an upgrade of last by up applies
// server-side, by Helm's rule ("auto": the release's own method): force
// conflicts is an option of server-side apply only (Helm refuses it with
// client-side apply).
func forceConflicts(up *action.Upgrade, last *release.Release) bool {
	switch up.ServerSideApply {
	case "true":
		return true
	case "auto":
		return last.ApplyMethod == "ssa"
	}
	return false
}

// upgradeClient is the Kubernetes client of an upgrade: Helm's (with
// khook's waits), whose Update leaves what a repair does not write out of
// it and merges custom resources three-way when it applies client-side.
type upgradeClient struct {
	*kubeClient
	// leave says, per object (objectKey), the fields the upgrade does not
	// write unless the chart changed them, and the object as the last
	// manifest has it; nil: it writes every field.
	leave func(key string) ([]fieldpath.Path, *unstructured.Unstructured, error)
	// before runs before the objects are written (a test's hook point).
	before func()
}

// Update is Helm's, with the fields leave names taken out of the targets
// (and, when it applies client-side, out of the originals, so that the
// three-way patch has no word on them) and, client-side, custom resources
// merged three-way.
func (k *upgradeClient) Update(originals, targets helmkube.ResourceList, opts ...helmkube.ClientUpdateOption) (*helmkube.Result, error) {
	ssa, err := updateServerSide(opts)
	if err != nil {
		ssa = true // Helm's own Update refuses the options; touch nothing
	}
	if k.leave != nil {
		for _, info := range targets {
			u, ok := info.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			paths, was, lerr := k.leave(objectKey(u))
			if lerr != nil {
				return nil, fmt.Errorf("%s: %w", u.GetKind()+"/"+u.GetName(), lerr)
			}
			if len(paths) == 0 {
				continue
			}
			paths = unchangedBy(u, was, paths)
			var orig *unstructured.Unstructured
			if o := originals.Get(info); o != nil && !ssa {
				orig, _ = o.Object.(*unstructured.Unstructured)
			}
			for _, p := range paths {
				objects.SetPath(u.Object, p, nil, false)
				if orig != nil {
					objects.SetPath(orig.Object, p, nil, false)
				}
			}
		}
	}
	if k.before != nil {
		k.before()
	}
	if err == nil && !ssa {
		opts = append(slices.Clone(opts), helmkube.ClientUpdateOptionThreeWayMergeForUnstructured(true))
	}
	return k.kubeClient.Update(originals, targets, opts...)
}

// updateServerSide reads whether opts ask Helm's Update for server-side
// apply (its default), as Helm resolves them: the options applied, after
// Helm's default, to a value of Helm's unexported options struct, whose
// serverSideApply field is read by name (as readCreateOptions reads a
// create's).
func updateServerSide(opts []helmkube.ClientUpdateOption) (bool, error) {
	ptr := reflect.New(reflect.TypeFor[helmkube.ClientUpdateOption]().In(0).Elem())
	for _, opt := range append([]helmkube.ClientUpdateOption{helmkube.ClientUpdateOptionServerSideApply(true, false)}, opts...) {
		if opt == nil {
			continue
		}
		if err, _ := reflect.ValueOf(opt).Call([]reflect.Value{ptr})[0].Interface().(error); err != nil {
			return false, err
		}
	}
	f := ptr.Elem().FieldByName("serverSideApply")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		return false, errors.New("helm's update options have no serverSideApply")
	}
	return f.Bool(), nil
}

// unchangedBy keeps of paths those target (an object the upgrade writes)
// holds as was (the same object in the last manifest, as stored) does:
// a field the chart changed is the chart's to write, whoever owns it.
func unchangedBy(target, was *unstructured.Unstructured, paths []fieldpath.Path) []fieldpath.Path {
	if was == nil {
		return paths
	}
	now := objects.AsStored(target).Object
	var out []fieldpath.Path
	for _, p := range paths {
		a, inNow := objects.LookupPathLenient(now, p)
		b, inWas := objects.LookupPathLenient(was.Object, p)
		if inNow == inWas && (!inNow || objects.SameJSON(a, b)) {
			out = append(out, p)
		}
	}
	return out
}
