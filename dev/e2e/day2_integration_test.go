//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/testing/testcluster"
)

// day2Spec is a 12-step bootstrap: ConfigMaps standing for the usual
// components, a Deployment (no replicas: nothing to pull) restarted when
// its ConfigMap changes (triggeredBy), and a Job. %[1]s is the namespace,
// %[2]s the state: line (or nothing).
const day2Spec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: day2}
%[2]s
steps:
  - name: cilium
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cilium}\n"}]}
  - name: dns
    needs: [cilium]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dns}\n"}]}
  - name: policy
    needs: [dns]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: policy}\n"}]}
  - name: cert-manager
    needs: [cilium]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cert-manager}\ndata: {v: '${CM:-1}'}\n"}]}
  - name: argocd
    needs: [cert-manager]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd}\n"}]}
  - name: argocd-apps
    needs: [argocd]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-apps}\n"}]}
  - name: ingress
    needs: [cilium]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ingress}\n"}]}
  - name: monitoring
    needs: [ingress]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: monitoring}\n"}]}
  - name: web
    needs: [ingress]
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
            apiVersion: apps/v1
            kind: Deployment
            metadata: {name: web}
            spec:
              replicas: 0
              selector: {matchLabels: {app: web}}
              template:
                metadata: {labels: {app: web}}
                spec: {containers: [{name: web, image: busybox}]}
  - name: config
    needs: [web]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config}\ndata: {level: '${LEVEL:-info}'}\n"}]}
  - name: restart-web
    needs: [config]
    triggeredBy: [config]
    rollout: {restart: deployment/web, namespace: %[1]s}
  - name: job
    needs: [cert-manager]
    job: {image: busybox, args: ["true"], namespace: %[1]s}
