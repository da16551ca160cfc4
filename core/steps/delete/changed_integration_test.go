//go:build integration

package delete_test

import (
	"testing"
)

// TestChanged: a delete that deletes something reports Changed; the same
// delete once its objects are gone does not (decision 162).
func TestChanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		step func(ns string) string
	}{
		{"resource", func(ns string) string {
			return "name: del\ndelete:\n  resource: configmap/a\n  namespace: " + ns + "\n"
		}},
		{"resource-selector", func(ns string) string {
			return "name: del\ndelete:\n  resource: configmaps\n  selector: app=a\n  namespace: " + ns + "\n"
		}},
		{"manifests", func(ns string) string {
			return manifestsStep("namespace: "+ns, cmYAML("a"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.configMap(e.ns, "a", map[string]string{"app": "a"})
			req := e.request(tc.step(e.ns))
			for i, want := range []bool{true, false} {
				out := mustRun(t, req)
				if out.Changed != want {
					t.Errorf("run %d: Changed = %v, want %v (%q)", i+1, out.Changed, want, out.Message)
				}
			}
			if e.exists(e.ns, "a") {
				t.Error("ConfigMap a is still there")
			}
		})
	}
}
