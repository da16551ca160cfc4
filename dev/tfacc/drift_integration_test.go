//go:build integration

package tfacc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/testing/testcluster"
)

// driftSpecText is a spec without state: a helm release of a local chart
// of two ConfigMaps (the c2) and an apply: step.
func driftSpecText(ns string) string {
	return `apiVersion: khook.io/v1
kind: Khook
metadata: {name: tfdrift}
steps:
  - name: c2
    helm: {chart: ./c2, namespace: ` + ns + `}
  - name: config
    apply:
      namespace: ` + ns + `
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: config}
            data: {level: info}
`
}

const driftMainTF = `terraform {
  required_providers {
    khook = { source = "khook-io/khook" }
  }
}
variable "kubeconfig" { type = string }
resource "khook_spec" "boot" {
  spec     = file("${path.module}/spec.yaml")
  base_dir = path.module
  kubernetes {
    config_path = var.kubeconfig
  }
}
`

// TestProviderPlansRepair is the provider's part of issue 28: without
// state:, an applied spec re-plans empty (-detailed-exitcode 0); after a
// release's ConfigMap is deleted out of band, the plan is an update whose
// helm step is repair, and the apply puts it back in a new revision;
// after a field of the apply: step's ConfigMap is edited, the plan
// configures it; each apply is followed by an empty plan again.
func TestProviderPlansRepair(t *testing.T) {
	cl := testcluster.Get(t)
	c := kubernetes.NewForConfigOrDie(cl.RESTConfig(t))
	ns := cl.NewNamespace(t, "tfdrift")
	w := newWorkspace(t)
	w.env = append(w.env, "TF_VAR_kubeconfig="+cl.Kubeconfig)
	w.writeTree(map[string]string{
		"c2/Chart.yaml":         "apiVersion: v2\nname: c2\nversion: 0.1.0\n",
		"c2/templates/all.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c2-cm}\ndata: {a: \"1\"}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c2-cm2}\ndata: {a: \"1\", b: \"2\"}\n",
		"spec.yaml":             driftSpecText(ns),
		"main.tf":               driftMainTF,
	})
	ctx := context.Background()
	w.must("apply", "-auto-approve")
	if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("re-plan of the applied spec: exit %d, want 0\n%s", code, out)
	}

	// a release object deleted out of band: repair
	if err := c.CoreV1().ConfigMaps(ns).Delete(ctx, "c2-cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, code := w.run("plan", "-detailed-exitcode", "-out=repair.plan")
	if code != 2 {
		t.Fatalf("plan after the delete: exit %d, want 2\n%s", code, out)
	}
	if !strings.Contains(out, "repair") {
		t.Errorf("the plan does not say repair:\n%s", out)
	}
	planned := planSteps(t, w, "repair.plan")
	if planned["_actions"] != "update" || planned["c2"] != "repair" || planned["config"] != "unchanged" {
		t.Errorf("planned %v, want an update: c2 repair, config unchanged", planned)
	}
	w.must("apply", "-auto-approve", "repair.plan")
	if _, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "c2-cm", metav1.GetOptions{}); err != nil {
		t.Fatalf("the apply did not re-create c2-cm: %v", err)
	}
	if _, err := c.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.c2.v2", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Error("the repair made no new revision")
	}
	if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("re-plan after the repair: exit %d, want 0\n%s", code, out)
	}

	// a field of the apply: step's object edited: configure
	if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "config", types.MergePatchType, []byte(`{"data":{"level":"debug"}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatal(err)
	}
	if out, code := w.run("plan", "-detailed-exitcode", "-out=configure.plan"); code != 2 {
		t.Fatalf("plan after the edit: exit %d, want 2\n%s", code, out)
	}
	if planned := planSteps(t, w, "configure.plan"); planned["config"] != "configure" || planned["c2"] != "no-op" {
		t.Errorf("planned %v, want config configure, c2 no-op", planned)
	}
	w.must("apply", "-auto-approve", "configure.plan")
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "config", metav1.GetOptions{})
	if err != nil || cm.Data["level"] != "info" {
		t.Fatalf("the apply did not put level back: %v %v", cm.Data, err)
	}
	if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("re-plan after the apply: exit %d, want 0\n%s", code, out)
	}
}

// TestProviderPlansNoChangeForKeptFields: a field another manager (a
// controller, cainjector) wrote since the apply, and a field a person
// changed that the spec's ignore: rule names, plan no change
// (-detailed-exitcode 0) and are shown as warnings naming them; a
// person's edit of a field no rule names still plans the repair.
func TestProviderPlansNoChangeForKeptFields(t *testing.T) {
	cl := testcluster.Get(t)
	c := kubernetes.NewForConfigOrDie(cl.RESTConfig(t))
	ns := cl.NewNamespace(t, "tfkept")
	w := newWorkspace(t)
	w.env = append(w.env, "TF_VAR_kubeconfig="+cl.Kubeconfig)
	spec := `apiVersion: khook.io/v1
kind: Khook
metadata: {name: tfkept}
steps:
  - name: inj
    helm:
      chart: ./inj
      namespace: ` + ns + `
      drift:
        ignore: [{paths: [/data/note], target: {kind: ConfigMap}}]
`
	w.writeTree(map[string]string{
		"inj/Chart.yaml":         "apiVersion: v2\nname: inj\nversion: 0.1.0\n",
		"inj/templates/all.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: inj-ca}\ndata: {ca: placeholder, mode: strict, note: chart}\n",
		"spec.yaml":              spec,
		"main.tf":                driftMainTF,
	})
	ctx := context.Background()
	w.must("apply", "-auto-approve")
	patch := func(manager, data string) {
		t.Helper()
		if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "inj-ca", types.MergePatchType, []byte(`{"data":`+data+`}`), metav1.PatchOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	patch("cainjector", `{"ca":"real"}`)
	patch("kubectl-edit", `{"note":"mine"}`)
	out, code := w.run("plan", "-detailed-exitcode")
	if code != 0 {
		t.Fatalf("plan with a kept and an ignored field: exit %d, want 0\n%s", code, out)
	}
	for _, want := range []string{"leaves fields to other writers", "kept: ConfigMap/inj-ca data.ca (written by cainjector)", "ignored: ConfigMap/inj-ca data.note (drift.ignore)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not show %q:\n%s", want, out)
		}
	}
	patch("kubectl-edit", `{"mode":"lax"}`)
	if out, code := w.run("plan", "-detailed-exitcode"); code != 2 || !strings.Contains(out, "repair") {
		t.Errorf("plan after a person's edit: exit %d, want 2 and repair\n%s", code, out)
	}
	w.must("apply", "-auto-approve")
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "inj-ca", metav1.GetOptions{})
	if err != nil || cm.Data["ca"] != "real" || cm.Data["mode"] != "strict" || cm.Data["note"] != "mine" {
		t.Errorf("after the apply: %v %v; want ca and note kept, mode put back", cm.Data, err)
	}
	if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
		t.Errorf("re-plan: exit %d, want 0\n%s", code, out)
	}
}

// writeTree writes files (path relative to the workspace: content) into
// the workspace.
func (w *workspace) writeTree(files map[string]string) {
	w.t.Helper()
	for name, body := range files {
		p := filepath.Join(w.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			w.t.Fatal(err)
		}
		write(w.t, p, body)
	}
}