`

// ran reports whether step name made an attempt in r (skipped steps
// that never started have none).
func (r report) ran(t *testing.T, name string) bool {
	t.Helper()
	status, attempts, _, _ := r.step(t, name)
	return attempts > 0 && status == "ok"
}

// ranSteps lists the steps of r that ran.
func (r report) ranSteps() []string {
	var out []string
	for _, s := range r.Steps {
		if s.Attempts > 0 {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out
}

// recordEntries returns each step's record entry as JSON.
func recordEntries(t *testing.T, c kubernetes.Interface, ns, name string) map[string]string {
	t.Helper()
	rec := readRecord(t, c, ns, name)
	if rec == nil {
		t.Fatal("no state record")
	}
	out := map[string]string{}
	for n, e := range rec.Steps {
		b, _ := json.Marshal(e)
		out[n] = string(b)
	}
	return out
}

// sameEntries fails unless the entries of the steps not in touched are
// byte-identical in before and after.
func sameEntries(t *testing.T, before, after map[string]string, touched ...string) {
	t.Helper()
	for n, b := range before {
		if slices.Contains(touched, n) {
			continue
		}
		if after[n] != b {
			t.Errorf("record entry of unselected step %s changed:\nbefore %s\nafter  %s", n, b, after[n])
		}
	}
}

func TestDay2Selection(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "day2")
	spec := writeSpec(t, fmt.Sprintf(day2Spec, ns, "state: {namespace: "+ns+"}"))
	env := kubeEnv(t)
	c := typed(t)
	ctx := context.Background()
	const record = "khook-state-day2"
	cmExists := func(name string) bool {
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	// --no-needs before anything ran: argocd's need is neither selected
	// nor recorded done; nothing runs, the record is not even written
	res := run(t, bins.Kubectl, env, "", "apply", "-f", spec, "--steps", "argocd", "--no-needs")
	if res.Code != 2 || !strings.Contains(res.Stderr, "--no-needs: argocd needs cert-manager, which is neither selected nor recorded done") {
		t.Fatalf("--no-needs: exit %d, want 2 naming the missing need\n%s", res.Code, res.Stderr)
	}
	if cmExists("argocd") || readRecord(t, c, ns, record) != nil {
		t.Fatal("the refused --no-needs run touched the cluster")
	}

	// --steps argocd: argocd and its needs, nothing else
	r, res := applyJSON(t, "apply", spec, env, "--steps", "argocd")
	if res.Code != 0 {
		t.Fatalf("apply --steps argocd: exit %d\n%s", res.Code, res.Stderr)
	}
	if got := r.ranSteps(); !slices.Equal(got, []string{"argocd", "cert-manager", "cilium"}) {
		t.Errorf("apply --steps argocd ran %v, want argocd and its needs", got)
	}
	if _, _, _, skip := r.step(t, "dns"); skip != "not selected" {
		t.Errorf("dns skipped with %q, want \"not selected\"", skip)
	}
	rec := readRecord(t, c, ns, record)
	if len(rec.Steps) != 3 || rec.SpecHash != "" {
		t.Errorf("after a partial first run the record holds %d steps and spec hash %q; want the 3 run and no whole-spec hash:\n%s", len(rec.Steps), rec.SpecHash, recordJSON(rec))
	}

	// the whole spec; its record
	if r, res = applyJSON(t, "apply", spec, env); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	if r.ran(t, "argocd") {
		t.Error("the full apply re-ran argocd, which the record shows done")
	}
	before := recordEntries(t, c, ns, record)

	// --no-needs with the need recorded done: allowed
	if r, res = applyJSON(t, "apply", spec, env, "--steps", "argocd-apps", "--no-needs", "--replace", "argocd-apps"); res.Code != 0 || !r.ran(t, "argocd-apps") || len(r.ranSteps()) != 1 {
		t.Fatalf("--no-needs with the need recorded done: exit %d, ran %v\n%s", res.Code, r.ranSteps(), res.Stderr)
	}
	after := recordEntries(t, c, ns, record)
	sameEntries(t, before, after, "argocd-apps")

	// --replace job: the recorded job runs again, and says why
	jobBefore, err := c.BatchV1().Jobs(ns).Get(ctx, "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, res = applyJSON(t, "apply", spec, env, "--steps", "job", "--replace", "job")
	if res.Code != 0 || !r.ran(t, "job") || r.ran(t, "cert-manager") || r.ran(t, "cilium") {
		t.Fatalf("--replace job: exit %d, ran %v (want the job alone: its needs resume)\n%s", res.Code, r.ranSteps(), res.Stderr)
	}
	for _, s := range r.Steps {
		if s.Name == "job" && !strings.Contains(s.Message, "forced by --replace (the state record had it unchanged)") {
			t.Errorf("job's message %q does not say it was forced", s.Message)
		}
	}
	jobAfter, err := c.BatchV1().Jobs(ns).Get(ctx, "job", metav1.GetOptions{})
	if err != nil || jobAfter.UID == jobBefore.UID {
		t.Errorf("--replace job did not replace the Job (%v)", err)
	}
	sameEntries(t, after, recordEntries(t, c, ns, record), "job")
	after = recordEntries(t, c, ns, record)

	// destroy --steps cert-manager: it and what needs it, nothing else
	r, res = applyJSON(t, "destroy", spec, env, "--steps", "cert-manager", "--yes")
	if strings.Contains(res.Stderr, "unknown flag: --yes") {
		r, res = applyJSON(t, "destroy", spec, env, "--steps", "cert-manager")
	}
	if res.Code != 0 {
		t.Fatalf("destroy --steps cert-manager: exit %d\n%s", res.Code, res.Stderr)
	}
	undone := []string{"argocd", "argocd-apps", "cert-manager", "job"}
	if got := r.ranSteps(); !slices.Equal(got, undone) {
		t.Errorf("destroy --steps cert-manager undid %v, want %v", got, undone)
	}
	for _, cm := range []string{"cert-manager", "argocd", "argocd-apps"} {
		if cmExists(cm) {
			t.Errorf("ConfigMap %s survived destroy --steps cert-manager", cm)
		}
	}
	for _, cm := range []string{"cilium", "dns", "policy", "ingress", "monitoring", "web-config"} {
		if !cmExists(cm) {
			t.Errorf("destroy --steps cert-manager deleted ConfigMap %s", cm)
		}
	}
	// a partial destroy keeps the record, the others' entries as they were
	sameEntries(t, after, recordEntries(t, c, ns, record), undone...)
}

// planFates runs plan -o json and returns each step's action.
func planFates(t *testing.T, spec string, env []string, args ...string) map[string]string {
	t.Helper()
	res := run(t, bins.Kubectl, env, "", append([]string{"plan", "-f", spec, "-o", "json"}, args...)...)
	var p struct {
		Steps []struct{ Name, Action, Reason string }
	}
	if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil || res.Code != 0 {
		t.Fatalf("plan: exit %d, %v\n%s\n%s", res.Code, err, res.Stdout, res.Stderr)
	}
	out := map[string]string{}
	for _, s := range p.Steps {
		out[s.Name] = s.Action
	}
	return out
}

// diffFates runs diff and returns, per step, whether it is skipped
// (excluded, not selected, not triggered, resumed).
func diffFates(t *testing.T, spec string, env []string, args ...string) map[string]bool {
	t.Helper()
	res := run(t, bins.Kubectl, env, "", append([]string{"diff", "-f", spec}, args...)...)
	if res.Code > 1 {
		t.Fatalf("diff: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(res.Stdout, "\n") {
		rest, ok := strings.CutPrefix(line, "=== ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, " ")
		_, headline, _ := strings.Cut(rest, "): ")
		out[name] = strings.HasPrefix(headline, "skipped:") || strings.HasPrefix(headline, "resumed")
	}
	return out
}

// agree runs plan and diff, then apply, with args, and fails unless all
// three give every step the same fate (skipped or run); it returns the
// apply's report.
func agree(t *testing.T, spec string, env []string, args ...string) report {
	t.Helper()
	plan := planFates(t, spec, env, args...)
	diff := diffFates(t, spec, env, args...)
	r, res := applyJSON(t, "apply", spec, env, args...)
	if res.Code != 0 {
		t.Fatalf("apply %v: exit %d\n%s", args, res.Code, res.Stderr)
	}
	for _, s := range r.Steps {
		applySkips := s.Status == "skipped" && s.Attempts == 0
		if planSkips := plan[s.Name] == "skip"; planSkips != applySkips || diff[s.Name] != applySkips {
			t.Errorf("step %s: apply %s (attempts %d, %s), plan %q, diff skipped %v: they disagree", s.Name, s.Status, s.Attempts, s.SkipReason, plan[s.Name], diff[s.Name])
		}
	}
	return r
}

// TestDay2Triggers: restart-web (triggeredBy: [config]) restarts exactly
// when the ConfigMap's data changed, with and without state:, over three
// runs (change, no change, change); plan predicts each, and plan, diff
// and apply agree on every step's fate.
func TestDay2Triggers(t *testing.T) {
	for _, withState := range []bool{true, false} {
		t.Run(fmt.Sprintf("state=%v", withState), func(t *testing.T) {
			ns := testcluster.Get(t).NewNamespace(t, "trig")
			stateLine := ""
			if withState {
				stateLine = "state: {namespace: " + ns + "}"
			}
			spec := writeSpec(t, fmt.Sprintf(day2Spec, ns, stateLine))
			c := typed(t)
			restartedAt := func() string {
				d, err := c.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"]
			}
			// the first run creates everything: config changed, so the
			// restart runs
			r, res := applyJSON(t, "apply", spec, kubeEnv(t, "KHOOK_VAR_LEVEL=info"))
			if res.Code != 0 || !r.ran(t, "restart-web") {
				t.Fatalf("first run: restart-web did not run: %+v", r.Steps)
			}
			for k, tt := range []struct {
				level   string
				restart bool
			}{{"debug", true}, {"debug", false}, {"warn", true}} {
				env := kubeEnv(t, "KHOOK_VAR_LEVEL="+tt.level)
				wantPlan := "skip"
				if tt.restart {
					wantPlan = "restart"
				}
				if got := planFates(t, spec, env)["restart-web"]; got != wantPlan {
					t.Errorf("run %d (level %s): plan predicts restart-web %q, want %q", k+1, tt.level, got, wantPlan)
				}
				// restartedAt has a resolution of a second: an old value
				// makes every restart visible, however fast the runs
				const old = "2000-01-01T00:00:00Z"
				patch := `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"` + old + `"}}}}}`
				if _, err := c.AppsV1().Deployments(ns).Patch(context.Background(), "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
				was := restartedAt()
				r := agree(t, spec, env)
				if r.ran(t, "restart-web") != tt.restart || (restartedAt() != was) != tt.restart {
					_, _, _, skip := r.step(t, "restart-web")
					t.Errorf("run %d (level %s): restart-web ran %v (%s), annotation %q -> %q; want it run %v", k+1, tt.level, r.ran(t, "restart-web"), skip, was, restartedAt(), tt.restart)
				}
			}
		})
	}
}
