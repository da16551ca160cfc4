//go:build integration

package apply_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/step"
	"khook.io/core/steps/apply"
)

func plan(t *testing.T, req *step.Request) step.Prediction {
	t.Helper()
	p, err := step.PlanStep(t.Context(), apply.New(apply.Options{}), req)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return p
}

// TestApplyKeepsControllersFields: an apply: step whose ConfigMap's
// data.ca a controller (field manager cainjector) fills, client-side and
// server-side: re-applies keep the controller's value and say so (plan
// unchanged, the outcome names the kept field); a person's kubectl edit
// of another key is put back; drift: {mode: warn} reports it and leaves
// it; an ignore: rule leaves it without a word of drift; a change of the
// manifest is still applied in warn mode; mode off applies the manifest
// whole, as kubectl apply does (client-side, the controller's value put
// back too; server-side, a conflict, as kubectl apply --server-side's).
func TestApplyKeepsControllersFields(t *testing.T) {
	for _, serverSide := range []bool{false, true} {
		t.Run("serverSide="+strconv.FormatBool(serverSide), func(t *testing.T) {
			e := newEnv(t)
			cm := func(level string) string {
				return configMap("inj", map[string]string{"ca": "placeholder", "mode": "strict", "level": level})
			}
			req := func(extra, level string) *step.Request {
				return e.request(stepYAML("inj", "namespace: "+e.ns+"\nserverSide: "+strconv.FormatBool(serverSide)+"\n"+extra, inline(cm(level))))
			}
			patch := func(manager, data string) {
				t.Helper()
				if _, err := e.res(cmGVR, e.ns).Patch(context.Background(), "inj", types.MergePatchType, []byte(`{"data":`+data+`}`), metav1.PatchOptions{FieldManager: manager}); err != nil {
					t.Fatal(err)
				}
			}
			data := func() map[string]string {
				d, _, _ := unstructured.NestedStringMap(e.get(cmGVR, e.ns, "inj").Object, "data")
				return d
			}
			kept := "kept: ConfigMap/inj data.ca (written by cainjector)"

			run(t, req("", "info"))
			for i := range 3 {
				patch("cainjector", `{"ca":"real-`+strconv.Itoa(i)+`"}`)
				if p := plan(t, req("", "info")); p.Action.Word != "unchanged" || !slices.Contains(p.Kept, kept) {
					t.Errorf("re-apply %d: plan %s %q kept %q", i, p.Action, p.Details, p.Kept)
				}
				out := run(t, req("", "info"))
				if out.Changed || !strings.Contains(out.Message, kept) {
					t.Errorf("re-apply %d: %+v", i, out)
				}
				if d := data(); d["ca"] != "real-"+strconv.Itoa(i) {
					t.Errorf("re-apply %d: data.ca %q", i, d["ca"])
				}
			}

			// a person's edit of another key: put back, the controller's kept
			patch("kubectl-edit", `{"mode":"lax"}`)
			if p := plan(t, req("", "info")); p.Action.Word != "configure" {
				t.Errorf("plan after the edit: %s %q", p.Action, p.Details)
			}
			if out := run(t, req("", "info")); !out.Changed {
				t.Errorf("apply after the edit: %+v", out)
			}
			if d := data(); d["mode"] != "strict" || d["ca"] != "real-2" {
				t.Errorf("after the repair: %v", d)
			}

			// warn: reported, left; a change of the manifest still applied
			patch("kubectl-edit", `{"mode":"lax"}`)
			left := "drift: ConfigMap/inj data.mode (left as it is: drift mode warn)"
			if p := plan(t, req("drift: {mode: warn}", "info")); p.Action.Word != "unchanged" || !slices.Contains(p.Drift, left) {
				t.Errorf("plan in warn mode: %s %q drift %q", p.Action, p.Details, p.Drift)
			}
			out := run(t, req("drift: {mode: warn}", "debug"))
			if !out.Changed || !slices.Contains(out.Drift, left) || !strings.Contains(out.Message, left) {
				t.Errorf("apply in warn mode: %+v", out)
			}
			if d := data(); d["mode"] != "lax" || d["level"] != "debug" || d["ca"] != "real-2" {
				t.Errorf("after warn: %v, want mode left lax, level applied", d)
			}

			// ignore: left, no drift said
			ign := "drift: {ignore: [{paths: [/data/mode], target: {kind: ConfigMap}}]}"
			out = run(t, req(ign, "debug"))
			if out.Changed || len(out.Drift) > 0 || !slices.Contains(out.Kept, "ignored: ConfigMap/inj data.mode (drift.ignore)") {
				t.Errorf("apply with the ignore rule: %+v", out)
			}

			// off: the manifest whole, as kubectl apply: client-side, the
			// others' values put back; server-side, a conflict with each
			// other manager, as kubectl apply --server-side's
			if serverSide {
				err := runErr(t, req("drift: {mode: off}", "debug"))
				if !strings.Contains(err.Error(), `.data.ca is owned by field manager "cainjector"`) || !strings.Contains(err.Error(), `.data.mode is owned by field manager "kubectl-edit"`) {
					t.Errorf("apply in off mode: %v", err)
				}
				return
			}
			out = run(t, req("drift: {mode: off}", "debug"))
			if !out.Changed || len(out.Kept) > 0 {
				t.Errorf("apply in off mode: %+v", out)
			}
			if d := data(); d["mode"] != "strict" || d["ca"] != "placeholder" {
				t.Errorf("after off: %v", d)
			}
		})
	}
}
