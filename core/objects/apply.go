package objects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
	"khook.io/core/spec"
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
	// Warn receives what kubectl apply prints as a warning (a client-side
	// apply to an object without the last-applied annotation, a
	// server-side migration that failed); nil drops it.
	Warn func(text string)
	// Drift is the step's drift policy: the fields of an existing object
	// it keeps for other writers, ignores or (warn) leaves as a person
	// changed them are left out of the write (Policy.Sort), and said in
	// the Change. Nil, or mode off: the manifest is written whole, as
	// kubectl apply writes it.
	Drift *Policy
}

// applier is one Apply call.
type applier struct {
	ri           dynamic.ResourceInterface
	fieldManager string
	opts         ApplyOptions
	// leave are the fields the write leaves out (Policy.Sort); sorted:
	// the drift policy sorted the object's fields (the step applied it
	// before).
	leave  []fieldpath.Path
	sorted bool
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
	if err := a.sort(o, &res); err != nil {
		return res, err
	}
	takeBack, err := m.recordPrevious(ctx, a.ri, o, res.Live, opts)
	if err != nil {
		return res, err // what the object held before khook: see previous.go
	}
	res, err = a.write(ctx, o, res, readErr)
	if err != nil && takeBack != nil && refused(err) {
		// the write changed nothing: neither does the record
		if terr := takeBack(ctx); terr != nil {
			err = errors.Join(err, terr)
		}
	}
	return res, err
}

// sort sorts the fields of o, an object the step applied before, under
// the drift policy (Policy.Sort): what the write leaves out, and what
// res says of it. An object the step never applied (client-side: it
// carries no last-applied configuration; server-side: the step's field
// manager applied none of it) is applied as kubectl applies it: adopting
// one is not repairing it (a conflict with its appliers stays a
// conflict).
func (a *applier) sort(o *unstructured.Unstructured, res *Change) error {
	p := a.opts.Drift
	if p == nil || p.Mode == spec.DriftOff || res.Live == nil {
		return nil
	}
	var previous *unstructured.Unstructured
	if a.opts.ServerSide {
		if !appliedBy(res.Live, a.fieldManager) {
			return nil
		}
	} else {
		last, err := LastApplied(res.Live)
		if err != nil || last == nil {
			return err
		}
		previous = last
	}
	sorted, err := p.Sort(o, previous, res.Live, a.fieldManager)
	if err != nil {
		return err
	}
	res.Kept, res.Ignored, res.Left, a.leave, a.sorted = sorted.Kept, sorted.Ignored, sorted.Left, sorted.Leave, true
	return nil
}

