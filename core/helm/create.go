package helm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
// Installs apply server-side now (installServerSide), through Helm's own
// Create, which takes no lock; what still creates client-side through
// Create is the hooks of a release installed client-side (an upgrade or
// rollback keeps the release's method, and passes it to Create). A
// server-side create is always Helm's own.
//
// The options are read as Helm's Create reads them (see readCreateOptions):
// options that ask for server-side apply (or none at all: Helm's default)
// go to Helm's own Create; a client-side create honours what Helm's
// client-side create honours, and refuses a dry run, which Helm's
// client-side create ignores (it creates the objects). Whether this copy
// still behaves as Helm's Create is checked by TestCreateAsHelms, on the
// test cluster.
func (k *kubeClient) Create(resources helmkube.ResourceList, opts ...helmkube.ClientCreateOption) (*helmkube.Result, error) {
	if !k.clientSideCreates {
		return k.Client.Create(resources, opts...)
	}
	o, err := readCreateOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.serverSideApply {
		return k.Client.Create(resources, opts...)
	}
	if o.dryRun {
		return nil, errors.New("client-side create: dry run refused: Helm's client-side create ignores it and creates the objects, and khook's copy does not implement it")
	}
	// o.fieldValidation is not sent, as Helm's client-side create does not
	// send it ("for client-side apply: this is ignored").
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

// createOptions are the options of one Create, as Helm's Create resolves
// them.
type createOptions struct {
	serverSideApply bool
	forceConflicts  bool
	dryRun          bool
	fieldValidation helmkube.FieldValidationDirective
}

// helmCreateDefaults are the defaults of Helm's Create, as options:
// server-side apply, strict field validation.
var helmCreateDefaults = []helmkube.ClientCreateOption{
	helmkube.ClientCreateOptionServerSideApply(true, false),
	helmkube.ClientCreateOptionFieldValidationDirective(helmkube.FieldValidationDirectiveStrict),
}

// readCreateOptions resolves opts as Helm's Create does: Helm's own option
// functions applied, after Helm's defaults, to a value of Helm's options
// struct (unexported, so made and read by reflection), whose fields are
// then read by name. An option's error is Helm's, worded as Helm's Create
// words it. A field khook does not know (an option added by a Helm
// upgrade) is refused: khook's copy would otherwise drop it.
func readCreateOptions(opts []helmkube.ClientCreateOption) (createOptions, error) {
	var o createOptions
	ptr := reflect.New(reflect.TypeFor[helmkube.ClientCreateOption]().In(0).Elem())
	var errs []error
	for _, opt := range append(slices.Clone(helmCreateDefaults), opts...) {
		if opt == nil {
			return o, errors.New("client-side create: nil create option")
		}
		if err, _ := reflect.ValueOf(opt).Call([]reflect.Value{ptr})[0].Interface().(error); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("invalid client create option(s): %w", err) // Helm's words
	}
	v := ptr.Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case name == "serverSideApply" && f.Kind() == reflect.Bool:
			o.serverSideApply = f.Bool()
		case name == "forceConflicts" && f.Kind() == reflect.Bool:
			o.forceConflicts = f.Bool()
		case name == "dryRun" && f.Kind() == reflect.Bool:
			o.dryRun = f.Bool()
		case name == "fieldValidationDirective" && f.Kind() == reflect.String:
			o.fieldValidation = helmkube.FieldValidationDirective(f.String())
		default:
			return o, fmt.Errorf("client-side create: Helm's create option %s (%s) is unknown to khook's copy of Helm's create", name, f.Type())
		}
	}
	return o, nil
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
