//go:build integration

package rollout_test

import (
	"testing"
	"time"

	"khook.io/core/step"
	"khook.io/core/testing/steptest"
)

// TestChanged: rollout restart reports Changed (it patches the pod
// template); rollout status, before and after, does not (decision 162).
func TestChanged(t *testing.T) {
	c, ns := steptest.Setup(t, "rollout-changed")
	steptest.Create(t, c, ns, workload("Deployment", "web", "  replicas: 1\n", ""))
	status := request(t, c, "name: s\nrollout:\n  status: deployment/web\n  namespace: "+ns, time.Minute)
	restart := request(t, c, "name: r\nrollout:\n  restart: deployment/web\n  namespace: "+ns, time.Minute)
	for _, tc := range []struct {
		name string
		req  *step.Request
		want bool
	}{
		{"status", status, false},
		{"restart", restart, true},
		{"status after the restart", status, false},
	} {
		out, err := run(t, tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if out.Changed != tc.want {
			t.Errorf("%s: Changed = %v, want %v (%q)", tc.name, out.Changed, tc.want, out.Message)
		}
	}
}
