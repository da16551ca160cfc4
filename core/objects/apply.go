package objects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/csaupgrade"
	kubectlutil "k8s.io/kubectl/pkg/util"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"khook.io/core/diff"
	"khook.io/core/manifest/kubeyaml"
)

// maxPatchAttempts bounds client-side apply's re-reads when the object
// changed between the read and the patch (kubectl apply's maxPatchRetry).
const maxPatchAttempts = 5

// ApplyOptions tune Apply.
type ApplyOptions struct {
	// ServerSide selects server-side apply (the manager's field manager,
	// force false); otherwise client-side apply: create, or a three-way
	// patch against the last-applied-configuration annotation.
	ServerSide bool
	// DryRun sends every write with dryRun=All: the server validates and
	// returns the result, nothing is persisted. (A dry-run CRD is never
	// established: custom resources of it cannot be dry-run after it.)
	DryRun bool
}

// applier is one Apply call.
type applier struct {
	ri           dynamic.ResourceInterface
	fieldManager string
	opts         ApplyOptions
	// createdBy marks what the applier creates (Options.CreatedBy).
	createdBy string
}

// Apply applies obj, kubectl apply style, filling in namespace for a
// namespaced object that has none: what the apply step runs per object,
// and what diff runs with DryRun to send the very same requests without
// persisting them. Errors keep the API server's wording (a forbidden
// request names the verb, resource and namespace); a server-side apply
// conflict is a *ConflictError.
func (m *Manager) Apply(ctx context.Context, obj *unstructured.Unstructured, namespace string, opts ApplyOptions) (Change, error) {
	mapping, err := m.Mapping(ctx, obj.GroupVersionKind())
	if err != nil {
		return Change{}, err
	}
	o := Prepare(obj, mapping, namespace)
	a := &applier{ri: m.Client(mapping, o.GetNamespace()), fieldManager: m.fieldManager, opts: opts, createdBy: m.createdBy}
	res := Change{Mapping: mapping}

	if o.GetName() == "" {
		// generateName: always a new object, which nothing finds again
		// (a url: or kustomize: source; validate refuses the others)
		return res, kubeyaml.ErrGenerateNameOnly
	}
	live, readErr := a.ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	switch {
	case readErr == nil:
		res.Live = live
		diff.Learn(m.redactor, o.Object, live.Object)
	case apierrors.IsNotFound(readErr):
		readErr = nil
	case apierrors.IsForbidden(readErr):
		// Try the write anyway: when it is refused too, the refusal of
		// the write is what the user needs to hear about.
	default:
		return res, readErr
	}
	if err := m.recordPrevious(ctx, a.ri, o, res.Live, opts); err != nil {
		return res, err // what the object held before khook: see previous.go
	}

	if opts.ServerSide {
		return a.serverSide(ctx, o, res, readErr)
	}
	if res.Live == nil {
		res, err := a.create(ctx, o, res)
		if readErr != nil && apierrors.IsAlreadyExists(err) {
			return res, readErr // it exists, but we may not read it to patch it
		}
		return res, err
	}
	return a.patch(ctx, o, res)
}

func (a *applier) dryRun() []string {
	if a.opts.DryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}

func (a *applier) create(ctx context.Context, o *unstructured.Unstructured, res Change) (Change, error) {
	if !a.opts.ServerSide {
		if err := kubectlutil.CreateApplyAnnotation(o, unstructured.UnstructuredJSONScheme); err != nil {
			return res, fmt.Errorf("record the last-applied configuration: %w", err)
		}
	}
	a.mark(o) // after the last-applied annotation, which so never names it
	out, err := a.ri.Create(ctx, o, metav1.CreateOptions{
		FieldManager:    a.fieldManager,
		FieldValidation: metav1.FieldValidationStrict,
		DryRun:          a.dryRun(),
	})
	if err != nil {
		return res, err
	}
	res.Action, res.Object = Created, out
	return res, nil
}

