// Package patch is the patch: step: kubectl patch with a strategic merge
// (the default), JSON merge (RFC 7386) or JSON (RFC 6902) patch on one
// existing object.
package patch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"khook.io/core/diff"
	"khook.io/core/internal/english"
	"khook.io/core/objects"
	"khook.io/core/spec"
	"khook.io/core/step"
)

// maxDetails bounds the changed fields a plan lists.
const maxDetails = 10

// Executor runs patch: steps. It implements step.Executor, step.Planner
// and step.Differ.
type Executor struct{}

var _ step.Differ = (*Executor)(nil)

// New returns the patch: executor.
func New() *Executor { return &Executor{} }

// target is a resolved patch: its object, patch type and body.
type target struct {
	mapping      *meta.RESTMapping
	ri           dynamic.ResourceInterface
	fieldManager string
	name         string
	subject      string // "Deployment ns/web", "StorageClass gp3"
	patchType    types.PatchType
	typ          string // strategic, merge, json
	body         []byte
	named        []fieldPath // the fields the patch names
}

func resolve(ctx context.Context, req *step.Request) (*target, error) {
	p := spec.BlockOf[Patch](req.Step)
	if p == nil {
		return nil, fmt.Errorf("step %s is not a patch step", req.Step.Name)
	}
	ref, err := spec.ParseResource(p.Target)
	if err != nil {
		return nil, fmt.Errorf("patch.target %w", err)
	}
	if ref.Name == "" {
		return nil, fmt.Errorf("patch.target %q: want kind/name", p.Target)
	}
	om := req.Objects()
	m, err := om.MappingForType(ctx, ref.Type)
	if err != nil {
		return nil, fmt.Errorf("patch target %s: %w", p.Target, err)
	}
	ns := req.Namespace(p.Namespace)
	t := &target{mapping: m, name: ref.Name, typ: p.PatchType(), fieldManager: om.FieldManager(),
		subject: objects.RefFor(m, ns, ref.Name).Path(), ri: om.Client(m, ns)}
	switch t.typ {
	case Strategic:
		t.patchType = types.StrategicMergePatchType
	case Merge:
		t.patchType = types.MergePatchType
	case JSON:
		t.patchType = types.JSONPatchType
	default:
		return nil, fmt.Errorf("patch.type %q: want strategic, merge or json", t.typ)
	}
	if t.body, err = json.Marshal(p.Patch); err != nil {
		return nil, fmt.Errorf("patch body: %w", err)
	}
	if t.named, err = namedPaths(t.patchType, t.body); err != nil {
		return nil, err
	}
	return t, nil
}

// Run patches the target, which must exist.
func (e *Executor) Run(ctx context.Context, req *step.Request) (result step.Outcome, err error) {
	t, err := resolve(ctx, req)
	if err != nil {
		return step.Outcome{}, err
	}
	live, err := t.ri.Get(ctx, t.name, metav1.GetOptions{})
	if err != nil {
		return step.Outcome{}, t.explain(err)
	}
	out, err := t.ri.Patch(ctx, t.name, t.patchType, t.body, metav1.PatchOptions{FieldManager: t.fieldManager})
	if err != nil {
		return step.Outcome{}, t.explain(err)
	}
	diff.Learn(req.Redactor, out.Object, live.Object)
	// unchanged when the patch changed none of the fields it names: a
	// controller may write elsewhere between the read and the patch
	if out.GetResourceVersion() == live.GetResourceVersion() || !patchChanged(t.named, live, out) {
		return step.Outcome{Message: fmt.Sprintf("%s unchanged: the %s patch was already applied", t.subject, t.typ)}, nil
	}
	return step.Outcome{Message: fmt.Sprintf("%s patched (%s)", t.subject, t.typ), Changed: true}, nil
}

