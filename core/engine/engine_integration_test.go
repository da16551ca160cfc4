//go:build integration

package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/run"
	"khook.io/core/steps/builtin"
	"khook.io/core/testing/testcluster"
	"khook.io/core/vars"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// fatesSpec has a state record, a trigger (config) and the step it
// triggers (restart-web), and steps beside them; LEVEL is config's input.
const fatesSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: fates}
state: {namespace: %[1]s}
steps:
  - name: base
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base}\n"}]}
  - name: web
    needs: [base]
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
  - name: other
    needs: [base]
    apply: {namespace: %[1]s, manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"}]}
`

// TestPlanAgreesWithRun: the live plan (kubectl khook plan's and the
// provider's: engine.Cluster.Plan) and the run of apply decide every step
// of a day-2 spec alike, on a real record: resumed, not selected, forced,
// and a conditional step the plan predicts triggered or not, as the run
// then does.
func TestPlanAgreesWithRun(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t, "fates")
	ctx := context.Background()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &c.Kubeconfig
	connect := func(level string, sel SelectOptions) *Cluster {
		t.Helper()
		red := redact.New()
		doc, err := (&load.Loader{Steps: builtin.Registry}).Load(load.Options{File: "-", Stdin: strings.NewReader(fmt.Sprintf(fatesSpec, ns)), Redactor: red,
			Vars: vars.Options{Set: []string{"LEVEL=" + level}, VarPrefix: vars.DefaultVarPrefix, SecretPrefix: vars.DefaultSecretPrefix}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Resolve(doc, CommandApply, sel)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := (&Engine{Steps: builtin.Registry, Redactor: red}).Connect(ctx, doc, Target{Getter: flags}, Options{Selection: s})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	// fates is each step's plan fate and run fate, "name plan/run"
	fates := func(cl *Cluster) (plan map[string]Fate, r *Run) {
		t.Helper()
		res, err := NewPlan(cl).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, err = cl.Begin(ctx, CommandApply, 0)
		if err != nil {
			t.Fatal(err)
		}
		plan = map[string]Fate{}
		for i, st := range cl.Doc().Spec.Steps {
			pf, rf := res.Dispositions[i].Fate, r.Dispositions()[i].Fate
			plan[st.Name] = pf
			agree := pf == rf || rf == FateConditional && (pf == FateTriggered || pf == FateNotTriggered)
			if !agree {
				t.Errorf("%s: plan %s, run %s", st.Name, pf, rf)
			}
		}
		return plan, r
	}
	execute := func(r *Run) *run.Result {
		t.Helper()
		defer r.Release()
		res, err := r.Execute(ctx, nil, 4)
		if err != nil || res == nil || res.Status != run.RunOK {
			t.Fatalf("run: %v %+v", err, res)
		}
		return res
	}
	ran := func(res *run.Result, name string) bool {
		for _, s := range res.Steps {
			if s.Name == name {
				return s.Attempts > 0
			}
		}
		return false
	}

	// no record: every step runs (restart-web with state: and no record
	// runs as any step)
	plan, r := fates(connect("info", SelectOptions{}))
	for name, f := range plan {
		if f != FateRun {
			t.Errorf("first apply: %s %s, want run", name, f)
		}
	}
	execute(r)

	// unchanged: every step resumes, restart-web is not triggered
	plan, r = fates(connect("info", SelectOptions{}))
	if plan["base"] != FateResume || plan["config"] != FateResume || plan["restart-web"] != FateNotTriggered {
		t.Errorf("unchanged re-plan: %v", plan)
	}
	if res := execute(r); ran(res, "restart-web") || ran(res, "config") {
		t.Errorf("unchanged re-apply ran steps: %+v", res.Steps)
	}

	// config changed: it runs, and the plan predicts restart-web
	// triggered, which the run then runs
	plan, r = fates(connect("debug", SelectOptions{}))
	if plan["config"] != FateRun || plan["restart-web"] != FateTriggered || plan["base"] != FateResume {
		t.Errorf("changed config: %v", plan)
	}
	if res := execute(r); !ran(res, "restart-web") || !ran(res, "config") || ran(res, "base") {
		t.Errorf("changed config: ran %+v", res.Steps)
	}

	// --steps other --replace other: others not selected, other forced
	plan, r = fates(connect("debug", SelectOptions{Steps: []string{"other"}, Replace: []string{"other"}}))
	if plan["other"] != FateForced || plan["config"] != FateNotSelected || plan["base"] != FateResume {
		t.Errorf("--steps other --replace other: %v", plan)
	}
	if res := execute(r); !ran(res, "other") || ran(res, "base") {
		t.Errorf("--replace other: ran %+v", res.Steps)
	}
}
