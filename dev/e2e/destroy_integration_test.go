//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"khook.io/core/testing/testcluster"
)

// yes is destroy's --yes: every test that destroys says it does not want
// the question (without a terminal, destroy refuses without it).
func yes(cmd string) []string {
	if cmd == "destroy" {
		return []string{"--yes"}
	}
	return nil
}

// teamSpec adds a key to team-settings, a ConfigMap another team owns,
// and creates one of its own.
const teamSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: teamspec}
steps:
  - name: settings
    apply:
      namespace: %[1]s
      serverSide: %[2]v
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: team-settings, labels: {khook: added}}
            data: {added: by-khook}
            ---
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: mine}
            data: {a: b}
`

// The team-settings case with the built binary: the object another team
// created survives destroy with the key and label khook added removed
// (client-side and server-side apply); the object khook created is
// deleted; the progress says which is which.
func TestDestroyUndoesOnlyWhatKhookCreated(t *testing.T) {
	cs := typed(t)
	ctx := context.Background()
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			ns := testcluster.Get(t).NewNamespace(t, "team")
			theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "team-settings", Labels: map[string]string{"team": "a"}}, Data: map[string]string{"owner": "theirs"}}
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, theirs, metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
				t.Fatal(err)
			}
			spec := writeSpec(t, fmt.Sprintf(teamSpec, ns, serverSide))
			if r, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 {
				t.Fatalf("apply: exit %d %v\n%s", res.Code, r, res.Stderr)
			}
			dry := run(t, bins.Kubectl, kubeEnv(t), "", "destroy", "-f", spec, "--dry-run")
			for _, want := range []string{"revert    ConfigMap/team-settings in " + ns + ": it existed before khook", "delete    ConfigMap/mine in " + ns + ": created by this spec"} {
				if dry.Code != 0 || !strings.Contains(dry.Stdout, want) {
					t.Errorf("destroy --dry-run: exit %d, lacks %q:\n%s%s", dry.Code, want, dry.Stdout, dry.Stderr)
				}
			}
			r, res := applyJSON(t, "destroy", spec, kubeEnv(t))
			if res.Code != 0 || r.Status != "ok" {
				t.Fatalf("destroy: exit %d\n%s", res.Code, res.Stderr)
			}
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the ConfigMap khook created: %v, want it deleted", err)
			}
			live, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "team-settings", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("team-settings: %v, want it left in place", err)
			}
			if len(live.Data) != 1 || live.Data["owner"] != "theirs" || live.Labels["khook"] != "" || live.Labels["team"] != "a" {
				t.Errorf("team-settings %v %v, want only the owner's key and label", live.Data, live.Labels)
			}
			if !strings.Contains(res.Stderr, "ConfigMap/team-settings in "+ns+" reverted") && !strings.Contains(res.Stdout, "reverted ConfigMap/team-settings") {
				t.Errorf("destroy does not say team-settings was only reverted:\n%s\n%s", res.Stdout, res.Stderr)
			}
		})
	}
}

const crdSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: crdspec}
steps:
  - name: crd
    apply:
      manifests:
        - inline: |
            apiVersion: apiextensions.k8s.io/v1
            kind: CustomResourceDefinition
            metadata: {name: %[1]ss.destroy.khook.test}
            spec:
              group: destroy.khook.test
              scope: Namespaced
              names: {plural: %[1]ss, singular: %[1]s, kind: %[2]s, listKind: %[2]sList}
              versions:
              - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - name: own
    needs: [crd]
    apply:
      namespace: %[3]s
      manifests:
        - inline: |
            apiVersion: destroy.khook.test/v1
            kind: %[2]s
            metadata: {name: own}
`