func (a *applier) serverSide(ctx context.Context, o *unstructured.Unstructured, res Change, readErr error) (Change, error) {
	if (res.Live == nil && readErr == nil) || (res.Live != nil && a.createdBy != "" && CreatedBy(res.Live) == a.createdBy) {
		a.mark(o) // khook's field: applied on every run, or the next would drop it
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return res, err
	}
	var migrated sets.Set[string]
	if res.Live != nil {
		if migrated, err = a.migrateClientSide(ctx, res.Live); err != nil {
			return res, fmt.Errorf("move field ownership from client-side apply to %q: %w", a.fieldManager, err)
		}
	}
	apply := func(force bool) (*unstructured.Unstructured, error) {
		return a.ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			FieldManager:    a.fieldManager,
			Force:           &force,
			FieldValidation: metav1.FieldValidationStrict,
			DryRun:          a.dryRun(),
		})
	}
	out, err := apply(false)
	if err != nil && apierrors.IsConflict(err) {
		err = newConflictError(err)
		// A dry run persists nothing, so the migration just sent is not
		// seen by this apply: conflicts with exactly the client-side
		// managers whose fields the real apply hands to khook first are
		// expected, and forcing them gives the real apply's result.
		var ce *ConflictError
		if a.opts.DryRun && errors.As(err, &ce) && ce.onlyWith(migrated) {
			out, err = apply(true)
		}
	}
	if err != nil {
		return res, err
	}
	res.Object = out
	switch {
	case readErr != nil:
		res.Action = Configured // it could not be read before: say the least
	case res.Live == nil:
		res.Action = Created
	case len(migrated) > 0, a.opts.DryRun: // a dry run keeps the resourceVersion either way
		res.Action = Configured
	case res.Live.GetResourceVersion() == out.GetResourceVersion():
		res.Action = Unchanged
	default:
		res.Action = Configured
	}
	return res, nil
}

// lastAppliedPath is where client-side apply keeps its configuration.
var lastAppliedPath = fieldpath.NewSet(fieldpath.MakePathOrDie("metadata", "annotations", corev1.LastAppliedConfigAnnotation))

