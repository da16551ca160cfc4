//go:build integration

package objects_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/kube"
	"khook.io/core/objects"
	"khook.io/core/redact"
)

var deployMapping = &meta.RESTMapping{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Scope: meta.RESTScopeNamespace}

// theirDeployment is a Deployment another team applied with kubectl
// (client-side apply, as field manager kubectl-client-side-apply).
const theirDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, labels: {team: a}}
spec:
  replicas: 2
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - name: web
        image: nginx:1.0
        env: [{name: A, value: "1"}, {name: THEIRS, value: "only in their manifest"}]
`

// khookDeployment is the full manifest khook applies over it: another
// image and replica count, a label, an env var and a container port
// added, their env var THEIRS left out.
const khookDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, labels: {team: a, khook: added}}
spec:
  replicas: 3
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s, tier: front}}
    spec:
      containers:
      - name: web
        image: nginx:2.0
        ports: [{containerPort: 8080}]
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
`

// fieldsOf is the plan's fields of an item, path: outcome value.
func fieldsOf(it objects.UndoItem) map[string]string {
	out := map[string]string{}
	for _, f := range it.Fields {
		v := string(f.Outcome)
		if f.Value != "" {
			v += " " + f.Value
		}
		out[f.Path] = v
	}
	return out
}

// Destroy gives back exactly what khook took, client-side and
// server-side: a pre-existing Deployment khook configured with a full
// manifest gets back its spec, labels and last-applied annotation as they
// were before khook (a valid object); a ConfigMap key another writer
// patched after khook, and replicas scaled after khook through the scale
// subresource, survive; keys, labels, env vars and ports khook added and
// nobody touched are removed; the plan (with the server's dry run) says
// each of these before anything changes; nothing of the objects is
// khook's afterwards.
func TestRevertGivesBackWhatKhookTook(t *testing.T) {
	c, ns := setup(t, "objects-revert")
	team := objects.New(c, objects.Options{FieldManager: "kubectl-client-side-apply"})
	khook := objects.New(c, objects.Options{CreatedBy: "boot"})
	deploys, cms := c.Resource(deployMapping, ns), c.Resource(cmMapping, ns)
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			web, scaled, settings := fmt.Sprintf("web-%v", serverSide), fmt.Sprintf("scaled-%v", serverSide), fmt.Sprintf("settings-%v", serverSide)
			theirCM := obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: {team: a}}\ndata: {owner: theirs, k: before}\n", settings))
			for _, o := range []*unstructured.Unstructured{obj(t, fmt.Sprintf(theirDeployment, web)), obj(t, fmt.Sprintf(theirDeployment, scaled)), theirCM} {
				if _, err := team.Apply(ctx(t), o, ns, objects.ApplyOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			before, err := deploys.Get(ctx(t), web, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mine := []*unstructured.Unstructured{
				obj(t, fmt.Sprintf(khookDeployment, web)),
				obj(t, fmt.Sprintf(khookDeployment, scaled)),
				obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: {khook: added}}\ndata: {k: khook-value, added: by-khook}\n", settings)),
			}
			for _, o := range mine {
				if _, err := khook.Apply(ctx(t), o, ns, objects.ApplyOptions{ServerSide: serverSide}); err != nil {
					t.Fatalf("khook's apply of %s: %v", o.GetName(), err)
				}
			}
			configured, err := deploys.Get(ctx(t), web, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if img, _, _ := unstructured.NestedSlice(configured.Object, "spec", "template", "spec", "containers"); fmt.Sprint(img) == fmt.Sprint(before.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"]) {
				t.Fatal("khook's apply did not change the Deployment's containers")
			}
			// the record is kept beside a Deployment: the deployment
			// controller copies its annotations onto its ReplicaSets
			noRecordOn(t, c, ns, configured)
			if n := companions(t, c, ns); n != 2 {
				t.Errorf("%d companions of khook's record in %s, want 2 (the Deployments')", n, ns)
			}
			// other writers, after khook
			if _, err := cms.Patch(ctx(t), settings, types.MergePatchType, []byte(`{"data":{"k":"theirs-patch"}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
				t.Fatal(err)
			}
			if _, err := deploys.Patch(ctx(t), scaled, types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{FieldManager: "kubectl-scale"}, "scale"); err != nil {
				t.Fatal(err)
			}

			items, err := khook.PlanUndo(ctx(t), mine, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			plan := map[string]objects.UndoItem{}
			for _, it := range items {
				if it.Action != objects.UndoRevert || !strings.HasPrefix(it.Reason, "it existed before khook") {
					t.Errorf("%s: %s (%s), want revert: it existed before khook", it.Ref, it.Action, it.Reason)
				}
				plan[strings.SplitN(it.Ref, " ", 2)[0]] = it
			}
			webFields := fieldsOf(plan["Deployment/"+web])
			for path, want := range map[string]string{
				".spec.replicas": "restore 2",
				`.spec.template.spec.containers[name="web"].image`:                                    `restore "nginx:1.0"`,
				`.spec.template.spec.containers[name="web"].env[name="B"]`:                            "remove",
				`.spec.template.spec.containers[name="web"].env[name="THEIRS"].value`:                 `restore "only in their manifest"`,
				`.spec.template.spec.containers[name="web"].ports[containerPort=8080,protocol="TCP"]`: "remove",
				".spec.template.metadata.labels.tier":                                                 "remove",
				".metadata.labels.khook":                                                              "remove",
				"khook's record":                                                                      "remove",
			} {
				if webFields[path] != want {
					t.Errorf("plan of %s: %s is %q, want %q\n%v", web, path, webFields[path], want, webFields)
				}
			}
			if got := fieldsOf(plan["Deployment/"+scaled])[".spec.replicas"]; got != "stay" {
				t.Errorf("plan of %s: replicas %q, want stay (kubectl-scale's)", scaled, got)
			}
			cmFields := fieldsOf(plan["ConfigMap/"+settings])
			if cmFields[".data.k"] != "stay" || cmFields[".data.added"] != "remove" || cmFields[".metadata.labels.khook"] != "remove" {
				t.Errorf("plan of %s: %v, want k to stay, added and the label removed", settings, cmFields)
			}

			sum, err := khook.Undo(ctx(t), mine, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			if len(sum.Reverted) != 3 {
				t.Errorf("summary %q, want 3 reverted", sum.Message())
			}
			after, err := deploys.Get(ctx(t), web, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after.Object["spec"], before.Object["spec"]) {
				t.Errorf("%s's spec after destroy:\n%v\nwant it as before khook:\n%v", web, after.Object["spec"], before.Object["spec"])
			}
			// the Deployment controller's revision annotation counts rollouts
			for _, d := range []*unstructured.Unstructured{before, after} {
				unstructured.RemoveNestedField(d.Object, "metadata", "annotations", "deployment.kubernetes.io/revision")
			}
			if !reflect.DeepEqual(after.GetLabels(), before.GetLabels()) || !reflect.DeepEqual(after.GetAnnotations(), before.GetAnnotations()) {
				t.Errorf("%s's labels and annotations after destroy: %v %v, want %v %v", web, after.GetLabels(), after.GetAnnotations(), before.GetLabels(), before.GetAnnotations())
			}
			for _, name := range []string{web, scaled} {
				d, err := deploys.Get(ctx(t), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range d.GetManagedFields() {
					if f.Manager == "khook" || f.Manager == "khook-previous" {
						t.Errorf("%s: khook still owns fields after destroy: %s %s", name, f.Manager, f.Operation)
					}
				}
			}
			noRecordOn(t, c, ns, after)
			if n := companions(t, c, ns); n != 0 {
				t.Errorf("%d companions of khook's record left after destroy", n)
			}
			s, err := deploys.Get(ctx(t), scaled, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas"); r != 5 {
				t.Errorf("%s: %d replicas after destroy, want kubectl scale's 5", scaled, r)
			}
			cm, err := cms.Get(ctx(t), settings, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
			if !reflect.DeepEqual(data, map[string]string{"owner": "theirs", "k": "theirs-patch"}) {
				t.Errorf("%s data %v, want the owner's key and the other writer's value of k", settings, data)
			}
			if l := cm.GetLabels(); !reflect.DeepEqual(l, map[string]string{"team": "a"}) {
				t.Errorf("%s labels %v, want only the owner's", settings, l)
			}
			// nothing is khook's any more
			items, err = khook.PlanUndo(ctx(t), mine, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				if it.Action != objects.UndoLeave {
					t.Errorf("after destroy %s is %s (%s), want leave", it.Ref, it.Action, it.Reason)
				}
			}
		})
	}
}

// noRecordOn fails the test when deployment, or a ReplicaSet of it (on
// the server), carries khook's record.
func noRecordOn(t *testing.T, c *kube.Clients, ns string, deployment *unstructured.Unstructured) {
	t.Helper()
	if _, ok := deployment.GetAnnotations()[objects.AnnotationPrevious]; ok {
		t.Errorf("Deployment %s carries khook's record", deployment.GetName())
	}
	rss, err := c.Typed.AppsV1().ReplicaSets(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rs := range rss.Items {
		if !metav1.IsControlledBy(&rs, deployment) {
			continue
		}
		n++
		if v, ok := rs.Annotations[objects.AnnotationPrevious]; ok {
			t.Errorf("ReplicaSet %s of Deployment %s carries khook's record: %s", rs.Name, deployment.GetName(), v)
		}
	}
	if n == 0 {
		t.Errorf("Deployment %s has no ReplicaSet to look at", deployment.GetName())
	}
}

// companions counts the companions of khook's record in ns.
func companions(t *testing.T, c *kube.Clients, ns string) int {
	t.Helper()
	list, err := c.Typed.CoreV1().Secrets(ns).List(ctx(t), metav1.ListOptions{FieldSelector: "type=" + string(objects.CompanionType)})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// A revert the server rejects (khook made a ConfigMap immutable: giving
// back its fields changes an immutable ConfigMap) is planned as rejected,
// with the server's reason, and does not stop the rest: the other
// configured object is reverted, the created one deleted, and the undo
// fails naming the rejected one, which is left as it is.
func TestRevertRejectedDoesNotStopTheRest(t *testing.T) {
	c, ns := setup(t, "objects-rejected")
	cms := c.Resource(cmMapping, ns)
	khook := objects.New(c, objects.Options{CreatedBy: "boot"})
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			frozen, plain, created := fmt.Sprintf("frozen-%v", serverSide), fmt.Sprintf("plain-%v", serverSide), fmt.Sprintf("created-%v", serverSide)
			for _, name := range []string{frozen, plain} {
				if _, err := cms.Create(ctx(t), obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: theirs}\n", name)), metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
					t.Fatal(err)
				}
			}
			mine := []*unstructured.Unstructured{
				obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {b: khook}\nimmutable: true\n", frozen)),
				obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {b: khook}\n", plain)),
				configMap(t, created, "1"),
			}
			for _, o := range mine {
				if _, err := khook.Apply(ctx(t), o, ns, objects.ApplyOptions{ServerSide: serverSide}); err != nil {
					t.Fatal(err)
				}
			}
			items, err := khook.PlanUndo(ctx(t), mine, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, it := range items {
				got[strings.SplitN(it.Ref, " ", 2)[0]] = string(it.Action)
				if it.Action == objects.UndoRejected && (!strings.Contains(it.Reason, "the server rejects giving back khook's fields (dry run)") || !strings.Contains(it.Reason, "immutable")) {
					t.Errorf("rejected %s: reason %q, want the server's", it.Ref, it.Reason)
				}
			}
			want := map[string]string{"ConfigMap/" + frozen: "rejected", "ConfigMap/" + plain: "revert", "ConfigMap/" + created: "delete"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("plan %v, want %v", got, want)
			}
			sum, err := khook.Undo(ctx(t), mine, objects.UndoOptions{Namespace: ns})
			if err == nil || !strings.Contains(err.Error(), "could not undo 1 of 3 objects: ConfigMap/"+frozen) || !strings.Contains(err.Error(), "immutable") {
				t.Fatalf("undo: %v, want it to fail naming %s and why", err, frozen)
			}
			if len(sum.Deleted) != 1 || len(sum.Reverted) != 1 {
				t.Errorf("summary %q, want the others undone", sum.Message())
			}
			if _, err := cms.Get(ctx(t), created, metav1.GetOptions{}); err == nil {
				t.Errorf("%s survived the undo", created)
			}
			for name, want := range map[string]map[string]string{plain: {"a": "theirs"}, frozen: {"a": "theirs", "b": "khook"}} {
				cm, err := cms.Get(ctx(t), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if data, _, _ := unstructured.NestedStringMap(cm.Object, "data"); !reflect.DeepEqual(data, want) {
					t.Errorf("%s data %v, want %v", name, data, want)
				}
			}
		})
	}
}

// Objects an earlier khook configured, before it kept a record of the
// values it overwrote: the plan says what is known (no created-by mark;
// khook's field manager is not the only writer). Client-side (the issue's
// case: destroy failed with an empty selector): fields khook alone wrote
// are removed, except those the server refuses the object without, which
// stay as khook wrote them and say so. Server-side (over a Deployment
// kubectl created, its values left as they were, as force: false
// requires): what khook added goes, what it shares with kubectl-create
// stays. The Deployment stays valid.
func TestRevertWithoutRecord(t *testing.T) {
	c, ns := setup(t, "objects-norecord")
	deploys := c.Resource(deployMapping, ns)
	team := objects.New(c, objects.Options{FieldManager: "kubectl-client-side-apply"})
	earlier := objects.New(c, objects.Options{}) // a khook that kept no record
	khook := objects.New(c, objects.Options{CreatedBy: "boot"})
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			name := fmt.Sprintf("legacy-%v", serverSide)
			mine := obj(t, fmt.Sprintf(khookDeployment, name))
			if !serverSide {
				if _, err := team.Apply(ctx(t), obj(t, fmt.Sprintf(theirDeployment, name)), ns, objects.ApplyOptions{}); err != nil {
					t.Fatal(err)
				}
			} else {
				// kubectl create: what khook's manifest sets with another
				// value would conflict, so it agrees on those
				theirs := obj(t, fmt.Sprintf(theirDeployment, name))
				unstructured.SetNestedField(theirs.Object, int64(3), "spec", "replicas")
				unstructured.SetNestedSlice(theirs.Object, []any{map[string]any{"name": "web", "image": "nginx:2.0"}}, "spec", "template", "spec", "containers")
				if _, err := deploys.Create(ctx(t), theirs, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
					t.Fatal(err)
				}
				unstructured.RemoveNestedField(mine.Object, "spec", "template", "metadata", "labels", "tier")
			}
			if _, err := earlier.Apply(ctx(t), mine, ns, objects.ApplyOptions{ServerSide: serverSide}); err != nil {
				t.Fatal(err)
			}
			items, err := khook.PlanUndo(ctx(t), []*unstructured.Unstructured{mine}, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			it := items[0]
			if it.Action != objects.UndoRevert || !strings.HasPrefix(it.Reason, "no created-by mark; khook's field manager is not the only writer") {
				t.Fatalf("%s: %s (%s), want revert saying what is known", it.Ref, it.Action, it.Reason)
			}
			fields := fieldsOf(it)
			image := `.spec.template.spec.containers[name="web"].image`
			if serverSide {
				if fields[image] != "stay" || fields[`.spec.template.spec.containers[name="web"].env[name="B"]`] != "remove" {
					t.Errorf("image %q, want stay (shared with kubectl-create); env B %q, want remove\n%v", fields[image], fields[`.spec.template.spec.containers[name="web"].env[name="B"]`], fields)
				}
			} else if fields[image] != "lost" {
				t.Errorf("image: %q, want lost (the server needs one)\n%v", fields[image], fields)
			}
			for _, f := range it.Fields {
				if f.Path == image && !serverSide && !strings.Contains(f.Reason, "the server refuses the object without it") {
					t.Errorf("image: reason %q", f.Reason)
				}
			}
			if fields[".metadata.labels.khook"] != "remove" {
				t.Errorf("khook's label: %q, want remove\n%v", fields[".metadata.labels.khook"], fields)
			}
			if _, err := khook.Undo(ctx(t), []*unstructured.Unstructured{mine}, objects.UndoOptions{Namespace: ns}); err != nil {
				t.Fatalf("undo: %v", err)
			}
			d, err := deploys.Get(ctx(t), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			if sel["app"] != name || len(containers) != 1 || d.GetLabels()["khook"] != "" {
				t.Errorf("after destroy: selector %v, containers %v, labels %v; want a valid Deployment without khook's label", sel, containers, d.GetLabels())
			}
		})
	}
}

// A Namespace khook configured but did not create loses khook's label,
// annotation and bookkeeping like any configured object (it is never
// deleted); one the spec created is kept as it is.
func TestUndoConfiguredNamespace(t *testing.T) {
	c, _ := setup(t, "objects-ns")
	khook := objects.New(c, objects.Options{CreatedBy: "boot"})
	nss := c.Typed.CoreV1().Namespaces()
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			existing := fmt.Sprintf("objects-ns-existing-%v-%d", serverSide, time.Now().UnixNano()%100000)
			made := fmt.Sprintf("objects-ns-made-%v-%d", serverSide, time.Now().UnixNano()%100000)
			t.Cleanup(func() {
				for _, n := range []string{existing, made} {
					_ = nss.Delete(context.Background(), n, metav1.DeleteOptions{})
				}
			})
			if _, err := nss.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: existing, Labels: map[string]string{"team": "a"}}}, metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
				t.Fatal(err)
			}
			mine := []*unstructured.Unstructured{
				obj(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {khook: added}, annotations: {note: khook}}\n", existing)),
				obj(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", made)),
			}
			for _, o := range mine {
				if _, err := khook.Apply(ctx(t), o, "", objects.ApplyOptions{ServerSide: serverSide}); err != nil {
					t.Fatal(err)
				}
			}
			items, err := khook.PlanUndo(ctx(t), mine, objects.UndoOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]objects.UndoAction{}
			for _, it := range items {
				got[it.Ref] = it.Action
			}
			if want := map[string]objects.UndoAction{"Namespace/" + existing: objects.UndoRevert, "Namespace/" + made: objects.UndoKeep}; !reflect.DeepEqual(got, want) {
				t.Errorf("plan %v, want %v", got, want)
			}
			sum, err := khook.Undo(ctx(t), mine, objects.UndoOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(sum.Message(), "reverted Namespace/"+existing) || !strings.Contains(sum.Message(), "left namespace "+made+" in place") {
				t.Errorf("summary %q", sum.Message())
			}
			ns, err := nss.Get(ctx(t), existing, metav1.GetOptions{})
			if err != nil || ns.DeletionTimestamp != nil {
				t.Fatalf("the configured namespace: %v, want it kept", err)
			}
			if !reflect.DeepEqual(ns.Labels, map[string]string{"team": "a", "kubernetes.io/metadata.name": existing}) || len(ns.Annotations) != 0 {
				t.Errorf("the configured namespace keeps %v %v, want only its own label", ns.Labels, ns.Annotations)
			}
			if m, err := nss.Get(ctx(t), made, metav1.GetOptions{}); err != nil || m.DeletionTimestamp != nil {
				t.Errorf("the namespace the spec created: %v, want it kept", err)
			}
		})
	}
}

// A Secret's values are never recorded: a value khook overwrote cannot
// be given back (the plan says so, and the Secret keeps khook's value); a
// key khook added is removed. Nor is a value holding a secret khook knows
// (in a ConfigMap). The record holds neither, in any form.
func TestRevertKeepsSecretsOutOfTheRecord(t *testing.T) {
	c, ns := setup(t, "objects-secret")
	red := redact.New()
	const planted, old = "s3cr3t-new-value", "0ld-s3cr3t-value"
	red.Add(planted)
	khook := objects.New(c, objects.Options{CreatedBy: "boot", Redactor: red})
	secrets := c.Typed.CoreV1().Secrets(ns)
	if _, err := secrets.Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": old, "user": "admin"}}, metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Typed.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"}, Data: map[string]string{"url": "https://db?password=" + old}}, metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
		t.Fatal(err)
	}
	// as kubectl's client-side apply creates it: its last-applied
	// configuration holds the old value of the field khook writes a
	// secret into
	applied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "applied", Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"apiVersion":"v1","data":{"password":"` + old + `"},"kind":"ConfigMap","metadata":{"annotations":{},"name":"applied","namespace":"` + ns + `"}}` + "\n",
	}}, Data: map[string]string{"password": old}}
	if _, err := c.Typed.CoreV1().ConfigMaps(ns).Create(ctx(t), applied, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	mine := []*unstructured.Unstructured{
		obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {password: "+planted+", extra: x}\n"),
		obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf}\ndata: {url: \"https://db?password="+planted+"\"}\n"),
		obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied}\ndata: {password: "+planted+"}\n"),
	}
	for _, o := range mine {
		// server-side, khook's apply does not carry the last-applied
		// annotation: the earlier one is recorded as another writer's
		opts := objects.ApplyOptions{ServerSide: o.GetName() == "applied"}
		if _, err := khook.Apply(ctx(t), o, ns, opts); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range mine {
		live, err := c.Resource(&meta.RESTMapping{Resource: schema.GroupVersionResource{Version: "v1", Resource: strings.ToLower(o.GetKind()) + "s"}, Scope: meta.RESTScopeNamespace}, ns).Get(ctx(t), o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec := live.GetAnnotations()[objects.AnnotationPrevious]
		if rec == "" {
			t.Fatalf("%s: no record", o.GetName())
		}
		for _, leak := range []string{old, base64.StdEncoding.EncodeToString([]byte(old)), planted, base64.StdEncoding.EncodeToString([]byte(planted)), "password="} {
			if strings.Contains(rec, leak) {
				t.Errorf("%s's record holds %q: %s", o.GetName(), leak, rec)
			}
		}
	}
	items, err := khook.PlanUndo(ctx(t), mine, objects.UndoOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	plan := map[string]map[string]string{}
	for _, it := range items {
		plan[strings.SplitN(it.Ref, " ", 2)[0]] = fieldsOf(it)
	}
	if s := plan["Secret/creds"]; s[".data.password"] != "lost" || s[".data.extra"] != "remove" {
		t.Errorf("Secret plan %v, want password lost and extra removed", s)
	}
	if cm := plan["ConfigMap/conf"]; cm[".data.url"] != "lost" {
		t.Errorf("ConfigMap plan %v, want url lost (its earlier value held a secret)", cm)
	}
	if _, err := khook.Undo(ctx(t), mine, objects.UndoOptions{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	s, err := secrets.Get(ctx(t), "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["password"]) != planted || string(s.Data["user"]) != "admin" || s.Data["extra"] != nil {
		t.Errorf("Secret data after destroy: %v, want khook's password kept, user kept, extra removed", s.Data)
	}
}

// A custom resource (no schema: a JSON merge patch, lists whole) another
// team applied with kubectl and khook configured gets back its earlier
// values, client-side and server-side (maps khook added go whole); a
// value larger than an annotation keeps is kept beside the object and
// given back exactly (decision 260); one larger than any record keeps
// cannot be given back, and the plan says so.
func TestRevertCustomResourceAndLargeValues(t *testing.T) {
	c, ns := setup(t, "objects-revert-cr")
	khook := objects.New(c, objects.Options{CreatedBy: "boot"})
	team := objects.New(c, objects.Options{FieldManager: "kubectl-client-side-apply"})
	crd := obj(t, fmt.Sprintf(widgetCRD, "gizmo", "Gizmo"))
	res, err := objects.New(c, objects.Options{FieldManager: "platform"}).Apply(ctx(t), crd, "", objects.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := khook.Establish(ctx(t), res, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Dynamic.Resource(crdGVR).Delete(context.Background(), "gizmos.undo.khook.test", metav1.DeleteOptions{})
	})
	mapping, err := khook.Mapping(ctx(t), schema.GroupVersionKind{Group: "undo.khook.test", Version: "v1", Kind: "Gizmo"})
	if err != nil {
		t.Fatal(err)
	}
	gizmos, cms := c.Resource(mapping, ns), c.Resource(cmMapping, ns)
	big := strings.Repeat("x", 70<<10)   // more than an annotation keeps: beside the object
	huge := strings.Repeat("y", 600<<10) // more than any record keeps
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			name, bigName, hugeName := fmt.Sprintf("g-%v", serverSide), fmt.Sprintf("big-%v", serverSide), fmt.Sprintf("huge-%v", serverSide)
			if _, err := team.Apply(ctx(t), obj(t, fmt.Sprintf("apiVersion: undo.khook.test/v1\nkind: Gizmo\nmetadata: {name: %s}\nspec: {size: 1, items: [a, b]}\n", name)), ns, objects.ApplyOptions{}); err != nil {
				t.Fatal(err)
			}
			for n, v := range map[string]string{bigName: big, hugeName: huge} {
				if _, err := cms.Create(ctx(t), obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {big: %s}\n", n, v)), metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
					t.Fatal(err)
				}
			}
			before, err := gizmos.Get(ctx(t), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gizmo := obj(t, fmt.Sprintf("apiVersion: undo.khook.test/v1\nkind: Gizmo\nmetadata: {name: %s}\nspec: {size: 2, items: [c], extra: {enabled: true}}\n", name))
			if _, err := khook.Apply(ctx(t), gizmo, ns, objects.ApplyOptions{ServerSide: serverSide}); err != nil {
				t.Fatal(err)
			}
			// client-side: server-side apply would conflict with team-a
			bigCM := obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {big: small}\n", bigName))
			hugeCM := obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {big: small}\n", hugeName))
			for _, o := range []*unstructured.Unstructured{bigCM, hugeCM} {
				if _, err := khook.Apply(ctx(t), o, ns, objects.ApplyOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			mine := []*unstructured.Unstructured{gizmo, bigCM, hugeCM}
			items, err := khook.PlanUndo(ctx(t), mine, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			plan := map[string]map[string]string{}
			for _, it := range items {
				plan[strings.SplitN(it.Ref, " ", 2)[0]] = fieldsOf(it)
			}
			if g := plan["Gizmo/"+name]; g[".spec.size"] != "restore 1" || g[".spec.items"] != `restore ["a","b"]` || g[".spec.extra.enabled"] != "remove" {
				t.Errorf("plan of %s: %v", name, g)
			}
			if b := plan["ConfigMap/"+bigName]; b[".data.big"] != `restore "`+big+`"` || b["khook's record"] != "remove" {
				t.Errorf("plan of the value larger than an annotation keeps: %.300v, want restore, and its record beside it removed", b)
			}
			if b := plan["ConfigMap/"+hugeName]; b[".data.big"] != "lost" {
				t.Errorf("plan of the value larger than any record keeps: %.300v, want lost", b)
			}
			if _, err := khook.Undo(ctx(t), mine, objects.UndoOptions{Namespace: ns}); err != nil {
				t.Fatal(err)
			}
			after, err := gizmos.Get(ctx(t), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after.Object["spec"], before.Object["spec"]) {
				t.Errorf("%s spec after destroy %v, want %v", name, after.Object["spec"], before.Object["spec"])
			}
			if !reflect.DeepEqual(after.GetAnnotations(), before.GetAnnotations()) {
				t.Errorf("%s annotations after destroy %v, want %v", name, after.GetAnnotations(), before.GetAnnotations())
			}
			back, err := cms.Get(ctx(t), bigName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, _, _ := unstructured.NestedString(back.Object, "data", "big"); v != big {
				t.Errorf("%s: the large value is not given back (%d bytes)", bigName, len(v))
			}
			if _, ok := back.GetAnnotations()[objects.AnnotationPrevious]; ok {
				t.Errorf("%s: khook's record left after destroy", bigName)
			}
			if n := companions(t, c, ns); n != 0 {
				t.Errorf("%d companions of khook's record left after destroy", n)
			}
		})
	}
}
