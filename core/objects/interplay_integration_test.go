//go:build integration

package objects_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/objects"
	"khook.io/core/testing/testcluster"
)

// kubectlIn runs the test cluster's kubectl in namespace ns with stdin.
func kubectlIn(t *testing.T, ns, stdin string, args ...string) {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, testcluster.Kubectl(t), append([]string{"--kubeconfig", testcluster.Get(t).Kubeconfig, "-n", ns}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
}

// sameJSON reports whether two last-applied configurations are the same
// JSON.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// fieldLine is the plan's line of one field of an item: outcome, value
// and reason.
func fieldLine(it objects.UndoItem, path string) string {
	for _, f := range it.Fields {
		if f.Path == path {
			return strings.TrimSpace(fmt.Sprintf("%s %s (%s)", f.Outcome, f.Value, f.Reason))
		}
	}
	return ""
}

const lastAppliedPath = ".metadata.annotations.kubectl.kubernetes.io/last-applied-configuration"

// The last-applied annotation khook's server-side apply keeps current
// (decision 224: owned by kubectl-last-applied, as kubectl leaves it)
// holds khook's configuration: destroy gives back what it held before
// khook (another team's kubectl apply), while the annotation is khook's
// still, even when khook's manifest changed since its last apply; an
// apply of another writer since wins: kubectl apply (client-side) and
// kubectl apply --server-side (for which the API server rewrites the
// annotation, keeping its owner) after khook each leave theirs, and the
// plan says so.
func TestRevertServerSideKeptLastApplied(t *testing.T) {
	c, ns := setup(t, "objects-kept")
	khook := objects.New(c, objects.Options{CreatedBy: "boot"})
	cms := c.Resource(cmMapping, ns)
	for _, tc := range []struct {
		name string
		// after runs after khook's apply; it returns the annotation
		// destroy must leave ("" for the one before khook)
		after func(t *testing.T, name string) string
		// destroyed is the manifest destroy reads; nil: khook's as applied
		destroyed func(t *testing.T, name string) *unstructured.Unstructured
		line      string // the plan's line of the annotation, its start
	}{
		{name: "given-back", line: `restore "{\"apiVersion\":\"v1\"`},
		{
			name: "manifest-changed",
			destroyed: func(t *testing.T, name string) *unstructured.Unstructured {
				return obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {k: changed-since}\n", name))
			},
			line: `restore "{\"apiVersion\":\"v1\"`,
		},
		{
			name: "kubectl-apply-since",
			after: func(t *testing.T, name string) string {
				kubectlIn(t, ns, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: {team: a}}\ndata: {owner: theirs, k: theirs-again}\n", name), "apply", "-f", "-")
				return annotation(t, cms, name)
			},
			line: "stay  (written since khook by kubectl-client-side-apply)",
		},
		{
			name: "kubectl-server-side-since",
			after: func(t *testing.T, name string) string {
				kubectlIn(t, ns, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: {team: a}}\ndata: {owner: theirs, k: theirs-ssa}\n", name), "apply", "--server-side", "--force-conflicts", "-f", "-")
				return annotation(t, cms, name)
			},
			line: "stay  (it is not the configuration of khook's manifest, and kubectl's server-side apply rewrote it since khook",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "kept-" + tc.name
			kubectlIn(t, ns, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: {team: a}}\ndata: {owner: theirs, k: before}\n", name), "apply", "-f", "-")
			theirs := annotation(t, cms, name)
			mine := obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: {khook: added}}\ndata: {k: khook-value, added: by-khook}\n", name))
			if _, err := khook.Apply(ctx(t), mine, ns, objects.ApplyOptions{ServerSide: true}); err != nil {
				t.Fatal(err)
			}
			live, err := cms.Get(ctx(t), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			kept := live.GetAnnotations()[corev1.LastAppliedConfigAnnotation]
			if sameJSON(t, kept, theirs) || !strings.Contains(kept, "by-khook") {
				t.Fatalf("khook's server-side apply left the annotation %s, want khook's configuration in it", kept)
			}
			want := theirs
			if tc.after != nil {
				want = tc.after(t, name)
			}
			destroyed := mine
			if tc.destroyed != nil {
				destroyed = tc.destroyed(t, name)
			}
			items, err := khook.PlanUndo(ctx(t), []*unstructured.Unstructured{destroyed}, objects.UndoOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			if got := fieldLine(items[0], lastAppliedPath); !strings.HasPrefix(got, tc.line) {
				t.Errorf("plan of the annotation: %q, want %q...\n%+v", got, tc.line, items[0].Fields)
			}
			if _, err := khook.Undo(ctx(t), []*unstructured.Unstructured{destroyed}, objects.UndoOptions{Namespace: ns}); err != nil {
				t.Fatal(err)
			}
			if got := annotation(t, cms, name); !sameJSON(t, got, want) {
				t.Errorf("annotation after destroy:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// annotation is the last-applied annotation of ConfigMap name.
func annotation(t *testing.T, cms interface {
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
}, name string) string {
	t.Helper()
	live, err := cms.Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := live.GetAnnotations()[corev1.LastAppliedConfigAnnotation]
	if !ok {
		t.Fatalf("%s has no last-applied annotation: %v", name, live.GetAnnotations())
	}
	return a
}

// A Namespace that had no last-applied annotation before khook, applied
// client-side by khook (which writes the annotation) and then
// server-side (which keeps it current, decision 224), loses the
// annotation with destroy, as after client-side apply alone: it held
// none before khook.
func TestRevertKeptLastAppliedItAdded(t *testing.T) {
	c, _ := setup(t, "objects-kept-ns")
	khook := objects.New(c, objects.Options{CreatedBy: "boot"})
	nss := c.Typed.CoreV1().Namespaces()
	name := fmt.Sprintf("objects-kept-ns-%d", time.Now().UnixNano()%100000)
	t.Cleanup(func() { _ = nss.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if _, err := nss.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "a"}}}, metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
		t.Fatal(err)
	}
	mine := obj(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {khook: added}}\n", name))
	for _, serverSide := range []bool{false, true} {
		if _, err := khook.Apply(ctx(t), mine, "", objects.ApplyOptions{ServerSide: serverSide}); err != nil {
			t.Fatal(err)
		}
	}
	live, err := nss.Get(ctx(t), name, metav1.GetOptions{})
	if err != nil || live.Annotations[corev1.LastAppliedConfigAnnotation] == "" {
		t.Fatalf("after the server-side apply: %v %v, want the annotation kept", err, live.Annotations)
	}
	items, err := khook.PlanUndo(ctx(t), []*unstructured.Unstructured{mine}, objects.UndoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const want = "remove  (khook's server-side apply keeps it current, as kubectl's does, and it held none before khook)"
	if got := fieldLine(items[0], lastAppliedPath); got != want {
		t.Errorf("plan of the annotation: %q, want %q", got, want)
	}
	if _, err := khook.Undo(ctx(t), []*unstructured.Unstructured{mine}, objects.UndoOptions{}); err != nil {
		t.Fatal(err)
	}
	live, err = nss.Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(live.Annotations) != 0 || !reflect.DeepEqual(live.Labels, map[string]string{"team": "a", "kubernetes.io/metadata.name": name}) {
		t.Errorf("after destroy: annotations %v, labels %v; want none and the team's", live.Annotations, live.Labels)
	}
}

// A write the API server refuses changed nothing, and khook's record
// (written before it) is taken back with it: none is left when there was
// none, the one before is left as it was, client-side (an invalid
// object) and server-side (a conflict) alike. The next write that
// succeeds records what the fields hold then.
func TestRefusedWriteTakesBackTheRecord(t *testing.T) {
	c, ns := setup(t, "objects-refused")
	khook := objects.New(c, objects.Options{CreatedBy: "boot"})
	cms := c.Resource(cmMapping, ns)
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			name := fmt.Sprintf("refused-%v", serverSide)
			if _, err := cms.Create(ctx(t), obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {a: theirs}\n", name, ns)), metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
				t.Fatal(err)
			}
			// refused: server-side, a conflict with team-a over a;
			// client-side, a field the schema does not have (strict)
			bad := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: mine, b: khook}\n", name)
			if !serverSide {
				bad = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {b: khook}\ndta: {c: typo}\n", name)
			}
			state := func() (string, []string) {
				t.Helper()
				live, err := cms.Get(ctx(t), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var owners []string
				for _, e := range live.GetManagedFields() {
					owners = append(owners, e.Manager+"/"+string(e.Operation))
				}
				return live.GetAnnotations()[objects.AnnotationPrevious], owners
			}
			if _, err := khook.Apply(ctx(t), obj(t, bad), ns, objects.ApplyOptions{ServerSide: serverSide}); err == nil {
				t.Fatal("the bad apply succeeded")
			}
			if rec, owners := state(); rec != "" || !reflect.DeepEqual(owners, []string{"team-a/Update"}) {
				t.Errorf("after a refused first write: record %q, owners %v; want nothing of khook's", rec, owners)
			}
			// a write that succeeds records, then a refused one leaves the record as it was
			if _, err := khook.Apply(ctx(t), obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {b: khook}\n", name)), ns, objects.ApplyOptions{ServerSide: serverSide}); err != nil {
				t.Fatal(err)
			}
			good, _ := state()
			if !strings.Contains(good, `"f:b"`) || strings.Contains(good, `"f:a"`) {
				t.Fatalf("record %s, want b recorded (absent) and a not", good)
			}
			if _, err := khook.Apply(ctx(t), obj(t, bad), ns, objects.ApplyOptions{ServerSide: serverSide}); err == nil {
				t.Fatal("the bad apply succeeded")
			}
			if rec, _ := state(); rec != good {
				t.Errorf("after a refused write the record is\n%s\nwant it as before\n%s", rec, good)
			}
			// team-a changes a; khook's next write of it records team-a's value then
			if _, err := cms.Patch(ctx(t), name, "application/merge-patch+json", []byte(`{"data":{"a":"theirs-later"}}`), metav1.PatchOptions{FieldManager: "team-a"}); err != nil {
				t.Fatal(err)
			}
			force := obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: mine, b: khook}\n", name))
			if serverSide {
				// khook never forces a conflict with team-a: team-a releases a
				if _, err := cms.Patch(ctx(t), name, "application/json-patch+json", []byte(`[{"op":"remove","path":"/data/a"}]`), metav1.PatchOptions{FieldManager: "team-a"}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := khook.Apply(ctx(t), force, ns, objects.ApplyOptions{ServerSide: serverSide}); err != nil {
				t.Fatal(err)
			}
			rec, _ := state()
			var got struct {
				Values map[string]map[string]any `json:"values"`
				Absent map[string]map[string]any `json:"absent"`
				Known  map[string]map[string]any `json:"known"`
			}
			if err := json.Unmarshal([]byte(rec), &got); err != nil {
				t.Fatal(err)
			}
			_, absent := got.Absent["f:data"]["f:a"]
			_, known := got.Known["f:data"]["f:a"]
			switch {
			case !serverSide && (!known || got.Values["data"]["a"] != "theirs-later"):
				t.Errorf("record %s: want a known as theirs-later, its value at khook's first write of it", rec)
			case serverSide && (!absent || known):
				t.Errorf("record %s: want a absent (team-a removed it before khook's first write of it)", rec)
			}
		})
	}
}

// A field manager of the API server's longest (128 characters) writes
// the record as a name cut to fit (its last 9 characters -previous), and
// destroy takes both off.
func TestLongFieldManagerRecords(t *testing.T) {
	c, ns := setup(t, "objects-longfm")
	manager := strings.Repeat("m", 128)
	khook := objects.New(c, objects.Options{CreatedBy: "boot", FieldManager: manager})
	cms := c.Resource(cmMapping, ns)
	if _, err := cms.Create(ctx(t), obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: long, namespace: %s}\ndata: {a: theirs}\n", ns)), metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
		t.Fatal(err)
	}
	mine := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: long}\ndata: {b: khook}\n")
	for _, serverSide := range []bool{false, true} {
		if _, err := khook.Apply(ctx(t), mine, ns, objects.ApplyOptions{ServerSide: serverSide}); err != nil {
			t.Fatalf("serverSide=%v: %v", serverSide, err)
		}
	}
	live, err := cms.Get(ctx(t), "long", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recordManager := strings.Repeat("m", 119) + "-previous"
	var managers []string
	for _, e := range live.GetManagedFields() {
		managers = append(managers, e.Manager)
	}
	if !strings.Contains(live.GetAnnotations()[objects.AnnotationPrevious], `"f:b"`) || !strings.Contains(strings.Join(managers, " "), recordManager) {
		t.Fatalf("record %q written by %v, want b recorded by %s", live.GetAnnotations()[objects.AnnotationPrevious], managers, recordManager)
	}
	if _, err := khook.Undo(ctx(t), []*unstructured.Unstructured{mine}, objects.UndoOptions{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	live, err = cms.Get(ctx(t), "long", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedStringMap(live.Object, "data")
	if !reflect.DeepEqual(data, map[string]string{"a": "theirs"}) || len(live.GetAnnotations()) != 0 {
		t.Errorf("after destroy: data %v, annotations %v", data, live.GetAnnotations())
	}
	for _, e := range live.GetManagedFields() {
		if e.Manager == manager || e.Manager == recordManager {
			t.Errorf("after destroy %s still owns fields", e.Manager)
		}
	}
}

// With --field-manager kubectl, an object kubectl itself applied and
// khook never configured (no mark, no record: the step never reached it,
// or its apply was refused) is kubectl's: destroy leaves it, where it
// would delete it as unmarked when "khook" were the only writer, or
// remove every field of it khook's manager owns.
func TestUndoLeavesAnotherToolsObjectUnderItsManager(t *testing.T) {
	c, ns := setup(t, "objects-fm-leave")
	cms := c.Resource(cmMapping, ns)
	alone, shared := "kubectls-alone", "kubectls-shared"
	for _, name := range []string{alone, shared} {
		kubectlIn(t, ns, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: \"1\"}\n", name), "apply", "--server-side", "-f", "-")
	}
	kubectlIn(t, ns, "", "label", "configmap", shared, "team=a") // another writer: kubectl-label
	asKubectl := objects.New(c, objects.Options{CreatedBy: "boot", FieldManager: "kubectl"})
	mine := []*unstructured.Unstructured{
		obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: \"2\"}\n", alone)),
		obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: \"2\"}\n", shared)),
	}
	items, err := asKubectl.PlanUndo(ctx(t), mine, objects.UndoOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.Action != objects.UndoLeave || !strings.Contains(it.Reason, "khook never configured it as field manager kubectl") {
			t.Errorf("%s: %s (%s), want leave", it.Ref, it.Action, it.Reason)
		}
	}
	if _, err := asKubectl.Undo(ctx(t), mine, objects.UndoOptions{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{alone, shared} {
		live, err := cms.Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s after destroy: %v, want it kept", name, err)
		}
		if data, _, _ := unstructured.NestedStringMap(live.Object, "data"); !reflect.DeepEqual(data, map[string]string{"a": "1"}) {
			t.Errorf("%s data after destroy %v, want kubectl's", name, data)
		}
	}
}
