package cli

import (
	"strings"
	"testing"
)

// TestDay2PlanGolden: the offline plan's wording of a selection
// (--steps, --no-needs), of --replace and of triggeredBy.
func TestDay2PlanGolden(t *testing.T) {
	spec := "testdata/day2-spec.yaml"
	tests := []struct {
		golden string
		args   []string
	}{
		{"plan-day2.txt", []string{"plan", "-f", spec, "--offline"}},
		{"plan-day2-steps.txt", []string{"plan", "-f", spec, "--offline", "--steps", "argocd"}},
		{"plan-day2-glob-replace.txt", []string{"plan", "-f", spec, "--offline", "--steps", "restart-*", "--replace", "restart-web,config"}},
		{"plan-day2-no-needs.txt", []string{"plan", "-f", spec, "--offline", "--steps", "cilium,config", "--no-needs"}},
		{"graph-day2-steps.mmd", []string{"graph", "-f", spec, "--steps", "cert-manager"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, "", tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, tt.golden, out)
		})
	}
}

// TestSelectionErrors: a selection that cannot be honoured is refused
// before anything runs, exit 2, naming every problem.
func TestSelectionErrors(t *testing.T) {
	spec := "testdata/day2-spec.yaml"
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no match", []string{"plan", "-f", spec, "--offline", "--steps", "argo,web-*"}, []string{`--steps: "argo", "web-*" matches no step; the spec's steps are: cilium, cert-manager, config, restart-web, argocd, migrate`}},
		{"bad replace", []string{"plan", "-f", spec, "--offline", "--replace", "nope"}, []string{`--replace: "nope" matches no step`}},
		{"empty steps", []string{"apply", "-f", spec, "--steps", ""}, []string{"--steps was given an empty value"}},
		{"empty replace", []string{"diff", "-f", spec, "--replace", ","}, []string{"--replace was given an empty value"}},
		{"no-needs alone", []string{"plan", "-f", spec, "--no-needs"}, []string{"--no-needs needs --steps"}},
		{"no-needs missing need", []string{"plan", "-f", spec, "--offline", "--steps", "argocd", "--no-needs"}, []string{"--no-needs: argocd needs cert-manager, which is not selected"}},
		{"destroy has no replace", []string{"destroy", "-f", spec, "--replace", "x"}, []string{"unknown flag: --replace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, "", tt.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}
