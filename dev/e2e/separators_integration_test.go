//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/testing/testcluster"
)

// separatorObjects are the objects of separatorSpec, as Kind/name.
var separatorObjects = []string{"ConfigMap/inline-1", "ConfigMap/inline-2", "Secret/inline-3", "ConfigMap/file-1", "ConfigMap/file-2"}

// separatorSpec writes a spec whose apply step reads five objects from
// documents separated as kubectl allows ("--- # comment", "---" and a
// tab), inline and from a file written on Windows (byte order mark, CRLF
// line ends). Before, each source applied its first object only, while
// the offline plan counted them all.
func separatorSpec(t *testing.T, ns string) (dir, spec string) {
	t.Helper()
	dir = t.TempDir()
	file := "\ufeff" + strings.ReplaceAll(`# two ConfigMaps
apiVersion: v1
kind: ConfigMap
metadata: {name: file-1}
data: {from: file}
--- # the second one
apiVersion: v1
kind: ConfigMap
metadata: {name: file-2}
data: {from: file}
`, "\n", "\r\n")
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	spec = filepath.Join(dir, "spec.yaml")
	body := fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: separators}
steps:
  - name: objects
    apply:
      namespace: %s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: inline-1}
            data: {from: inline}
            --- # the second one
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: inline-2}
            data: {from: inline}
            ---	# the third one, after a tab
            apiVersion: v1
            kind: Secret
            metadata: {name: inline-3}
            stringData: {from: inline}
        - file: ./objects.yaml
`, ns)
	if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, spec
}

// present lists which of separatorObjects exist in ns.
func present(t *testing.T, ns string) []string {
	t.Helper()
	c := typed(t)
	ctx := context.Background()
	var out []string
	for _, ref := range separatorObjects {
		kind, name, _ := strings.Cut(ref, "/")
		var err error
		if kind == "Secret" {
			_, err = c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		} else {
			_, err = c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		}
		switch {
		case err == nil:
			out = append(out, ref)
		case !apierrors.IsNotFound(err):
			t.Fatal(err)
		}
	}
	return out
}

type planJSON struct {
	Steps []struct {
		Name    string   `json:"name"`
		Action  string   `json:"action"`
		Summary string   `json:"summary"`
		Details []string `json:"details"`
	} `json:"steps"`
}

func planSteps(t *testing.T, res Result) planJSON {
	t.Helper()
	var p planJSON
	if res.Code != 0 {
		t.Fatalf("plan: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil || len(p.Steps) == 0 {
		t.Fatalf("plan -o json: %v\n%s", err, res.Stdout)
	}
	return p
}

// Offline plan, live plan, diff, apply, destroy and delete.manifests all
// read the same five objects from documents separated by "--- # comment".
func TestCommentedSeparatorsEveryCommand(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "seps")
	dir, spec := separatorSpec(t, ns)
	env := kubeEnv(t)

	// offline plan: the inline source counts its three objects
	p := planSteps(t, run(t, bins.Kubectl, nil, "", "plan", "--offline", "-f", spec, "-o", "json"))
	if want := "apply inline (3 objects) + file ./objects.yaml in " + ns; p.Steps[0].Summary != want {
		t.Errorf("offline plan summary %q, want %q", p.Steps[0].Summary, want)
	}

	// live plan: every object, in order
	p = planSteps(t, run(t, bins.Kubectl, env, "", "plan", "-f", spec, "-o", "json"))
	var want []string
	for _, ref := range separatorObjects {
		want = append(want, ref+" in "+ns+": create")
	}
	if p.Steps[0].Action != "create" || !slices.Equal(p.Steps[0].Details, want) {
		t.Errorf("live plan: %s %q\nwant %q", p.Steps[0].Action, p.Steps[0].Details, want)
	}

	// diff: every object would be created
	res := run(t, bins.Kubectl, env, "", "diff", "-f", spec)
	if res.Code != 1 || !strings.Contains(res.Stdout, "=== objects (apply): 5 objects would change") {
		t.Errorf("diff: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	changed := changedLines(res.Stdout)
	for _, ref := range separatorObjects {
		if _, ok := changed[strings.Replace(ref, "/", " "+ns+"/", 1)]; !ok {
			t.Errorf("diff does not show %s:\n%s", ref, res.Stdout)
		}
	}
	if len(present(t, ns)) != 0 {
		t.Fatal("plan or diff created objects")
	}

	// apply: every object reaches the cluster
	r, res := applyJSON(t, "apply", spec, env)
	if res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if msg := r.Steps[0].Message; !strings.HasPrefix(msg, "applied 5 objects: 5 created") {
		t.Errorf("apply message %q", msg)
	}
	if got := present(t, ns); !slices.Equal(got, separatorObjects) {
		t.Fatalf("after apply the cluster holds %q, want %q", got, separatorObjects)
	}
	res = run(t, bins.Kubectl, env, "", "diff", "-f", spec)
	if res.Code != 0 || !strings.Contains(res.Stdout, "=== objects (apply): no changes (5 objects)") {
		t.Errorf("diff after apply: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}

	// destroy: every object is deleted
	r, res = applyJSON(t, "destroy", spec, env)
	if res.Code != 0 || r.Status != "ok" {
		t.Fatalf("destroy: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if got := present(t, ns); len(got) != 0 {
		t.Fatalf("destroy left %q", got)
	}

	// delete.manifests: the same sources, in a delete step, delete them all
	if r, res = applyJSON(t, "apply", spec, env); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply again: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	body, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	del := filepath.Join(dir, "delete.yaml")
	text := strings.Replace(strings.Replace(string(body), "name: separators", "name: separators-delete", 1), "    apply:\n", "    delete:\n", 1)
	if err := os.WriteFile(del, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p = planSteps(t, run(t, bins.Kubectl, env, "", "plan", "-f", del, "-o", "json"))
	deletes := 0
	for _, d := range p.Steps[0].Details {
		if strings.HasPrefix(d, "delete ") {
			deletes++
		}
	}
	if p.Steps[0].Action != "delete" || deletes != len(separatorObjects) {
		t.Errorf("live plan of the delete step: %s %q", p.Steps[0].Action, p.Steps[0].Details)
	}
	if r, res = applyJSON(t, "apply", del, env); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("delete.manifests: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if got := present(t, ns); len(got) != 0 {
		t.Fatalf("delete.manifests left %q (%s)", got, r.Steps[0].Message)
	}
}

// What kubectl would silently drop (a document after a "..." end marker)
// fails validation, before anything touches the cluster, at its line of
// the spec; nothing is applied.
func TestDocumentAfterEndMarkerRefused(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "endmark")
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: endmarker}
steps:
  - name: objects
    apply:
      namespace: %s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: file-1}
            ...
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: file-2}
`, ns))
	res := run(t, bins.Kubectl, kubeEnv(t), "", "apply", "-f", spec)
	want := `spec.yaml:13:13: steps[0] (objects).apply.manifests[0].inline: inline manifest, document 1: content after the document end marker "..." at line 4`
	if res.Code != 2 || !strings.Contains(res.Stderr, want) {
		t.Errorf("apply: exit %d, want 2 and %q\n%s\n%s", res.Code, want, res.Stdout, res.Stderr)
	}
	if got := present(t, ns); len(got) != 0 {
		t.Errorf("a refused spec applied %q", got)
	}
}
