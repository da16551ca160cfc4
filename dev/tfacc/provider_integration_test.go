//go:build integration

package tfacc

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/testing/testcluster"
)

// planted is the secret no output, log or file may show.
const planted = "planted-tf-secret-7c1e9a"

// specText is the spec the tests apply: a ConfigMap holding VALUE and a
// Secret holding the secret TOKEN, with a state record in ns.
func specText(ns string) string {
	return `apiVersion: khook.io/v1
kind: Khook
metadata:
  name: tfacc
state:
  namespace: ` + ns + `
steps:
  - name: config
    apply:
      namespace: ` + ns + `
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: tfacc
            data:
              value: ${VALUE}
  - name: token
    apply:
      namespace: ` + ns + `
      manifests:
        - inline: |
            apiVersion: v1
            kind: Secret
            metadata:
              name: tfacc
            stringData:
              token: ${TOKEN}
`
}

// mainTF is the configuration: terraform_data stands in for the cluster
// module, its output (unknown at plan time) is the connection.
func mainTF(value string, destroyOnDelete bool) string {
	return `terraform {
  required_providers {
    khook = { source = "khook-io/khook" }
  }
}
variable "kubeconfig" { type = string }
variable "token" {
  type      = string
  sensitive = true
  # an ephemeral variable is not stored in plan files either (a root
  # module's variables are, even sensitive ones)
  ephemeral = true
}
resource "terraform_data" "cluster" {
  input = var.kubeconfig
}
resource "khook_spec" "boot" {
  spec              = file("${path.module}/spec.yaml")
  base_dir          = path.module
  vars              = { VALUE = "` + value + `" }
  secrets           = { TOKEN = var.token }
  secrets_version   = "1"
  destroy_on_delete = ` + fmt.Sprint(destroyOnDelete) + `
  kubernetes {
    config_path = terraform_data.cluster.output
  }
}
`
}