// A CRD with a custom resource the spec did not write is refused (count
// and where, nothing deleted) and, with --force-crds, deleted; a CRD with
// only the spec's resources is deleted.
func TestDestroyCRDWithForeignResources(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "crdown")
	other := testcluster.Get(t).NewNamespace(t, "crdother")
	spec := writeSpec(t, fmt.Sprintf(crdSpec, "sprocket", "Sprocket", ns))
	dc, err := dynamic.NewForConfig(testcluster.Get(t).RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crGVR := schema.GroupVersionResource{Group: "destroy.khook.test", Version: "v1", Resource: "sprockets"}
	crdExists := func() bool {
		_, err := dc.Resource(crdGVR).Get(ctx, "sprockets.destroy.khook.test", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	t.Cleanup(func() {
		_ = dc.Resource(crdGVR).Delete(context.Background(), "sprockets.destroy.khook.test", metav1.DeleteOptions{})
	})
	apply := func() {
		t.Helper()
		if _, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 {
			t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
		}
	}
	apply()
	foreign := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "destroy.khook.test/v1", "kind": "Sprocket", "metadata": map[string]any{"name": "theirs"}}}
	if _, err := dc.Resource(crGVR).Namespace(other).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, res := applyJSON(t, "destroy", spec, kubeEnv(t))
	_, _, errText, _ := r.step(t, "crd")
	if res.Code != 1 || !strings.Contains(errText, "1 custom resource this spec did not create (in namespace "+other+": "+other+"/theirs)") || !strings.Contains(errText, "--force-crds") {
		t.Fatalf("destroy: exit %d, step crd %q, want it refused naming the custom resource and --force-crds\n%s", res.Code, errText, res.Stderr)
	}
	if !crdExists() {
		t.Fatal("the refused CRD was deleted")
	}
	if _, err := dc.Resource(crGVR).Namespace(other).Get(ctx, "theirs", metav1.GetOptions{}); err != nil {
		t.Fatalf("the foreign custom resource: %v", err)
	}
	if _, res := applyJSON(t, "destroy", spec, kubeEnv(t), "--force-crds"); res.Code != 0 {
		t.Fatalf("destroy --force-crds: exit %d\n%s", res.Code, res.Stderr)
	}
	if crdExists() {
		t.Fatal("destroy --force-crds left the CRD")
	}
	// only the spec's own resources: deleted without the flag
	apply()
	if _, res := applyJSON(t, "destroy", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("destroy of a CRD with only the spec's resources: exit %d\n%s", res.Code, res.Stderr)
	}
	if crdExists() {
		t.Fatal("destroy left a CRD with only the spec's resources")
	}
}

// An object named only by generateName is refused with its file and line.
func TestGenerateNameRefused(t *testing.T) {
	spec := writeSpec(t, `apiVersion: khook.io/v1
kind: Khook
metadata: {name: gen}
steps:
  - name: gen
    apply:
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {generateName: gen-}
`)
	res := run(t, bins.Kubectl, kubeEnv(t), "", "apply", "-f", spec)
	if res.Code != 2 || !strings.Contains(res.Stderr, spec+":9:") || !strings.Contains(res.Stderr, "metadata.generateName without metadata.name") {
		t.Fatalf("apply: exit %d, want 2 naming %s:9 and generateName\n%s", res.Code, spec, res.Stderr)
	}
}

// ptyRun runs the binary on a pseudo-terminal, answers the question with
// answer once it is asked, and returns the exit code and all it printed.
func ptyRun(t *testing.T, env []string, answer string, args ...string) (int, string) {
	t.Helper()
	return ptyAnswer(t, env, "or 'yes' to destroy: ", answer, args...)
}

// ptyAnswer runs the binary on a pseudo-terminal, answers once it printed
// question, and returns the exit code and all it printed.
func ptyAnswer(t *testing.T, env []string, question, answer string, args ...string) (int, string) {
	t.Helper()
	return ptyAnswerAfter(t, env, question, answer, nil, args...)
}

// ptyAnswerAfter is ptyAnswer calling atQuestion (when set), with what
// was printed so far, while the binary waits at its question.
func ptyAnswerAfter(t *testing.T, env []string, question, answer string, atQuestion func(printed string), args ...string) (int, string) {
	t.Helper()
	if atQuestion == nil {
		atQuestion = func(string) {}
	}
	return ptyConverse(t, env, []ptyStep{{marker: question, do: atQuestion}}, answer, args...)
}

