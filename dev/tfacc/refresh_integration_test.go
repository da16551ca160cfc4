//go:build integration

package tfacc

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/state"
	"khook.io/core/testing/testcluster"
	"khook.io/dev/e2e"
)

// driftSteps is the refreshed steps of khook_spec.boot in plan file out
// (its resource_drift: what refresh found changed outside OpenTofu).
func driftSteps(t *testing.T, w *workspace, out string) map[string]string {
	t.Helper()
	js := w.must("show", "-json", out)
	var p struct {
		ResourceDrift []struct {
			Address string `json:"address"`
			Change  struct {
				After struct {
					Steps []struct{ Name, Action string } `json:"steps"`
				} `json:"after"`
			} `json:"change"`
		} `json:"resource_drift"`
	}
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatalf("tofu show -json: %v\n%s", err, js)
	}
	got := map[string]string{}
	for _, d := range p.ResourceDrift {
		if d.Address == "khook_spec.boot" {
			for _, s := range d.Change.After.Steps {
				got[s.Name] = s.Action
			}
		}
	}
	return got
}

// TestProviderRefreshShowsOutOfBandDeletes is acceptance item (c). Read
// refreshes steps from the state record (docs/spec.md 173), so "a step
// deleted out of band" is one whose record entry a change outside
// Terraform took from succeeded: `khook destroy --steps` (the entry says
// skipped, "undone by destroy"), a khook apply that failed at it (failed),
// or the record deleted or edited (no entry: missing). An object deleted
// behind a step the record still has as succeeded is, as the spec says of
// resume, not seen (decision 172). Each case applies, changes the cluster
// or the record outside Terraform, then: the plan's refresh (its
// resource_drift) shows each step as the record has it, the plan is an
// update running exactly the steps the record no longer has as done, the
// apply runs them, and the next plan is empty.
func TestProviderRefreshShowsOutOfBandDeletes(t *testing.T) {
	cl := testcluster.Get(t)
	c := kubernetes.NewForConfigOrDie(cl.RESTConfig(t))
	bins, err := e2e.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// outOfBand changes the cluster outside Terraform: khook (the
		// built kubectl-khook, env its environment) on the applied spec
		// (spec, in namespace ns), or the record itself
		outOfBand func(t *testing.T, spec, ns string, env []string)
		// refreshed is each step's action after refresh ("" for as
		// applied), reruns the steps the plan runs again
		refreshed map[string]string
		reruns    []string
	}{
		{
			name: "khook destroy --steps token",
			outOfBand: func(t *testing.T, spec, ns string, env []string) {
				mustKhook(t, bins.Kubectl, env, "destroy", "-f", spec, "--steps", "token", "--yes", "--set", "VALUE=one")
				if _, err := c.CoreV1().Secrets(ns).Get(context.Background(), "tfacc", metav1.GetOptions{}); err == nil {
					t.Fatal("destroy --steps token left the Secret")
				}
			},
			refreshed: map[string]string{"config": "", "token": state.StepSkipped},
			reruns:    []string{"token"},
		},
		{
			name: "a khook apply failed at token",
			outOfBand: func(t *testing.T, spec, ns string, env []string) {
				broken := filepath.Join(t.TempDir(), "broken.yaml")
				write(t, broken, strings.Replace(specText(ns), "  - name: token\n    apply:\n      namespace: "+ns, "  - name: token\n    apply:\n      namespace: "+ns+"-missing", 1))
				if res := khook(t, bins.Kubectl, env, "apply", "-f", broken, "--steps", "token", "--set", "VALUE=one"); res.Code == 0 {
					t.Fatalf("the broken apply succeeded:\n%s%s", res.Stdout, res.Stderr)
				}
			},
			refreshed: map[string]string{"config": "", "token": state.StepFailed},
			reruns:    []string{"token"},
		},
		{
			name: "the state record deleted",
			outOfBand: func(t *testing.T, spec, ns string, env []string) {
				if err := c.CoreV1().Secrets(ns).Delete(context.Background(), "khook-state-tfacc", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			refreshed: map[string]string{"config": "missing", "token": "missing"},
			reruns:    []string{"config", "token"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := cl.NewNamespace(t, "tfacc")
			w := newWorkspace(t)
			w.env = append(w.env, "TF_VAR_kubeconfig="+cl.Kubeconfig, "TF_VAR_token="+planted)
			spec := filepath.Join(w.dir, "spec.yaml")
			write(t, spec, specText(ns))
			write(t, filepath.Join(w.dir, "main.tf"), mainTF("one", true))
			w.must("apply", "-auto-approve")
			if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
				t.Fatalf("re-plan: exit %d, want 0\n%s", code, out)
			}
			applied := w.must("show", "-json")

			tc.outOfBand(t, spec, ns, []string{"KUBECONFIG=" + cl.Kubeconfig, "KHOOK_SECRET_TOKEN=" + planted})

			if out, code := w.run("plan", "-detailed-exitcode", "-out=drift.plan"); code != 2 {
				t.Fatalf("plan after the out-of-band change: exit %d, want 2 (a diff)\n%s", code, out)
			}
			refreshed := driftSteps(t, w, "drift.plan")
			for step, want := range tc.refreshed {
				if want == "" {
					want = appliedAction(t, applied, step)
				}
				if refreshed[step] != want {
					t.Errorf("refreshed steps = %v, want %s %s", refreshed, step, want)
				}
			}
			planned := planSteps(t, w, "drift.plan")
			if planned["_actions"] != "update" {
				t.Errorf("plan's actions = %s, want update", planned["_actions"])
			}
			for step := range tc.refreshed {
				if rerun := slices.Contains(tc.reruns, step); (planned[step] != "skip") != rerun {
					t.Errorf("planned steps = %v, want %s to run again: %v", planned, step, rerun)
				}
			}
			w.must("apply", "-auto-approve", "drift.plan")
			sec, err := c.CoreV1().Secrets(ns).Get(context.Background(), "tfacc", metav1.GetOptions{})
			if err != nil || string(sec.Data["token"]) != planted {
				t.Fatalf("the apply did not run token again: %v", err)
			}
			if out, code := w.run("plan", "-detailed-exitcode"); code != 0 {
				t.Fatalf("re-plan after the apply: exit %d, want 0\n%s", code, out)
			}
			w.assertNoSecret(planted)
		})
	}
}

// appliedAction is step's action in khook_spec.boot's steps in the state
// tofu show -json printed (js).
func appliedAction(t *testing.T, js, step string) string {
	t.Helper()
	var st struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Address string `json:"address"`
					Values  struct {
						Steps []struct{ Name, Action string } `json:"steps"`
					} `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatalf("tofu show -json: %v", err)
	}
	for _, r := range st.Values.RootModule.Resources {
		for _, s := range r.Values.Steps {
			if r.Address == "khook_spec.boot" && s.Name == step {
				return s.Action
			}
		}
	}
	t.Fatalf("no step %s in khook_spec.boot's state", step)
	return ""
}

// mustKhook runs the built kubectl-khook and fails the test unless it
// exits 0.
func mustKhook(t *testing.T, bin string, env []string, args ...string) {
	t.Helper()
	if res := khook(t, bin, env, args...); res.Code != 0 {
		t.Fatalf("kubectl-khook %s: exit %d\n%s%s", strings.Join(args, " "), res.Code, res.Stdout, res.Stderr)
	}
}

// khook runs the built kubectl-khook.
func khook(t *testing.T, bin string, env []string, args ...string) e2e.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := e2e.Run(ctx, t.TempDir(), bin, env, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
