//go:build integration

package patch_test

import (
	"strings"
	"testing"

	khplan "khook.io/core/plan"
	"khook.io/core/testing/steptest"
)

// TestTargetFormsAsKubectl: patch.target takes every form kubectl reads,
// TYPE[.VERSION][.GROUP]/NAME with a resource, singular, short name or
// kind; an unknown type plans unknown and fails with kubectl's message.
func TestTargetFormsAsKubectl(t *testing.T) {
	c, ns := steptest.Setup(t, "patch-forms")
	steptest.Create(t, c, ns, deployment)
	for i, target := range []string{"deployments.v1.apps/web", "Deployment.v1.apps/web", "deployment.v1.apps/web", "deploy/web", "deploy.apps/web", "Deployment.apps/web", "Deployment/web"} {
		label := strings.Repeat("x", i+1)
		req := request(t, c, "name: p\npatch:\n  target: "+target+"\n  namespace: "+ns+"\n  type: merge\n  patch: {metadata: {labels: {form: "+label+"}}}")
		if p := plan(t, req); p.Action.Word != khplan.ActionPatch {
			t.Errorf("%s: plan %+v, want patch", target, p)
		}
		out, err := run(t, req)
		if err != nil {
			t.Errorf("%s: %v", target, err)
			continue
		}
		if out.Message != "Deployment "+ns+"/web patched (merge)" {
			t.Errorf("%s: message %q", target, out.Message)
		}
		if got := get(t, c, "deployments", ns, "web").GetLabels()["form"]; got != label {
			t.Errorf("%s: label form = %q, want %q", target, got, label)
		}
	}
	req := request(t, c, "name: p\npatch:\n  target: deployments.v9.apps/web\n  namespace: "+ns+"\n  patch: {metadata: {labels: {a: b}}}")
	want := `"deployments.v9.apps": the server doesn't have a resource type "deployments" in group "v9.apps"`
	if p := plan(t, req); p.Action.Word != khplan.ActionUnknown || !strings.Contains(p.Reason, want) {
		t.Errorf("plan %+v, want unknown: %s", p, want)
	}
	if _, err := run(t, req); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("run: %v, want %s", err, want)
	}
}
