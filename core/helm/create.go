package helm

import (
	"errors"
	"os"
	"path/filepath"
	"sync"

	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/util/retry"
)

// Create creates a release's resources (or one hook) as Helm's client-side
// create does: kind after kind in the order given, the resources of one
// kind in parallel, each create retried on conflict, every failure
// reported. It leaves out Helm 4's one process-wide lock around every
// create (added against a data race the change does not locate,
// helm/helm#30972; each create reads and writes only its own object),
// which made the creates of releases installed in parallel wait for one
// another: ten releases of two objects were twenty creates in a row
// (decision 105).
//
// khook creates this way only when it knows the operation applies
// client-side: an install (see Client.install, which never applies
// server-side). Anything else, server-side apply and an upgrade's "auto",
// whose method Helm resolves from the history, is Helm's own Create.
func (k *kubeClient) Create(resources helmkube.ResourceList, opts ...helmkube.ClientCreateOption) (*helmkube.Result, error) {
	if !k.clientSideCreates {
		return k.Client.Create(resources, opts...)
	}
	if len(resources) == 0 {
		return nil, helmkube.ErrNoObjectsVisited
	}
	var errs []error
	for _, batch := range kindBatches(resources) {
		errs = append(errs, createAll(batch)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &helmkube.Result{Created: resources}, nil
}

// kindBatches cuts resources into runs of one kind, in order, as Helm's
// client batches them.
func kindBatches(resources helmkube.ResourceList) []helmkube.ResourceList {
	var batches []helmkube.ResourceList
	kind := ""
	for i, info := range resources {
		k := info.Object.GetObjectKind().GroupVersionKind().Kind
		if i == 0 || k != kind {
			batches = append(batches, nil)
			kind = k
		}
		batches[len(batches)-1] = append(batches[len(batches)-1], info)
	}
	return batches
}

// createAll creates infos in parallel and returns every failure, in the
// order of infos.
func createAll(infos helmkube.ResourceList) []error {
	errs := make([]error, len(infos))
	var wg sync.WaitGroup
	for i, info := range infos {
		wg.Go(func() { errs[i] = createResource(info) })
	}
	wg.Wait()
	return errs
}

// createResource is Helm's client-side create of one resource: a POST
// with Helm's field manager, the live object read back into info.
func createResource(info *resource.Info) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := resource.NewHelper(info.Client, info.Mapping).
			WithFieldManager(helmFieldManager()).
			Create(info.Namespace, true, info.Object)
		if err != nil {
			return err
		}
		return info.Refresh(obj, true)
	})
}

// helmFieldManager is the field manager Helm's writes use:
// kube.ManagedFieldsManager when set, else the binary's name.
func helmFieldManager() string {
	if helmkube.ManagedFieldsManager != "" {
		return helmkube.ManagedFieldsManager
	}
	if os.Args[0] == "" {
		return "unknown"
	}
	return filepath.Base(os.Args[0])
}
