package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"khook.io/core/cli"
	"khook.io/core/engine"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/steps/builtin"
)

// TestPlanFatesAsCLI: the provider's steps rows and `kubectl khook plan`
// give every step of the day-2 spec the same fate, action and reason,
// both driven through the engine's one disposition (engine.Dispose):
// selection (--steps, --no-needs), --replace (forced) and triggeredBy
// (conditional), with and without a state record; and each step's fate
// is the one the table below, written by hand, gives it (a fate both
// sides got wrong would otherwise pass). (The live fates, a record's
// resumes and predicted triggers included, are the engine's Plan for
// both: TestPlanAgreesWithRun in core/engine proves them against the run,
// and TestFates there against a table written by hand.)
func TestPlanFatesAsCLI(t *testing.T) {
	// day-2 spec: cilium; cert-manager and config need cilium;
	// restart-web needs and is triggered by config; argocd needs
	// cert-manager; migrate needs argocd. Offline, a state record is not
	// read: nothing resumes, and a step with triggeredBy runs as any step
	// (without a state: block it runs only if a trigger changes).
	const run, forced, notSelected, conditional = "run", "forced", "not selected", "conditional"
	for _, spec := range []string{"", "state: {}\n"} {
		for _, tc := range []struct {
			name string
			sel  engine.SelectOptions
			args []string
			// fates by step: without a state: block, and with one where
			// it differs (nil: the same)
			fates, withState map[string]string
		}{
			{"every step", engine.SelectOptions{}, nil,
				map[string]string{"cilium": run, "cert-manager": run, "config": run, "restart-web": conditional, "argocd": run, "migrate": run},
				map[string]string{"cilium": run, "cert-manager": run, "config": run, "restart-web": run, "argocd": run, "migrate": run}},
			{"steps", engine.SelectOptions{Steps: []string{"argocd"}}, []string{"--steps", "argocd"},
				map[string]string{"cilium": run, "cert-manager": run, "config": notSelected, "restart-web": notSelected, "argocd": run, "migrate": notSelected}, nil},
			{"steps and replace", engine.SelectOptions{Steps: []string{"restart-*"}, Replace: []string{"restart-web", "config"}}, []string{"--steps", "restart-*", "--replace", "restart-web,config"},
				map[string]string{"cilium": run, "cert-manager": notSelected, "config": forced, "restart-web": forced, "argocd": notSelected, "migrate": notSelected}, nil},
			{"no needs", engine.SelectOptions{Steps: []string{"cilium", "config"}, NoNeeds: true}, []string{"--steps", "cilium,config", "--no-needs"},
				map[string]string{"cilium": run, "cert-manager": notSelected, "config": run, "restart-web": notSelected, "argocd": notSelected, "migrate": notSelected}, nil},
			{"replace", engine.SelectOptions{Replace: []string{"migrate"}}, []string{"--replace", "migrate"},
				map[string]string{"cilium": run, "cert-manager": run, "config": run, "restart-web": conditional, "argocd": run, "migrate": forced},
				map[string]string{"cilium": run, "cert-manager": run, "config": run, "restart-web": run, "argocd": run, "migrate": forced}},
		} {
			t.Run(tc.name+map[string]string{"": "", "state: {}\n": " with state"}[spec], func(t *testing.T) {
				text := strings.Replace(day2Spec(t), "steps:\n", spec+"steps:\n", 1)
				// the CLI's plan
				var out, errOut bytes.Buffer
				args := append([]string{"plan", "-f", "-", "--offline", "-o", "json"}, tc.args...)
				if code := cli.Execute(context.Background(), cli.Config{Name: "kubectl khook", In: strings.NewReader(text), Out: &out, ErrOut: &errOut, Steps: builtin.Registry}, args); code != 0 {
					t.Fatalf("plan exit %d: %s", code, errOut.String())
				}
				var cliPlan struct {
					Steps []struct{ Name, Action, Reason string }
				}
				if err := json.Unmarshal(out.Bytes(), &cliPlan); err != nil {
					t.Fatal(err)
				}
				// the provider's rows, from the engine as it calls it
				red := redact.New()
				doc, err := (&load.Loader{Steps: builtin.Registry}).Load(load.Options{File: "-", Stdin: strings.NewReader(text), Redactor: red})
				if err != nil {
					t.Fatal(err)
				}
				// the provider has no selection attributes: the selection
				// is the CLI's, its settings spelled as the CLI's flags
				so := tc.sel
				so.Spelling = func(s engine.Setting) string { return "--" + string(s) }
				sel, err := engine.Resolve(doc, engine.CommandPlan, so)
				if err != nil {
					t.Fatal(err)
				}
				res, err := engine.OfflinePlan(doc, sel, nil)
				if err != nil {
					t.Fatal(err)
				}
				rows, _ := planRows(res.Plan, fatesOf(doc, res), actionsOf(doc, res), nil, false, red)
				if len(rows) != len(cliPlan.Steps) {
					t.Fatalf("%d rows, the CLI plans %d steps", len(rows), len(cliPlan.Steps))
				}
				want := tc.fates
				if spec != "" && tc.withState != nil {
					want = tc.withState
				}
				fates := fatesOf(doc, res)
				for k, r := range rows {
					c := cliPlan.Steps[k]
					if r.Name != c.Name || r.Action != c.Action || r.Reason != c.Reason {
						t.Errorf("provider %s: %s %q; kubectl khook plan %s: %s %q", r.Name, r.Action, r.Reason, c.Name, c.Action, c.Reason)
					}
					if got := fates[r.Name].String(); got != want[r.Name] {
						t.Errorf("%s: fate %s, want %s", r.Name, got, want[r.Name])
					}
				}
				if len(rows) != len(want) {
					t.Errorf("%d rows, the table has %d steps", len(rows), len(want))
				}
			})
		}
	}
}

// day2Spec is the CLI's day-2 test spec.
func day2Spec(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../core/cli/testdata/day2-spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