// destroy takes the run lock before it shows its plan and holds it
// through the question (as Terraform holds the state lock through plan
// and prompt): an apply started while it waits is refused by the lock,
// changing nothing; the question names what runs, and what runs is what
// it named.
func TestDestroyHoldsTheLockThroughTheQuestion(t *testing.T) {
	cs := typed(t)
	ctx := context.Background()
	ns := testcluster.Get(t).NewNamespace(t, "asklock")
	body := fmt.Sprintf(teamSpec, ns, false)
	body = strings.Replace(body, "steps:\n", "state: {namespace: "+ns+"}\nsteps:\n", 1) + `  - name: other
    needs: [settings]
    apply: {namespace: ` + ns + `, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"}]}
  - name: settle
    needs: [other]
    wait: {for: delete, on: configmap/gone, namespace: ` + ns + `}
`
	spec := writeSpec(t, body)
	if _, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	var plan string
	code, out := ptyAnswerAfter(t, kubeEnv(t), "or 'yes' to destroy: ", "yes", func(printed string) {
		plan = printed
		res := run(t, bins.Kubectl, kubeEnv(t), "", "apply", "-f", spec)
		if res.Code != 1 || !strings.Contains(res.Stderr, "is locked by another run") || !strings.Contains(res.Stderr, "destroy") {
			t.Errorf("an apply while destroy asks: exit %d, want 1, refused by destroy's lock\n%s", res.Code, res.Stderr)
		}
	}, "destroy", "-f", spec)
	if code != 0 {
		t.Fatalf("destroy: exit %d\n%s", code, out)
	}
	// the question named what runs: each ConfigMap deleted, the wait left
	// alone; and that is what ran
	for _, want := range []string{"delete    ConfigMap/mine in " + ns, "delete    ConfigMap/team-settings in " + ns, "delete    ConfigMap/other in " + ns, "left alone: destroy leaves wait steps alone"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan before the question lacks %q:\n%s", want, plan)
		}
	}
	for _, name := range []string{"mine", "team-settings", "other"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s after destroy: %v", name, err)
		}
	}
	if after := out[len(plan):]; !strings.Contains(after, "nothing to undo: destroy leaves wait steps alone") {
		t.Errorf("what ran is not what the plan named (the wait left alone):\n%s", after)
	}
}

// destroy asks first: without a terminal it refuses without --yes,
// changing nothing; on a terminal, any answer but the spec's name (or
// yes) changes nothing, the name destroys; a fleet shows every context
// before the question.
func TestDestroyAsksFirst(t *testing.T) {
	cs := typed(t)
	ctx := context.Background()
	ns := testcluster.Get(t).NewNamespace(t, "ask")
	spec := writeSpec(t, fmt.Sprintf(teamSpec, ns, false))
	if _, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	present := func(what string) {
		t.Helper()
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: the spec's ConfigMap: %v, want it untouched", what, err)
		}
	}
	res := run(t, bins.Kubectl, kubeEnv(t), "", "destroy", "-f", spec)
	if res.Code != 2 || !strings.Contains(res.Stderr, "--yes") {
		t.Fatalf("destroy without a terminal: exit %d, want 2 naming --yes\n%s", res.Code, res.Stderr)
	}
	present("without a terminal")
	for _, answer := range []string{"", "no", "teamspec2", "y"} {
		code, out := ptyRun(t, kubeEnv(t), answer, "destroy", "-f", spec)
		if code != 1 || !strings.Contains(out, "destroy cancelled: nothing was changed") || !strings.Contains(out, "delete    ConfigMap/mine in "+ns) {
			t.Fatalf("answer %q: exit %d, want 1, the plan and cancelled:\n%s", answer, code, out)
		}
		present(fmt.Sprintf("answer %q", answer))
	}
	kubeconfig, _ := oneClusterTwice(t)
	code, out := ptyRun(t, []string{"KUBECONFIG=" + kubeconfig}, "no", "destroy", "-f", spec, "--contexts", "one-a,one-b")
	q := strings.Index(out, "Type the spec's name")
	if code != 1 || q < 0 || !strings.Contains(out[:q], "Cluster one-a (server ") || !strings.Contains(out[:q], "Cluster one-b (server ") || !strings.Contains(out[q-200:], "on 2 clusters (one-a, one-b)") {
		t.Fatalf("fleet: exit %d, want both contexts' plans before the question:\n%s", code, out)
	}
	present("fleet answered no")
	code, out = ptyRun(t, kubeEnv(t), "teamspec", "destroy", "-f", spec)
	if code != 0 {
		t.Fatalf("answered the spec's name: exit %d\n%s", code, out)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("answered the spec's name: %v, want the ConfigMap deleted", err)
	}
}
