//go:build integration

package tfacc

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/testing/testcluster"
	"khook.io/dev/e2e"
)

// TestProviderImport is the import by state record (docs/spec.md 177): a
// spec applied with kubectl-khook outside Terraform is adopted with `tofu
// import khook_spec.boot NAMESPACE/NAME`; the next plan is an update that
// fills in the configuration and resumes every step from the record, its
// apply writes nothing to the cluster, and the plan after it is empty. An
// id that is not namespace/name is refused.
func TestProviderImport(t *testing.T) {
	cl := testcluster.Get(t)
	c := kubernetes.NewForConfigOrDie(cl.RESTConfig(t))
	ns := cl.NewNamespace(t, "tfacc")
	bins, err := e2e.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkspace(t)
	w.env = append(w.env, "TF_VAR_kubeconfig="+cl.Kubeconfig, "TF_VAR_token="+planted)
	spec := filepath.Join(w.dir, "spec.yaml")
	write(t, spec, specText(ns))
	// the cluster exists already: the connection is known
	write(t, filepath.Join(w.dir, "main.tf"), strings.Replace(mainTF("one", true), "terraform_data.cluster.output", "var.kubeconfig", 1))
	mustKhook(t, bins.Kubectl, []string{"KUBECONFIG=" + cl.Kubeconfig, "KHOOK_SECRET_TOKEN=" + planted}, "apply", "-f", spec, "--set", "VALUE=one")
	versions := func() string {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), "tfacc", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sec, err := c.CoreV1().Secrets(ns).Get(context.Background(), "tfacc", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.ResourceVersion + "/" + sec.ResourceVersion
	}
	before := versions()

	if out, code := w.run("import", "khook_spec.boot", "khook-state-tfacc"); code == 0 || !strings.Contains(out, "the import id is the state record's namespace/name") {
		t.Errorf("import of an id without a namespace: exit %d, want the namespace/name error\n%s", code, out)
	}
	id := ns + "/khook-state-tfacc"
	w.must("import", "khook_spec.boot", id)
	if out, code := w.run("plan", "-detailed-exitcode", "-out=import.plan"); code != 2 {
		t.Fatalf("plan after the import: exit %d, want 2 (the configuration fills the resource in)\n%s", code, out)
	}
	got := planSteps(t, w, "import.plan")
	if got["_actions"] != "update" || got["config"] != "skip" || got["token"] != "skip" {
		t.Errorf("plan after the import = %v, want an update resuming (skip) both steps", got)
	}
	w.must("apply", "-auto-approve", "import.plan")
	if after := versions(); after != before {
		t.Errorf("the apply after the import wrote to the cluster: resource versions %s, were %s", after, before)
	}
	if show := w.must("show", "-json"); !strings.Contains(show, `"id":"`+id+`"`) {
		t.Errorf("khook_spec.boot's id is not %s:\n%s", id, show)
	}
	if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("re-plan after the import's apply: exit %d, want 0\n%s", code, out)
	}
	w.assertNoSecret(planted)
}
