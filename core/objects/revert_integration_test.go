//go:build integration

package objects_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/objects"
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
				".metadata.annotations.khook.io/previous":                                             "remove",
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
