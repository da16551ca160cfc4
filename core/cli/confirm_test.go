package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/kube"
	"khook.io/core/redact"
)

// destroy asks first: without a terminal it refuses without --yes (exit
// 2, naming --yes) before touching any cluster, after the spec's own
// problems; --dry-run and --yes go on to the cluster.
func TestDestroyAsksFirst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   string
		flags  DestroyFlags
		code   int
		want   string
		noKube bool
	}{
		{"no terminal, no --yes", "testdata/golden-spec.yaml", DestroyFlags{}, ExitInvalid, "pass --yes", false},
		{"no terminal, --force-crds is not --yes", "testdata/golden-spec.yaml", DestroyFlags{ForceCRDs: true}, ExitInvalid, "pass --yes", false},
		{"an invalid spec first", "", DestroyFlags{}, -1, `bogus: unknown field`, false},
		{"--yes", "testdata/golden-spec.yaml", DestroyFlags{Yes: true}, 0, "", true},
		{"--dry-run", "testdata/golden-spec.yaml", DestroyFlags{DryRun: true}, 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			f := NewRunFlags()
			f.Spec.File = tc.spec
			if tc.spec == "" {
				f.Spec.File = filepath.Join(t.TempDir(), "bad.yaml")
				bad := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nbogus: 1\nsteps: [{name: a, wait: {for: delete, on: pods}}]\n"
				if err := os.WriteFile(f.Spec.File, []byte(bad), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f.Destroy = tc.flags
			o, err := f.ToOptions("destroy", streams, SpecSource{Loader: builtinLoader(), Redactor: redact.New()}, &Clusters{}, ProgressOutput{ErrOut: errOut})
			if err == nil {
				err = o.Run(context.Background())
			}
			if tc.noKube {
				if !errors.Is(err, kube.ErrNoKubeconfig) {
					t.Fatalf("err %v, want it to go on to the (missing) cluster", err)
				}
				return
			}
			var exit *ExitError
			if tc.code < 0 { // the spec's error, as any command reports it
				if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "--yes") {
					t.Fatalf("err %v, want the spec's problem %q", err, tc.want)
				}
				return
			}
			if !errors.As(err, &exit) || exit.Code != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want exit %d naming %q", err, tc.code, tc.want)
			}
			if out.Len() > 0 {
				t.Errorf("printed %q", out)
			}
		})
	}
}
