package cli

import (
	"os"
	"path/filepath"
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
		// --replace of a step --steps leaves out would do nothing
		{"replace not selected", []string{"plan", "-f", spec, "--offline", "--steps", "config", "--replace", "cert-manager,argocd"},
			[]string{"--replace cert-manager, argocd: not selected by --steps config (the steps it names and the steps they need), so it would not run: name it in --steps too, or leave it out of --replace; nothing was run"}},
		{"replace not selected, no-needs", []string{"diff", "-f", spec, "--steps", "config,cilium", "--no-needs", "--replace", "cilium,restart-web"},
			[]string{"--replace restart-web: not selected by --steps config,cilium (with --no-needs, the steps it names only)"}},
		{"replace not selected, apply", []string{"apply", "-f", spec, "--steps", "config", "--replace", "migrate"}, []string{"--replace migrate: not selected"}},
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

// TestSelectionWhenWarns: a step --steps or --replace names that when:
// excludes is skipped, as when: says, and the command says so on standard
// error (a warning: when: depends on variables), exit 0.
func TestSelectionWhenWarns(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	body := `apiVersion: khook.io/v1
kind: Khook
metadata: {name: w}
steps:
  - name: base
    apply: {manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base}\n"}]}
  - name: optional
    needs: [base]
    when: vars.get("OPT", "off") == "on"
    apply: {manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: opt}\n"}]}
`
	if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"plan", "-f", spec, "--offline", "--steps", "optional"}, `warning: --steps names optional, which when: (vars.get("OPT", "off") == "on") excludes: it is skipped`},
		{[]string{"plan", "-f", spec, "--offline", "--replace", "optional"}, `warning: --replace names optional, which when: (vars.get("OPT", "off") == "on") excludes: it is not re-run`},
	}
	for _, tt := range tests {
		out, errOut, code := runCLI(t, nil, "", tt.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errOut)
		}
		if !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", tt.args, tt.want, errOut)
		}
		if !strings.Contains(out, "when: vars.get") {
			t.Errorf("%v: the plan does not show the exclusion:\n%s", tt.args, out)
		}
	}
	// included: no warning
	if _, errOut, code := runCLI(t, []string{"KHOOK_VAR_OPT=on"}, "", "plan", "-f", spec, "--offline", "--steps", "optional"); code != 0 || strings.Contains(errOut, "warning") {
		t.Errorf("included step: exit %d, stderr %q", code, errOut)
	}
}
