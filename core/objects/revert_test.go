package objects

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

func path(parts ...any) fieldpath.Path { return fieldpath.MakePathOrDie(parts...) }

// readPrevious reads live's record from its annotation, as loadPrevious
// does for an object whose annotations no controller copies.
func readPrevious(live *unstructured.Unstructured) (*previous, error) {
	return New(nil, Options{}).loadPrevious(context.Background(), live)
}

// The record round-trips through its annotation: sets as managedFields
// write them, values as an object of the object's shape (list entries
// with their keys).
func TestPreviousRecord(t *testing.T) {
	rec, err := readPrevious(yamlObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"))
	if err != nil || rec.exists {
		t.Fatalf("no annotation: %+v %v", rec, err)
	}
	image := path("spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "web"), "image")
	set := path("metadata", "finalizers", mustValue(t, "example.com/a"))
	for p, v := range map[*fieldpath.Path]any{&image: "nginx:1", &set: "example.com/a"} {
		if !setPath(rec.values, *p, v) {
			t.Fatalf("setPath %s", *p)
		}
		rec.known.Insert(*p)
	}
	rec.absent.Insert(path("data", "added"))
	rec.secret.Insert(path("data", "password"))
	s, err := rec.encode()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"known":{"f:metadata":{"f:finalizers":{"v:\"example.com/a\"":{}}},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:image":{}}}}}}},"values":{"metadata":{"finalizers":["example.com/a"]},"spec":{"template":{"spec":{"containers":[{"image":"nginx:1","name":"web"}]}}}},"absent":{"f:data":{"f:added":{}}},"secret":{"f:data":{"f:password":{}}}}`
	if s != want {
		t.Errorf("record:\n%s\nwant:\n%s", s, want)
	}
	live := yamlObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	live.SetAnnotations(map[string]string{AnnotationPrevious: s})
	back, err := readPrevious(live)
	if err != nil || !back.exists {
		t.Fatal(err)
	}
	if !back.known.Has(image) || !back.known.Has(set) || !back.absent.Has(path("data", "added")) || !back.covers(path("data", "password")) || back.covers(path("data", "other")) {
		t.Errorf("read back: known %s absent %s secret %s", back.known, back.absent, back.secret)
	}
	if v, ok := LookupPath(back.values, image); !ok || v != "nginx:1" {
		t.Errorf("value of %s: %v %v", image, v, ok)
	}
	live.SetAnnotations(map[string]string{AnnotationPrevious: "{not json"})
	if _, err := readPrevious(live); err == nil || !strings.Contains(err.Error(), AnnotationPrevious) {
		t.Errorf("a broken record: %v", err)
	}
}

func mustValue(t *testing.T, s string) fieldpath.PathElement {
	t.Helper()
	pe, err := fieldpath.DeserializePathElement(`v:"` + s + `"`)
	if err != nil {
		t.Fatal(err)
	}
	return pe
}

// decide: who owns the field now and what the record says decide its
// fate, in this order: changed or removed since khook (another writer's),
// the value before khook, shared with another manager, then the record.
func TestDecide(t *testing.T) {
	m := &Manager{fieldManager: "khook"}
	p := path("data", "k")
	khook := Owner{Manager: "khook", Operation: metav1.ManagedFieldsOperationUpdate}
	other := Owner{Manager: "kubectl-patch", Operation: metav1.ManagedFieldsOperationUpdate}
	scale := Owner{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "scale"}
	recorder := Owner{Manager: "khook-previous", Operation: metav1.ManagedFieldsOperationUpdate}
	known := func(v any) *previous {
		r := &previous{known: fieldpath.NewSet(p), absent: fieldpath.NewSet(), secret: fieldpath.NewSet(), large: fieldpath.NewSet(), values: map[string]any{}, exists: true}
		setPath(r.values, p, v)
		return r
	}
	empty := &previous{known: fieldpath.NewSet(), absent: fieldpath.NewSet(), secret: fieldpath.NewSet(), large: fieldpath.NewSet(), values: map[string]any{}}
	absent := &previous{known: fieldpath.NewSet(), absent: fieldpath.NewSet(p), secret: fieldpath.NewSet(), large: fieldpath.NewSet(), values: map[string]any{}, exists: true}
	secret := &previous{known: fieldpath.NewSet(), absent: fieldpath.NewSet(), secret: fieldpath.NewSet(p), large: fieldpath.NewSet(), values: map[string]any{}, exists: true}
	large := &previous{known: fieldpath.NewSet(), absent: fieldpath.NewSet(), secret: fieldpath.NewSet(), large: fieldpath.NewSet(p), values: map[string]any{}, exists: true}
	field := func(intent, live any, inLive bool, owners ...Owner) Field {
		return Field{Path: p, Intent: intent, Live: live, InLive: inLive, Equal: jsonEqual(intent, inLive, live), Owners: owners}
	}
	for _, c := range []struct {
		name    string
		f       Field
		rec     *previous
		secret  bool
		outcome FieldOutcome
		value   any
		reason  string
	}{
		{"removed since", field("v", nil, false, other), known("old"), false, FieldStay, nil, "removed since khook by kubectl-patch"},
		{"changed since", field("v", "theirs", true, other), known("old"), false, FieldStay, nil, "changed since khook by kubectl-patch"},
		{"scaled", field(int64(3), int64(5), true, scale), empty, false, FieldStay, nil, "changed since khook by kubectl, through the scale subresource"},
		{"normalised by the server", field("1000m", "1", true, khook), absent, false, FieldRemove, nil, "khook added it"},
		{"changed, nobody owns it", field("v", "x", true), absent, false, FieldStay, nil, "changed since khook"},
		{"the value before khook", field("v", "v", true, khook), known("v"), false, FieldSame, nil, "it held this value before khook"},
		{"shared", field("v", "v", true, khook, other), known("old"), false, FieldStay, nil, "shared with kubectl-patch"},
		{"written since", field("v", "v", true, other), absent, false, FieldStay, nil, "written since khook by kubectl-patch"},
		{"not changed by khook", field("v", "v", true, other), empty, false, FieldSame, nil, "khook's write did not change it"},
		{"restore", field("v", "v", true, khook, recorder), known("old"), false, FieldRestore, "old", "khook overwrote it"},
		{"added", field("v", "v", true, khook), absent, false, FieldRemove, nil, "khook added it"},
		{"a Secret's", field("v", "v", true, khook), secret, true, FieldLost, nil, "cannot be given back: khook never records a Secret's values"},
		{"held a secret", field("v", "v", true, khook), secret, false, FieldLost, nil, "cannot be given back: its value before khook held a secret, which khook never records"},
		{"too large", field("v", "v", true, khook), large, false, FieldLost, nil, "cannot be given back: its value before khook was too large to record"},
		{"no record", field("v", "v", true, khook), empty, false, FieldRemove, nil, "khook wrote it, and what it held before is unknown (no record of it)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			secretPath := c.secret
			f := c.f
			if secretPath {
				f.Path = path("data", "k") // a Secret's data
			}
			got := m.decide(f, c.rec, secretPath)
			if got.outcome != c.outcome || !reflect.DeepEqual(got.value, c.value) || got.reason != c.reason {
				t.Errorf("got %s %v %q, want %s %v %q", got.outcome, got.value, got.reason, c.outcome, c.value, c.reason)
			}
			if got.unknown != (c.name == "no record") {
				t.Errorf("unknown = %v", got.unknown)
			}
		})
	}
}

const revertLive = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team
  resourceVersion: "42"
  labels: {team: a, khook: added}
  annotations: {khook.io/previous: "{}"}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:2
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
        ports: [{containerPort: 80, protocol: TCP}, {containerPort: 8080, protocol: TCP}]
`

// The fates become one strategic merge patch from the live object to the
// object destroy leaves: values back, fields and whole list entries
// removed (an entry goes whole only when every field of it khook wrote
// goes; a map a removal leaves empty goes too), carrying the
// resourceVersion it was planned from.
func TestRevertPatch(t *testing.T) {
	live := yamlObj(t, revertLive)
	containers := func(rest ...any) fieldpath.Path {
		return path(append([]any{"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "web")}, rest...)...)
	}
	port := fieldpath.KeyByFields("containerPort", 8080, "protocol", "TCP")
	fates := []fate{
		{path: path("spec", "replicas"), outcome: FieldRestore, value: int64(2)},
		{path: containers("image"), outcome: FieldRestore, value: "nginx:1"},
		{path: containers("env", fieldpath.KeyByFields("name", "B"), "name"), outcome: FieldRemove, key: true},
		{path: containers("env", fieldpath.KeyByFields("name", "B"), "value"), outcome: FieldRemove},
		{path: containers("env", fieldpath.KeyByFields("name", "A"), "name"), outcome: FieldRemove, key: true},
		{path: containers("env", fieldpath.KeyByFields("name", "A"), "value"), outcome: FieldStay},
		{path: containers("ports", port, "containerPort"), outcome: FieldRemove, key: true},
		{path: path("metadata", "labels", "khook"), outcome: FieldRemove},
		{path: path("metadata", "annotations", AnnotationPrevious), outcome: FieldRemove},
		{path: path("spec", "selector"), outcome: FieldSame},
	}
	resolveEntries(fates)
	if fates[4].outcome != FieldSame {
		t.Errorf("env A has a field that stays: its key field is %s, want same", fates[4].outcome)
	}
	desired, err := applyFates(live, fates)
	if err != nil {
		t.Fatal(err)
	}
	pt, patch, err := twoWayPatch(live, desired)
	if err != nil {
		t.Fatal(err)
	}
	if pt != types.StrategicMergePatchType {
		t.Errorf("patch type %s", pt)
	}
	var got map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		// the annotations khook's record was the only one of: the map goes
		"metadata": map[string]any{"resourceVersion": "42", "labels": map[string]any{"khook": nil}, "annotations": nil},
		"spec": map[string]any{"replicas": float64(2), "template": map[string]any{"spec": map[string]any{
			"$setElementOrder/containers": []any{map[string]any{"name": "web"}},
			"containers": []any{map[string]any{
				"name": "web", "image": "nginx:1",
				"$setElementOrder/env":   []any{map[string]any{"name": "A"}},
				"env":                    []any{map[string]any{"$patch": "delete", "name": "B"}},
				"$setElementOrder/ports": []any{map[string]any{"containerPort": float64(80)}},
				"ports":                  []any{map[string]any{"$patch": "delete", "containerPort": float64(8080)}},
			}},
		}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("patch:\n%s\nwant:\n%v", patch, want)
	}
	shown := exportFates(live, fates)
	var lines []string
	for _, f := range shown {
		lines = append(lines, f.Path+" "+string(f.Outcome)+" "+f.Value)
	}
	wantLines := []string{
		".metadata.annotations.khook.io/previous remove ",
		".metadata.labels.khook remove ",
		".spec.replicas restore 2",
		".spec.selector same ",
		`.spec.template.spec.containers[name="web"].env[name="A"].value stay `,
		`.spec.template.spec.containers[name="web"].env[name="B"] remove `,
		`.spec.template.spec.containers[name="web"].image restore "nginx:1"`,
		`.spec.template.spec.containers[name="web"].ports[containerPort=8080,protocol="TCP"] remove `,
	}
	if !reflect.DeepEqual(lines, wantLines) {
		t.Errorf("shown:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
	// nothing to change: no patch
	if _, patch, err := twoWayPatch(live, live.DeepCopy()); err != nil || patch != nil {
		t.Errorf("no change: %s %v", patch, err)
	}
	// a custom resource: a JSON merge patch
	cr := yamlObj(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, resourceVersion: \"7\"}\nspec: {size: 3, list: [a, b]}\n")
	d := cr.DeepCopy()
	deletePath(d.Object, path("spec", "size"))
	if pt, patch, err := twoWayPatch(cr, d); err != nil || pt != types.MergePatchType || string(patch) != `{"metadata":{"resourceVersion":"7"},"spec":{"size":null}}` {
		t.Errorf("custom resource: %s %s %v", pt, patch, err)
	}
}

// A refusal from the server turns the removals it names, of fields whose
// earlier values khook does not know, into fields that stay (as khook
// wrote them), and nothing else; only client errors are refusals.
func TestKeepRefused(t *testing.T) {
	containers := path("spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "web"))
	fates := []fate{
		{path: append(containers.Copy(), fieldpath.PathElement{FieldName: strPtr("name")}), outcome: FieldRemove, unknown: true, key: true},
		{path: append(containers.Copy(), fieldpath.PathElement{FieldName: strPtr("image")}), outcome: FieldRemove, unknown: true},
		{path: path("spec", "selector"), outcome: FieldRemove, unknown: true},
		{path: path("spec", "replicas"), outcome: FieldRemove, unknown: true},
		{path: path("metadata", "labels", "x"), outcome: FieldRemove}, // khook added it: not turned
	}
	resolveEntries(fates)
	if fates[0].outcome != FieldRemove {
		t.Fatal("every field of the entry goes: the entry goes")
	}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", field.ErrorList{
		field.Required(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"), ""),
		field.Invalid(field.NewPath("spec", "selector"), "{}", "empty selector is invalid for deployment"),
		field.Invalid(field.NewPath("metadata", "labels"), "x", "not named by a removal"),
	})
	if !rejection(invalid) || rejection(apierrors.NewConflict(schema.GroupResource{}, "web", errors.New("x"))) || rejection(errors.New("connection refused")) {
		t.Error("rejection: only client errors other than conflicts")
	}
	if !keepRefused(fates, invalid) {
		t.Fatal("nothing turned")
	}
	got := map[string]FieldOutcome{}
	for _, f := range fates {
		got[f.path.String()] = f.outcome
	}
	want := map[string]FieldOutcome{
		`.spec.template.spec.containers[name="web"].name`:  FieldSame, // the entry stays: its image does
		`.spec.template.spec.containers[name="web"].image`: FieldLost,
		".spec.selector":     FieldLost,
		".spec.replicas":     FieldRemove,
		".metadata.labels.x": FieldRemove,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the refusal: %v, want %v", got, want)
	}
	if !strings.Contains(fates[2].reason, "spec.selector: Invalid value") {
		t.Errorf("reason %q does not quote the server", fates[2].reason)
	}
	if keepRefused(fates, invalid) {
		t.Error("a second refusal naming the same fields turned something again")
	}
	if got := causePath("spec.template.spec.containers[0].env[2].value"); got != "spec.template.spec.containers.env.value" {
		t.Errorf("causePath %q", got)
	}
}

func strPtr(s string) *string { return &s }

// managed builds a managedFields entry owning fieldsV1.
func managed(manager string, op metav1.ManagedFieldsOperationType, subresource, fieldsV1 string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fieldsV1)}}
}

// lastAppliedKhooks: the annotation holds khook's configuration when
// only server-side appliers of it own it (kubectl-last-applied, or
// khook's manager) and it holds the manifest's configuration, or nothing
// but khook's apply can have written it (no apply of the manager kubectl,
// for which the API server rewrites it, keeping its owner).
func TestLastAppliedKhooks(t *testing.T) {
	const (
		conf      = `{"apiVersion":"v1","data":{"k":"khook"},"kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`
		reordered = "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"namespace\":\"ns\",\"name\":\"x\"},\"data\":{\"k\":\"khook\"}}\n"
		theirs    = `{"apiVersion":"v1","data":{"k":"theirs"},"kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`
		annField  = `{"f:metadata":{"f:annotations":{"f:kubectl.kubernetes.io/last-applied-configuration":{}}}}`
		dataField = `{"f:data":{"f:k":{}}}`
	)
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	keeper := managed(LastAppliedManager, apply, "", annField)
	khookSSA := managed("khook", apply, "", dataField)
	for _, c := range []struct {
		name, manager, ann string
		entries            []metav1.ManagedFieldsEntry
		want               bool
	}{
		{"khook's configuration, kept", "khook", reordered, []metav1.ManagedFieldsEntry{keeper, khookSSA}, true},
		{"an earlier manifest of khook's, nobody else's apply", "khook", theirs, []metav1.ManagedFieldsEntry{keeper, khookSSA}, true},
		{"kubectl's server-side apply since", "khook", theirs, []metav1.ManagedFieldsEntry{keeper, khookSSA, managed("kubectl", apply, "", dataField)}, false},
		{"khook's configuration despite kubectl's apply", "khook", conf, []metav1.ManagedFieldsEntry{keeper, khookSSA, managed("kubectl", apply, "", dataField)}, true},
		{"a client-side apply's", "khook", conf, []metav1.ManagedFieldsEntry{managed("kubectl-client-side-apply", update, "", annField), khookSSA}, false},
		{"another server-side applier shares it", "khook", conf, []metav1.ManagedFieldsEntry{keeper, managed("tool", apply, "", annField), khookSSA}, false},
		{"khook as kubectl: only the content tells", "kubectl", theirs, []metav1.ManagedFieldsEntry{keeper, managed("kubectl", apply, "", dataField)}, false},
		{"khook as kubectl, its configuration", "kubectl", conf, []metav1.ManagedFieldsEntry{keeper, managed("kubectl", apply, "", dataField)}, true},
		{"khook applies nothing server-side", "khook", theirs, []metav1.ManagedFieldsEntry{keeper}, false},
		{"nobody owns it", "khook", conf, []metav1.ManagedFieldsEntry{khookSSA}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			live := yamlObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: ns}\n")
			live.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": c.ann})
			live.SetManagedFields(c.entries)
			m := &Manager{fieldManager: c.manager}
			if got := m.lastAppliedKhooks(live, conf); got != c.want {
				t.Errorf("lastAppliedKhooks = %v, want %v", got, c.want)
			}
		})
	}
	if (&Manager{fieldManager: "khook"}).lastAppliedKhooks(yamlObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), conf) {
		t.Error("an object without the annotation")
	}
}