// appliedBy reports whether manager applied live (server-side): it has a
// managedFields entry of operation Apply.
func appliedBy(live *unstructured.Unstructured, manager string) bool {
	for _, m := range live.GetManagedFields() {
		if m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// write is Apply's write of o: server-side apply, or client-side apply's
// create or three-way patch.
func (a *applier) write(ctx context.Context, o *unstructured.Unstructured, res Change, readErr error) (Change, error) {
	if a.opts.ServerSide {
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

// refused reports whether err is the API server refusing a write: a
// client error (4xx: invalid, forbidden, a field manager conflict, a
// changed object) other than a request timeout, after which the write
// may still happen. A refused write changed nothing.
func refused(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	code := int(status.Status().Code)
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout
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
	clearForCreate(o)
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

// clearForCreate clears what kubectl apply clears before it creates an
// object (resource.Helper.Create with modify: the resourceVersion, which
// the API server refuses on a create: "resourceVersion should not be set
// on objects to be created"), after the last-applied annotation was made
// from the manifest as it is, as kubectl makes it: a manifest exported
// with kubectl get -o yaml is created as kubectl creates it (decision
// 223). The other fields the server sets (uid, creationTimestamp,
// generation, selfLink, status) are sent, as kubectl sends them: the
// server ignores them on a create. Server-side apply sends the manifest
// as it is, as kubectl apply --server-side does (the server then refuses
// a uid of another object, as it refuses kubectl's).
func clearForCreate(o *unstructured.Unstructured) {
	if o.GetResourceVersion() != "" {
		o.SetResourceVersion("")
	}
}

func (a *applier) serverSide(ctx context.Context, o *unstructured.Unstructured, res Change, readErr error) (Change, error) {
	// the configuration a last-applied annotation records: the manifest,
	// without khook's mark (as client-side apply's, so that a later
	// client-side apply never drops the mark)
	conf, err := lastApplied(o)
	if err != nil {
		return res, err
	}
	if ann := o.GetAnnotations(); ann[corev1.LastAppliedConfigAnnotation] != "" {
		// a manifest carrying the annotation: the server stores the real
		// configuration for kubectl's server-side apply, khook writes it
		ann[corev1.LastAppliedConfigAnnotation] = conf
		o.SetAnnotations(ann)
	}
	if (res.Live == nil && readErr == nil) || (res.Live != nil && a.createdBy != "" && CreatedBy(res.Live) == a.createdBy) {
		a.mark(o) // khook's field: applied on every run, or the next would drop it
	}
	body := o
	if len(a.leave) > 0 {
		body = o.DeepCopy()
		for _, p := range a.leave {
			SetPath(body.Object, p, nil, false) // not khook's to write: left as it is
		}
	}
	data, err := json.Marshal(body.Object)
	if err != nil {
		return res, err
	}
	apply := func(force bool) (*unstructured.Unstructured, error) {
		out, err := a.ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			FieldManager:    a.fieldManager,
			Force:           &force,
			FieldValidation: metav1.FieldValidationStrict,
			DryRun:          a.dryRun(),
		})
		if err != nil && apierrors.IsConflict(err) {
			err = newConflictError(err)
		}
		return out, err
	}
	out, err := apply(false)
	var ce *ConflictError
	if errors.As(err, &ce) && res.Live != nil {
		// The API server lets kubectl's own server-side apply (manager
		// "kubectl") through conflicts with the client-side appliers of
		// the fields the last-applied annotation holds, forcing them
		// (lastAppliedManager): that is how kubectl apply --server-side
		// takes over what client-side applies set. For khook's manager
		// the server does not, so khook does: conflicts only with the
		// client-side appliers owning the annotation are forced.
		//
		// Under a drift policy, so are conflicts only with managers whose
		// writes it puts back (people's, managers.take): the fields it
		// keeps for others are not in the apply (decision 251).
		if csa := clientSideAppliers(res.Live); ce.onlyWith(csa) || a.takesBack(ce) {
			out, err = apply(true)
		}
	}
	if err != nil {
		return res, err
	}
	// After the apply succeeded, as kubectl apply --server-side: keep the
	// last-applied annotation current, then hand the client-side appliers'
	// fields over and apply again (migrateToSSAIfNecessary).
	out, migrated := a.afterServerSide(ctx, conf, out, func() (*unstructured.Unstructured, error) { return apply(false) })
	res.Object = out
	switch {
	case readErr != nil:
		res.Action = Configured // it could not be read before: say the least
	case res.Live == nil:
		res.Action = Created
	case migrated, a.opts.DryRun: // a dry run keeps the resourceVersion either way
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

// LastAppliedManager is the field manager that keeps the last-applied
// annotation of an object applied server-side, kubectl's
// (kubectl-last-applied): kubectl apply --server-side and khook keep one
// owner of it (decision 224).
const LastAppliedManager = "kubectl-last-applied"

// kubectlManager is kubectl apply --server-side's field manager, the one
// for which the API server keeps the last-applied annotation itself.
const kubectlManager = "kubectl"

// afterServerSide is what kubectl apply --server-side does once its apply
// of o succeeded (out), in kubectl's order, each step's failure a warning
// (the object was applied; the next apply tries again), as kubectl's:
//
//  1. The last-applied annotation, when the object has one (it was once
//     applied client-side), is kept current with the real configuration
//     applied (o without the annotation), so that a later client-side
//     apply computes its patch from it. The API server does that itself
//     only for kubectl's own field manager ("kubectl"); for khook's, khook
//     writes it, as an apply of the annotation alone by
//     LastAppliedManager, which kubectl's apply also makes when no
//     server-side manager owns the annotation. A changed value is forced
//     onto the annotation alone (the server's own update changes it
//     whoever owns it).
//  2. The fields of the client-side appliers (the Update managers that
//     owned the annotation after the apply: kubectl's, khook's own
//     client-side apply) are handed to khook's field manager
//     (csaupgrade), and o is applied again, so that fields o dropped are
//     removed.
//
// A dry run sends none of these requests: the annotation is set on the
// returned object, as the real run would leave it.
func (a *applier) afterServerSide(ctx context.Context, want string, out *unstructured.Unstructured, apply func() (*unstructured.Unstructured, error)) (*unstructured.Unstructured, bool) {
	csa := clientSideAppliers(out)
	if current := out.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; current != "" { // the server's hasLastApplied
		if a.fieldManager == kubectlManager {
			want = current // the server keeps it for kubectl's own manager
		}
		switch {
		case a.opts.DryRun:
			ann := out.GetAnnotations()
			ann[corev1.LastAppliedConfigAnnotation] = want
			out.SetAnnotations(ann)
			return out, false
		default:
			if kept, err := a.keepLastApplied(ctx, out, want); err != nil {
				a.warnf("failed to migrate %s for Server-Side Apply of %s. This is non-fatal and will be retried next time you apply. Error: %v",
					corev1.LastAppliedConfigAnnotation, describe(out), err)
				return out, false // kubectl migrates nothing then either
			} else if kept != nil {
				out = kept
			}
		}
	}
	if len(csa) == 0 || a.opts.DryRun {
		return out, false
	}
	migrated, err := a.migrateClientSide(ctx, out, csa)
	if err != nil {
		a.warnf("server rejected managed fields migration of %s to Server-Side Apply. This is non-fatal and will be retried next time you apply. Error: %v", describe(out), err)
		return out, false
	}
	if migrated == nil {
		return out, false
	}
	again, err := apply() // dropped fields are removed now
	if err != nil {
		a.warnf("failed to re-apply %s after performing Server-Side Apply migration. This is non-fatal and will be retried next time you apply. Error: %v", describe(out), err)
		return migrated, true
	}
	return again, true
}

// clientSideAppliers are the Update managers owning obj's last-applied
// annotation: the client-side appliers whose fields a server-side apply
// takes over (kubectl's FindFieldsOwners).
func clientSideAppliers(obj *unstructured.Unstructured) sets.Set[string] {
	names := sets.New[string]()
	for _, o := range csaupgrade.FindFieldsOwners(obj.GetManagedFields(), metav1.ManagedFieldsOperationUpdate, lastAppliedPath) {
		names.Insert(o.Manager)
	}
	return names
}

// keepLastApplied makes live's last-applied annotation want, owned by
// LastAppliedManager; nil when it is so already.
func (a *applier) keepLastApplied(ctx context.Context, live *unstructured.Unstructured, want string) (*unstructured.Unstructured, error) {
	current := live.GetAnnotations()[corev1.LastAppliedConfigAnnotation]
	owned := len(csaupgrade.FindFieldsOwners(live.GetManagedFields(), metav1.ManagedFieldsOperationApply, lastAppliedPath)) > 0
	if current == want && owned {
		return nil, nil
	}
	just := &unstructured.Unstructured{}
	just.SetGroupVersionKind(live.GroupVersionKind())
	just.SetName(live.GetName())
	just.SetNamespace(live.GetNamespace())
	just.SetAnnotations(map[string]string{corev1.LastAppliedConfigAnnotation: want})
	data, err := json.Marshal(just.Object)
	if err != nil {
		return nil, err
	}
	force := current != want
	return a.ri.Patch(ctx, live.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: LastAppliedManager, Force: &force})
}

// lastApplied is the last-applied configuration of o as the API server
// writes it for kubectl's server-side apply (buildLastApplied): o without
// the annotation, as JSON.
func lastApplied(o *unstructured.Unstructured) (string, error) {
	c := o.DeepCopy()
	ann := c.GetAnnotations()
	delete(ann, corev1.LastAppliedConfigAnnotation)
	c.SetAnnotations(ann)
	data, err := runtime.Encode(unstructured.UnstructuredJSONScheme, c)
	return string(data), err
}

// migrateClientSide hands the fields of the client-side appliers names
// over to the server-side field manager, as kubectl apply --server-side
// does after its apply: otherwise fields dropped from the manifest would
// stay theirs. It returns the object after, nil when nothing was to move.
func (a *applier) migrateClientSide(ctx context.Context, live *unstructured.Unstructured, names sets.Set[string]) (*unstructured.Unstructured, error) {
	for attempt := 1; ; attempt++ {
		patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, names, a.fieldManager)
		if err != nil || patch == nil {
			return nil, err
		}
		out, err := a.ri.Patch(ctx, live.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
		if err == nil {
			return out, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxPatchAttempts {
			return nil, err
		}
		if live, err = a.ri.Get(ctx, live.GetName(), metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
}

// warnf reports a warning of the apply (ApplyOptions.Warn).
func (a *applier) warnf(format string, args ...any) {
	if a.opts.Warn != nil {
		a.opts.Warn(fmt.Sprintf(format, args...))
	}
}

// describe names obj as kubectl's messages do: kind/name.
func describe(obj *unstructured.Unstructured) string {
	return strings.ToLower(obj.GetKind()) + "/" + obj.GetName()
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
	if _, ok := live.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; !ok {
		// kubectl apply's warning (warningNoLastAppliedConfigAnnotation)
		a.warnf("resource %s/%s is missing the %s annotation which is required by client-side apply (khook's, as kubectl apply's). "+
			"It should only be used on resources created declaratively by either kubectl create --save-config or a client-side apply. The missing annotation will be patched automatically.",
			res.Mapping.Resource.GroupResource(), o.GetName(), corev1.LastAppliedConfigAnnotation)
	}
	for attempt := 1; ; attempt++ {
		patchType, patch, err := ThreeWayPatch(live, modified)
		if err != nil {
			return res, err
		}
		if patch, err = leaveOut(patch, a.leave); err != nil {
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

// takesBack reports whether the applier's drift policy puts back what
// every manager of the conflicts wrote.
func (a *applier) takesBack(e *ConflictError) bool {
	if !a.sorted || len(e.Conflicts) == 0 {
		return false
	}
	for _, c := range e.Conflicts {
		if v := a.opts.Drift.Judge(Field{Owners: []Owner{{Manager: c.Manager}}}, a.fieldManager); v.Keep || len(v.By) == 0 {
			return false
		}
	}
	return true
}

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

// leaveOut takes the fields paths name out of a client-side apply's
// patch (a strategic merge patch, whose list entries carry their merge
// keys, or a JSON merge patch), so that the patch says nothing of them:
// what is left of a map or list entry once they are out is dropped when
// it holds nothing else (an entry nothing but its keys). "{}" when
// nothing is left.
func leaveOut(patch []byte, paths []fieldpath.Path) ([]byte, error) {
	if len(paths) == 0 {
		return patch, nil
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("read the patch: %w", err)
	}
	for _, p := range paths {
		if _, ok := LookupPathLenient(m, p); !ok {
			continue
		}
		SetPath(m, p, nil, false)
		for n := len(p) - 1; n > 0; n-- {
			parent := p[:n]
			v, ok := LookupPathLenient(m, parent)
			if l, isList := v.([]any); ok && isList && len(l) == 0 && p[n-1].FieldName != nil {
				// a list left empty, and its strategic merge order
				SetPath(m, parent, nil, false)
				if up, ok := LookupPathLenient(m, p[:n-1]); ok {
					if um, isMap := up.(map[string]any); isMap {
						delete(um, "$setElementOrder/"+*p[n-1].FieldName)
					}
				}
				continue
			}
			if !ok || !emptyButKeys(v, p[n-1]) {
				break
			}
			SetPath(m, parent, nil, false)
		}
	}
	return json.Marshal(m)
}

// emptyButKeys reports whether v, the value a path element pe names
// (a map field, or a list entry by its keys), holds nothing but pe's key
// fields.
func emptyButKeys(v any, pe fieldpath.PathElement) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k := range m {
		isKey := false
		if pe.Key != nil {
			for _, kf := range *pe.Key {
				isKey = isKey || kf.Name == k
			}
		}
		if !isKey {
			return false
		}
	}
	return true
}