// migrateClientSide hands the fields of client-side appliers (the Update
// managers owning the last-applied-configuration annotation: khook's own
// client-side apply, kubectl's) over to the server-side field manager
// before its first server-side apply, as kubectl apply --server-side
// does; otherwise every field they set would conflict. It returns the
// managers whose fields it handed over, none when it changed nothing.
func (a *applier) migrateClientSide(ctx context.Context, live *unstructured.Unstructured) (sets.Set[string], error) {
	for attempt := 1; ; attempt++ {
		owners := csaupgrade.FindFieldsOwners(live.GetManagedFields(), metav1.ManagedFieldsOperationUpdate, lastAppliedPath)
		if len(owners) == 0 {
			return nil, nil
		}
		names := sets.New[string]()
		for _, o := range owners {
			names.Insert(o.Manager)
		}
		patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, names, a.fieldManager)
		if err != nil || patch == nil {
			return nil, err
		}
		_, err = a.ri.Patch(ctx, live.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{DryRun: a.dryRun()})
		if err == nil {
			return names, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxPatchAttempts {
			return nil, err
		}
		if live, err = a.ri.Get(ctx, live.GetName(), metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
}

// patch is kubectl's client-side apply of an existing object: a three-way
// patch of the last applied configuration (the annotation), the new one
// and the live object; fields other writers set and the manifest never
// had survive.
func (a *applier) patch(ctx context.Context, o *unstructured.Unstructured, res Change) (Change, error) {
	modified, err := kubectlutil.GetModifiedConfiguration(o, true, unstructured.UnstructuredJSONScheme)
	if err != nil {
		return res, fmt.Errorf("serialize the manifest: %w", err)
	}
	live := res.Live
	for attempt := 1; ; attempt++ {
		patchType, patch, err := ThreeWayPatch(live, modified)
		if err != nil {
			return res, err
		}
		if string(patch) == "{}" {
			res.Action, res.Object = Unchanged, live
			return res, nil
		}
		out, err := a.ri.Patch(ctx, o.GetName(), patchType, patch, metav1.PatchOptions{
			FieldManager:    a.fieldManager,
			FieldValidation: metav1.FieldValidationStrict,
			DryRun:          a.dryRun(),
		})
		if apierrors.IsConflict(err) && attempt < maxPatchAttempts {
			if live, err = a.ri.Get(ctx, o.GetName(), metav1.GetOptions{}); err != nil {
				return res, err
			}
			continue
		}
		if err != nil {
			return res, err
		}
		res.Action, res.Object, res.Patch, res.PatchType = Configured, out, patch, patchType
		if !a.opts.DryRun && out.GetResourceVersion() == live.GetResourceVersion() {
			res.Action = Unchanged // the server normalized the change away
		}
		return res, nil
	}
}

// ThreeWayPatch computes kubectl apply's patch from live (the current
// object, holding the last-applied-configuration annotation) to modified
// (the manifest, with its new annotation, as
// kubectl's util.GetModifiedConfiguration makes it): a strategic merge
// patch for kinds built into client-go's scheme, a JSON merge patch
// (RFC 7386) for others, such as custom resources. "{}" means no change.
func ThreeWayPatch(live *unstructured.Unstructured, modified []byte) (types.PatchType, []byte, error) {
	current, err := runtime.Encode(unstructured.UnstructuredJSONScheme, live)
	if err != nil {
		return "", nil, fmt.Errorf("serialize the live object: %w", err)
	}
	original, err := kubectlutil.GetOriginalConfiguration(live)
	if err != nil {
		return "", nil, fmt.Errorf("read the last-applied configuration: %w", err)
	}
	gvk := live.GroupVersionKind()
	if versioned, err := scheme.Scheme.New(gvk); err == nil {
		lookup, err := strategicpatch.NewPatchMetaFromStruct(versioned)
		if err != nil {
			return "", nil, err
		}
		patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, lookup, true)
		if err != nil {
			return "", nil, fmt.Errorf("compute the patch: %w", err)
		}
		return types.StrategicMergePatchType, patch, nil
	} else if !runtime.IsNotRegisteredError(err) {
		return "", nil, err
	}
	patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(original, modified, current)
	if err != nil {
		return "", nil, fmt.Errorf("compute the patch: %w", err)
	}
	// kubectl's preconditions, checked here: jsonmergepatch reports a
	// failed one as an error that quotes the whole patch.
	var pm map[string]any
	if err := json.Unmarshal(patch, &pm); err != nil {
		return "", nil, fmt.Errorf("compute the patch: %w", err)
	}
	for _, ok := range []mergepatch.PreconditionFunc{
		mergepatch.RequireKeyUnchanged("apiVersion"), mergepatch.RequireKeyUnchanged("kind"), mergepatch.RequireMetadataKeyUnchanged("name"),
	} {
		if !ok(pm) {
			return "", nil, errors.New("compute the patch: apiVersion, kind or name differ from the live object")
		}
	}
	return types.MergePatchType, patch, nil
}

// Conflict is one field another field manager owns.
type Conflict struct {
	// Field is the field path (.data.key); Manager the field manager that
	// owns it; Detail the rest of the server's message ("using v1").
	Field, Manager, Detail string
}

// ConflictError is a server-side apply the API server refused because
// fields khook would change are owned by other field managers. khook
// applies with force: false, so it never takes fields over.
type ConflictError struct {
	Conflicts []Conflict
	Err       error // the API server's error
}

var conflictRe = regexp.MustCompile(`^conflict with "([^"]*)"\s*(.*)$`)

func newConflictError(err error) error {
	ce := &ConflictError{Err: err}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Type != metav1.CauseTypeFieldManagerConflict {
				continue
			}
			conf := Conflict{Field: c.Field, Detail: c.Message}
			if m := conflictRe.FindStringSubmatch(c.Message); m != nil {
				conf.Manager, conf.Detail = m[1], m[2]
			}
			ce.Conflicts = append(ce.Conflicts, conf)
		}
	}
	if len(ce.Conflicts) == 0 {
		return err // a plain optimistic-concurrency conflict
	}
	return ce
}

func (e *ConflictError) Error() string {
	parts := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		p := fmt.Sprintf("%s is owned by field manager %q", c.Field, c.Manager)
		if c.Detail != "" {
			p += " (" + c.Detail + ")"
		}
		parts[i] = p
	}
	noun := "conflict"
	if len(parts) > 1 {
		noun = "conflicts"
	}
	return fmt.Sprintf("server-side apply %s: %s; khook applies with force: false and does not take fields over from other managers: make the manifest agree with the live value, drop the field from the manifest, or have the other manager release it",
		noun, strings.Join(parts, "; "))
}

func (e *ConflictError) Unwrap() error { return e.Err }

// onlyWith reports whether every conflict is with one of managers.
func (e *ConflictError) onlyWith(managers sets.Set[string]) bool {
	if len(e.Conflicts) == 0 {
		return false
	}
	for _, c := range e.Conflicts {
		if !managers.Has(c.Manager) {
			return false
		}
	}
	return true
}