// planSteps is the planned steps of khook_spec.boot in plan file out.
func planSteps(t *testing.T, w *workspace, out string) map[string]string {
	t.Helper()
	js := w.must("show", "-json", out)
	var p struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions []string `json:"actions"`
				After   struct {
					Steps []struct{ Name, Action, Reason string } `json:"steps"`
				} `json:"after"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatalf("tofu show -json: %v\n%s", err, js)
	}
	got := map[string]string{}
	for _, rc := range p.ResourceChanges {
		if rc.Address != "khook_spec.boot" {
			continue
		}
		got["_actions"] = strings.Join(rc.Change.Actions, ",")
		for _, s := range rc.Change.After.Steps {
			got[s.Name] = s.Action
		}
	}
	return got
}

func configValue(t *testing.T, c kubernetes.Interface, ns string) string {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), "tfacc", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["value"]
}

// TestProviderOneApplyCreatesAndBootstraps is acceptance items (a), (f),
// (b) and (e): one apply creates the "cluster" and bootstraps it (offline
// plan first), a re-plan is empty, a changed var plans and applies exactly
// its step, destroy runs khook's destroy; the planted secret is in no
// output, trace log, plan or state file.
func TestProviderOneApplyCreatesAndBootstraps(t *testing.T) {
	cl := testcluster.Get(t)
	c := kubernetes.NewForConfigOrDie(cl.RESTConfig(t))
	ns := cl.NewNamespace(t, "tfacc")
	w := newWorkspace(t)
	w.env = append(w.env, "TF_VAR_kubeconfig="+cl.Kubeconfig, "TF_VAR_token="+planted)
	write(t, filepath.Join(w.dir, "spec.yaml"), specText(ns))
	write(t, filepath.Join(w.dir, "main.tf"), mainTF("one", true))

	// (a) the connection is unknown at plan time: khook plans offline
	out := w.must("plan", "-out=create.plan")
	if !strings.Contains(out, "khook_spec.boot will be created") {
		t.Fatalf("plan does not create khook_spec.boot:\n%s", out)
	}
	if got := planSteps(t, w, "create.plan"); got["config"] != "run" || got["token"] != "run" {
		t.Errorf("offline plan's steps = %v, want both run", got)
	}
	w.must("apply", "-auto-approve", "create.plan")
	if v := configValue(t, c, ns); v != "one" {
		t.Fatalf("ConfigMap value = %q after apply, want one", v)
	}
	sec, err := c.CoreV1().Secrets(ns).Get(context.Background(), "tfacc", metav1.GetOptions{})
	if err != nil || string(sec.Data["token"]) != planted {
		t.Fatalf("the Secret does not hold the planted secret (%v): the secret was not passed", err)
	}
	// a second plan of the applied, unchanged spec is empty
	if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("re-plan: exit %d, want 0 (no changes)\n%s", code, out)
	}

	// (b) a changed var plans exactly the step it changes
	write(t, filepath.Join(w.dir, "main.tf"), mainTF("two", true))
	w.must("plan", "-out=update.plan")
	got := planSteps(t, w, "update.plan")
	if got["_actions"] != "update" || got["config"] == "skip" || got["token"] != "skip" {
		t.Errorf("plan after changing VALUE = %v, want an update running config only", got)
	}
	w.must("apply", "-auto-approve", "update.plan")
	if v := configValue(t, c, ns); v != "two" {
		t.Fatalf("ConfigMap value = %q after the update, want two", v)
	}
	if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("re-plan after the update: exit %d, want 0\n%s", code, out)
	}

	// (e) destroy runs khook's destroy
	w.must("destroy", "-auto-approve")
	if v := configValue(t, c, ns); v != "<none>" {
		t.Errorf("ConfigMap still there after tofu destroy (value %q)", v)
	}

	// (f) the planted secret is nowhere
	w.assertNoSecret(planted)
}

// TestProviderDestroyOnDeleteFalse is acceptance item (e)'s second half:
// with destroy_on_delete = false, tofu destroy leaves the cluster alone.
func TestProviderDestroyOnDeleteFalse(t *testing.T) {
	cl := testcluster.Get(t)
	c := kubernetes.NewForConfigOrDie(cl.RESTConfig(t))
	ns := cl.NewNamespace(t, "tfacc")
	w := newWorkspace(t)
	w.env = append(w.env, "TF_VAR_kubeconfig="+cl.Kubeconfig, "TF_VAR_token="+planted)
	write(t, filepath.Join(w.dir, "spec.yaml"), specText(ns))
	write(t, filepath.Join(w.dir, "main.tf"), mainTF("kept", false))
	w.must("apply", "-auto-approve")
	w.must("destroy", "-auto-approve")
	if v := configValue(t, c, ns); v != "kept" {
		t.Errorf("ConfigMap value = %q after destroy with destroy_on_delete = false, want kept", v)
	}
	w.assertNoSecret(planted)
}

// TestProviderFailedStepThenResume is acceptance item (d): a failing step
// fails the apply naming it and leaves no resource in the state; the fixed
// spec's next apply succeeds.
func TestProviderFailedStepThenResume(t *testing.T) {
	cl := testcluster.Get(t)
	c := kubernetes.NewForConfigOrDie(cl.RESTConfig(t))
	ns := cl.NewNamespace(t, "tfacc")
	w := newWorkspace(t)
	w.env = append(w.env, "TF_VAR_kubeconfig="+cl.Kubeconfig, "TF_VAR_token="+planted)
	broken := strings.Replace(specText(ns), "  - name: token\n    apply:\n      namespace: "+ns, "  - name: token\n    apply:\n      namespace: "+ns+"-missing", 1)
	write(t, filepath.Join(w.dir, "spec.yaml"), broken)
	write(t, filepath.Join(w.dir, "main.tf"), mainTF("one", true))
	out, code := w.run("apply", "-auto-approve")
	if code == 0 || !strings.Contains(out, "step token (apply) failed") {
		t.Fatalf("apply of a failing step: exit %d, want a failure naming step token\n%s", code, out)
	}
	if list := w.must("state", "list"); strings.Contains(list, "khook_spec.boot") {
		t.Errorf("a failed create left khook_spec.boot in the state:\n%s", list)
	}
	if v := configValue(t, c, ns); v != "one" {
		t.Errorf("ConfigMap value = %q after the failed apply, want one (the step before the failure ran)", v)
	}
	write(t, filepath.Join(w.dir, "spec.yaml"), specText(ns))
	w.must("apply", "-auto-approve")
	if _, err := c.CoreV1().Secrets(ns).Get(context.Background(), "tfacc", metav1.GetOptions{}); err != nil {
		t.Errorf("the fixed spec's apply did not create the Secret: %v", err)
	}
	if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("re-plan after the fixed apply: exit %d, want 0\n%s", code, out)
	}
	w.assertNoSecret(planted)
}
