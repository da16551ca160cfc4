//go:build integration

package job_test

import (
	"testing"

	"khook.io/core/step"
	"khook.io/core/testing/steptest"
)

// TestChanged: a job step reports Changed when it runs a Job (the first
// run and a re-run that replaces it), not when skipIf: succeeded skips;
// destroy reports Changed when it deletes the Job, not when it is gone
// (decision 162).
func TestChanged(t *testing.T) {
	c, ns := steptest.Setup(t, "job-changed")
	spec := "name: once\njob:\n  image: x\n  namespace: " + ns
	req := request(t, c, spec, steptest.Options{})
	skipReq := request(t, c, spec+"\n  skipIf: succeeded", steptest.Options{})
	for _, tc := range []struct {
		name string
		do   func(*testing.T, *step.Request) (step.Outcome, error)
		req  *step.Request
		want bool
	}{
		{"run creates and completes the Job", run, req, true},
		{"skipIf: succeeded skips", run, skipReq, false},
		{"a re-run replaces the Job", run, req, true},
		{"destroy deletes the Job", destroy, req, true},
		{"destroy when the Job is gone", destroy, req, false},
		{"skipIf: succeeded with no Job runs it", run, skipReq, true},
	} {
		out, err := tc.do(t, tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if out.Changed != tc.want {
			t.Errorf("%s: Changed = %v, want %v (%+v)", tc.name, out.Changed, tc.want, out)
		}
	}
}
