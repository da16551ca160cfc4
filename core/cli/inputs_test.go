package cli

import "testing"

// A spec that enables state: plan says which steps depend on remote
// content the input hash cannot see.
func TestGoldenPlanHashCannotSee(t *testing.T) {
	spec := "testdata/golden-state-spec.yaml"
	for name, args := range map[string][]string{
		"plan-state.txt":  {"plan", "-f", spec, "--offline"},
		"plan-state.json": {"plan", "-f", spec, "--offline", "-o", "json"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, "", args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, name, out)
		})
	}
}