// Plan compares a server-side dry run of the patch with the live object:
// no-op, or patch with the changed fields as details; unknown when the
// target (or its type) does not exist yet.
func (e *Executor) Plan(ctx context.Context, req *step.Request) (result step.Prediction, err error) {
	t, live, dry, err := resolveAndDryRun(ctx, req)
	var un *step.UnavailableError
	if errors.As(err, &un) {
		return step.Prediction{Action: step.ActionUnknown, Reason: un.Reason}, nil
	}
	if err != nil {
		return step.Prediction{}, err
	}
	diff.Learn(req.Redactor, dry.Object, live.Object)
	// as Run decides: what a controller writes between the read and the
	// dry run (a rolling Deployment's status) is not the patch's doing
	changed := patchChanges(t.named, live, dry)
	if len(changed) == 0 {
		return step.Prediction{Action: step.ActionNoOp, Reason: t.subject + " already matches the patch"}, nil
	}
	if len(changed) > maxDetails {
		changed = append(changed[:maxDetails], fmt.Sprintf("and %d more", len(changed)-maxDetails))
	}
	return step.Prediction{Action: step.ActionPatch, Reason: fmt.Sprintf("%s: %s patch changes %s", t.subject, t.typ, english.CountNoun(len(changed), "field")), Details: changed}, nil
}

// resolveAndDryRun is what Plan and Diff share: the target, and a server
// dry run of the patch next to the live object. A target (or type) that
// does not exist yet is an *step.UnavailableError whose reason a plan
// reports as unknown.
func resolveAndDryRun(ctx context.Context, req *step.Request) (*target, *unstructured.Unstructured, *unstructured.Unstructured, error) {
	t, err := resolve(ctx, req)
	switch {
	case meta.IsNoMatchError(err):
		return nil, nil, nil, &step.UnavailableError{Reason: err.Error() + " (yet: a CRD an earlier step installs?)"}
	case err != nil:
		return nil, nil, nil, err
	}
	live, dry, err := t.dryRun(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return t, nil, nil, &step.UnavailableError{Reason: t.subject + " does not exist yet"}
	case err != nil:
		return t, nil, nil, t.explain(err)
	}
	return t, live, dry, nil
}

// dryRun reads the target and patches it with a server-side dry run. The
// dry run patches the object as it is then; it is compared with the same
// version of the object (a controller may write in between), so both are
// read again when the versions differ, a few times at most.
func (t *target) dryRun(ctx context.Context) (live, dry *unstructured.Unstructured, err error) {
	for attempt := 0; ; attempt++ {
		live, err = t.ri.Get(ctx, t.name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		dry, err = t.ri.Patch(ctx, t.name, t.patchType, t.body, metav1.PatchOptions{
			FieldManager: t.fieldManager,
			DryRun:       []string{metav1.DryRunAll},
		})
		if err != nil {
			return nil, nil, err
		}
		if dry.GetResourceVersion() == live.GetResourceVersion() || attempt == 4 {
			return live, dry, nil
		}
	}
}

// Diff is the patch as a server-side dry run against the live target;
// unavailable while the target (or its type) does not exist yet.
func (e *Executor) Diff(ctx context.Context, req *step.Request) (result step.Diff, err error) {
	t, live, dry, err := resolveAndDryRun(ctx, req)
	var un *step.UnavailableError
	if errors.As(err, &un) && t != nil {
		un.Reason += " (an earlier step may create it)"
	}
	if err != nil {
		return step.Diff{}, err
	}
	return step.Diff{Objects: []step.ObjectDiff{{Name: t.subject, Live: live, Merged: dry}}}, nil
}

// explain turns an API error into a line naming the target: a missing
// target, and a strategic patch a custom resource refuses (415), get a
// hint.
func (t *target) explain(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return step.WithCause(t.subject+" not found: a patch needs an existing target (order this step after the one creating it with needs:)", err)
	case apierrors.IsUnsupportedMediaType(err) && t.patchType == types.StrategicMergePatchType:
		return step.WithCause(t.subject+": a strategic merge patch is not supported for custom resources (the server answered 415 Unsupported Media Type): use type: merge (RFC 7386), or type: json for list surgery", err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return fmt.Errorf("%s: %s patch failed: %w", t.subject, t.typ, err)
	}
	return fmt.Errorf("%s: %w", t.subject, err)
}

// ignoredFields change on every write and say nothing about the patch.
var ignoredFields = [][]string{
	{"metadata", "resourceVersion"},
	{"metadata", "managedFields"},
	{"metadata", "generation"},
}

// ChangedFields lists the paths (.spec.replicas, .metadata.labels.app)
// where after differs from before, ignoring resourceVersion, managedFields
// and generation. Lists are compared whole.
func ChangedFields(before, after *unstructured.Unstructured) []string {
	var out []string
	for _, p := range changedPaths(before, after) {
		out = append(out, p.String())
	}
	sort.Strings(out)
	return out
}
