package cli

import (
	"strings"
	"testing"
)

// TestDiffExitCodesOffline: diff's exit codes without a cluster follow
// kubectl diff's convention: 2 for an invalid spec or flags, 3 (never 1,
// which means differences) for every other error.
func TestDiffExitCodesOffline(t *testing.T) {
	bad := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps: [{name: a}]\n"
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		inErr string
	}{
		{"no file flag", "", []string{"diff"}, 2, "no spec given"},
		{"invalid spec", bad, []string{"diff", "-f", "-"}, 2, "a step needs exactly one action key"},
		{"unknown flag", "", []string{"diff", "--nope"}, 2, "unknown flag: --nope"},
		{"negative parallelism", "", []string{"diff", "-f", "testdata/golden-spec.yaml", "--parallelism", "-1"}, 2, "--parallelism"},
		{"missing file", "", []string{"diff", "-f", "testdata/nope.yaml"}, ExitDiffError, "read spec"},
		{"no cluster", "", []string{"diff", "-f", "testdata/golden-spec.yaml"}, ExitDiffError, "kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			if !strings.Contains(errOut, tt.inErr) {
				t.Fatalf("stderr lacks %q:\n%s", tt.inErr, errOut)
			}
		})
	}
}

func TestDiffHelpStatesExitCodes(t *testing.T) {
	out, _, code := runCLI(t, nil, "", "diff", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Exit code 0: no differences; 1: differences; 2: invalid spec", "3:", "KUBECTL_EXTERNAL_DIFF"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff --help lacks %q:\n%s", want, out)
		}
	}
}
