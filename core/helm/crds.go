package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/manifest"
)

// A chart's crds/ as helm documents them (decision 254): "CRDs in crds/
// are installed only when they are absent, and are never upgraded or
// deleted". helm 3 created them and took "already exists" as present;
// helm 4 applies them server-side, where a present CRD another manager
// owns is a conflict ("Apply failed with 1 conflict: conflict with
// \"khook\": .metadata.annotations.operator.prometheus.io/version"), so
// that a chart whose CRDs an earlier step (an apply: step, another
// release, kubectl) installed cannot be installed. khook keeps helm's
// contract: before an install, each CRD of the crds/ helm would install
// (the chart's own and those of the dependencies its values enable) that
// exists is taken out of the chart, with a warning naming who manages it;
// helm's install creates the rest as it does (server-side, waited for
// until established). CRDs of crds/ are never part of a release's
// manifest, so neither the drift check nor a repair ever touches them;
// a spec that wants them kept as written applies them with an apply:
// step, whose drift policy then holds.

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// PresentCRD is a CRD of a chart's crds/ that exists, so that an install
// skips it.
type PresentCRD struct {
	// File is the chart file (crds/crd-x.yaml, or charts/dep/crds/...).
	File string
	Name string
	// Managers are the field managers of the live CRD (status aside);
	// Release the helm release its annotations name, "" when none.
	Managers []string
	Release  string
}

// String is the warning a skipped CRD gets: "crds/crd-rules.yaml:
// CustomResourceDefinition prometheusrules.monitoring.coreos.com exists
// (managed by khook): skipped, as helm installs a chart's crds/ only when
// they are absent".
func (p PresentCRD) String() string {
	return fmt.Sprintf("%s: CustomResourceDefinition %s exists (%s): skipped, as helm installs a chart's crds/ only when they are absent", p.File, p.Name, p.managedBy())
}

func (p PresentCRD) managedBy() string {
	var by []string
	if len(p.Managers) > 0 {
		by = append(by, "managed by "+strings.Join(p.Managers, ", "))
	}
	if p.Release != "" {
		by = append(by, "of helm release "+p.Release)
	}
	if len(by) == 0 {
		return "no field manager recorded"
	}
	return strings.Join(by, ", ")
}

// presentCRDs finds the CRDs of chrt's crds/ that an install with vals
// would create and that exist. A CRD that may not be read is taken as
// absent: helm's own create then says what it can.
func (c *Client) presentCRDs(ctx context.Context, ch *Chart, chrt *chart.Chart, vals map[string]any) ([]PresentCRD, error) {
	crds := chrt.CRDObjects()
	if len(crds) == 0 {
		return nil, nil
	}
	installs, err := crdFilesInstalled(ch, vals)
	if err != nil {
		return nil, err
	}
	ri := c.env.Kube.Dynamic.Resource(crdGVR)
	var out []PresentCRD
	for _, crd := range crds {
		if !installs[crd.Filename] || crd.File == nil {
			continue
		}
		objs, err := manifest.Decode(crd.File.Data)
		if err != nil {
			continue // helm's install reports it
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" || o.GetName() == "" {
				continue
			}
			live, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
				continue
			case err != nil:
				return nil, fmt.Errorf("read CustomResourceDefinition %s of %s: %w", o.GetName(), crd.Name, err)
			}
			out = append(out, PresentCRD{File: chartFile(crd), Name: o.GetName(), Managers: crdManagers(live), Release: live.GetAnnotations()["meta.helm.sh/release-name"]})
		}
	}
	return out, nil
}

// chartFile is a CRD file's path in the chart: crds/x.yaml, or
// charts/dep/crds/x.yaml for a dependency's.
func chartFile(crd chart.CRD) string {
	if _, rest, ok := strings.Cut(crd.Filename, "/"); ok {
		return rest
	}
	return crd.Name
}

// crdManagers are the field managers of live, in its order, those that
// write only its status (the API server's) left out.
func crdManagers(live *unstructured.Unstructured) []string {
	var out []string
	for _, m := range live.GetManagedFields() {
		if m.Subresource != "" || slices.Contains(out, m.Manager) {
			continue
		}
		out = append(out, m.Manager)
	}
	return out
}

// crdFilesInstalled are the crds/ files (by Filename, as CRDObjects names
// them) an install with vals creates: those of the chart and of the
// dependencies vals enable, as helm's install decides them
// (ProcessDependencies), found on a copy of the chart.
func crdFilesInstalled(ch *Chart, vals map[string]any) (map[string]bool, error) {
	cp, err := ch.load()
	if err != nil {
		return nil, err
	}
	if err := chartutil.ProcessDependencies(cp, vals); err != nil {
		return nil, fmt.Errorf("chart dependencies processing failed: %w", err)
	}
	out := map[string]bool{}
	for _, crd := range cp.CRDObjects() {
		out[crd.Filename] = true
	}
	return out, nil
}

// dropCRDs takes present out of chrt's crds/ files: a file left with no
// object is removed from its chart, one left with some keeps those
// (written as JSON documents, which helm reads as YAML).
func dropCRDs(chrt *chart.Chart, present []PresentCRD) error {
	if len(present) == 0 {
		return nil
	}
	gone := map[string]bool{}
	for _, p := range present {
		gone[p.Name] = true
	}
	return dropCRDsIn(chrt, gone)
}

func dropCRDsIn(chrt *chart.Chart, gone map[string]bool) error {
	files := chrt.Files[:0:0]
	for _, f := range chrt.Files {
		if !strings.HasPrefix(f.Name, "crds/") {
			files = append(files, f)
			continue
		}
		objs, err := manifest.Decode(f.Data)
		if err != nil {
			files = append(files, f)
			continue
		}
		var kept []string
		dropped := false
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" && gone[o.GetName()] {
				dropped = true
				continue
			}
			b, err := json.Marshal(o.Object)
			if err != nil {
				return err
			}
			kept = append(kept, string(b))
		}
		switch {
		case !dropped:
			files = append(files, f)
		case len(kept) > 0:
			f.Data = []byte(strings.Join(kept, "\n---\n") + "\n")
			files = append(files, f)
		}
	}
	chrt.Files = files
	for _, dep := range chrt.Dependencies() {
		if err := dropCRDsIn(dep, gone); err != nil {
			return err
		}
	}
	return nil
}

// crdSkips are the lines a plan or diff of an install gives the present
// CRDs of the chart's crds/ it will skip.
func (c *Client) crdSkips(ctx context.Context, ch *Chart, vals map[string]any) ([]string, error) {
	chrt, err := ch.load()
	if err != nil {
		return nil, err
	}
	present, err := c.presentCRDs(ctx, ch, chrt, vals)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(present))
	for i, p := range present {
		out[i] = fmt.Sprintf("%s: CustomResourceDefinition %s exists (%s): will be skipped, as helm installs a chart's crds/ only when they are absent", p.File, p.Name, p.managedBy())
	}
	return out, nil
}