// The record's field manager stays within the API server's 128 bytes,
// cut at a character.
func TestRecordManager(t *testing.T) {
	for _, c := range []struct{ manager, want string }{
		{"khook", "khook-previous"},
		{strings.Repeat("m", 119), strings.Repeat("m", 119) + "-previous"},
		{strings.Repeat("m", 128), strings.Repeat("m", 119) + "-previous"},
		{strings.Repeat("m", 118) + "é", strings.Repeat("m", 118) + "-previous"}, // é is 2 bytes: not cut in half
	} {
		if got := (&Manager{fieldManager: c.manager}).recordManager(); got != c.want || len(got) > 128 {
			t.Errorf("recordManager(%q) = %q, want %q", c.manager, got, c.want)
		}
	}
}

// Only the API server's client errors, but a timeout, are refused
// writes.
func TestRefused(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewConflict(gr, "x", errors.New("conflict")), true},
		{&ConflictError{Conflicts: []Conflict{{Field: ".data.a", Manager: "kubectl"}}, Err: apierrors.NewConflict(gr, "x", errors.New("conflict"))}, true},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x", nil), true},
		{apierrors.NewBadRequest("strict decoding error"), true},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), true},
		{apierrors.NewTimeoutError("slow", 1), false},
		{apierrors.NewInternalError(errors.New("etcd")), false},
		{errors.New("connection reset"), false},
	} {
		if got := refused(c.err); got != c.want {
			t.Errorf("refused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A revert is sent again at once when only what the object's controllers
// keep changed under it (status, the control plane's own metadata); any
// other change, or one of who owns what, makes the plan stale.
func TestUnchangedSince(t *testing.T) {
	a := yamlObj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, uid: u1, resourceVersion: \"1\"}\nspec: {replicas: 2}\nstatus: {replicas: 1}\n")
	a.SetManagedFields([]metav1.ManagedFieldsEntry{managed("khook", metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:replicas":{}}}`)})
	b := a.DeepCopy()
	b.SetResourceVersion("2")
	b.Object["status"] = map[string]any{"replicas": int64(2)}
	b.SetManagedFields(append(b.GetManagedFields(), managed("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", `{"f:status":{"f:replicas":{}}}`)))
	if !unchangedSince(a, b, true) {
		t.Error("a status update: a change")
	}
	c := b.DeepCopy()
	c.SetAnnotations(map[string]string{"deployment.kubernetes.io/revision": "2"})
	c.SetFinalizers([]string{"kubernetes.io/pvc-protection"})
	c.SetManagedFields(append(c.GetManagedFields(), managed("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:annotations":{".":{},"f:deployment.kubernetes.io/revision":{}}}}`)))
	if !unchangedSince(a, c, true) {
		t.Error("the controller's revision annotation: a change")
	}
	d := b.DeepCopy()
	d.Object["spec"] = map[string]any{"replicas": int64(5)}
	if unchangedSince(a, d, true) || unchangedSince(a, d, false) {
		t.Error("a scale: no change")
	}
	e := b.DeepCopy()
	e.SetLabels(map[string]string{"team": "b"})
	if unchangedSince(a, e, false) {
		t.Error("kubectl label: no change")
	}
	f := b.DeepCopy()
	f.SetManagedFields(append(f.GetManagedFields(), managed("kubectl", metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:replicas":{}}}`)))
	if unchangedSince(a, f, true) || !unchangedSince(a, f, false) {
		t.Error("another owner of a field: a change of ownership only")
	}
	g := a.DeepCopy()
	g.SetUID("u2")
	if unchangedSince(a, g, false) {
		t.Error("another object of the name: the same")
	}
}
