//go:build integration

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"khook.io/core/state"
	"khook.io/core/testing/testcluster"
)

// TestStuckStepSaysWhyEverywhere runs a spec whose Deployment's Pods
// crash (kwok's crash-loop stage, exit code 3, a log line quoting a
// planted secret) through the built plugin: the piped progress shows the
// cause once, and the failed step's error carries it, with the log lines,
// masked, in the summary, -o json, -o junit and the state record (cut as
// every error).
func TestStuckStepSaysWhyEverywhere(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "stuck")
	dir := t.TempDir()
	logFile := filepath.Join(dir, "pod.log")
	if err := os.WriteFile(logFile, []byte("2026-11-22T05:00:00Z stdout F starting\n2026-11-22T05:00:01Z stderr F fatal: token "+planted+" rejected\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serveLogs(t, ns, logFile)
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: web
    timeout: 8s
    apply:
      namespace: %[1]s
      waitFor: condition=Available
      manifests:
        - inline: |
            apiVersion: apps/v1
            kind: Deployment
            metadata: {name: web}
            spec:
              replicas: 2
              selector: {matchLabels: {app: web}}
              template:
                metadata:
                  labels: {app: web}
                  annotations: {kwok.khook.io/pod: crash-loop, kwok.khook.io/exit-code: "3"}
                spec:
                  containers: [{name: app, image: registry.example/web:1, env: [{name: TOKEN, value: "${TOKEN}"}]}]
`, ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := kubeEnv(t, "KHOOK_SECRET_TOKEN="+planted)
	cause := "; cause: 2 of 2 pods (Pod " + ns + "/web-"
	what := ": container app: CrashLoopBackOff: last exit code 3 (Error); last 2 log lines:\n    starting\n    fatal: token *** rejected"
	leaks := func(where, out string) {
		t.Helper()
		for _, f := range plantedForms() {
			if strings.Contains(out, f) {
				t.Errorf("%s shows the planted secret:\n%s", where, out)
			}
		}
	}

	r, res := applyJSON(t, "apply", spec, env)
	leaks("apply -o json", res.Stdout+res.Stderr)
	_, _, errText, _ := r.step(t, "web")
	if res.Code != 1 || !strings.Contains(errText, cause) || !strings.Contains(errText, what) {
		t.Fatalf("-o json: exit %d, error %q\nwant %s... and %q", res.Code, errText, cause, what)
	}
	if n := strings.Count(res.Stderr, "… stuck: container app: CrashLoopBackOff: last exit code 3 (Error) (2 of 2 pods: Pod "+ns+"/web-"); n != 1 {
		t.Errorf("piped progress shows the cause %d times, want once:\n%s", n, res.Stderr)
	}

	sec := (&stateSpec{ns: ns, name: ns}).secret(t)
	rec, err := state.DecodeSecret(sec)
	if err != nil {
		t.Fatal(err)
	}
	recorded := rec.Steps["web"].Error
	leaks("the state record", recorded)
	if !strings.Contains(recorded, cause) || !strings.Contains(recorded, "CrashLoopBackOff: last exit code 3") {
		t.Errorf("the state record's error %q lacks the cause", recorded)
	}

	res = run(t, bins.Kubectl, env, "", "apply", "-f", spec, "-o", "junit")
	leaks("apply -o junit", res.Stdout+res.Stderr)
	if res.Code != 1 || !strings.Contains(res.Stdout, "<failure") || !strings.Contains(res.Stdout, "cause: 2 of 2 pods (Pod "+ns+"/web-") ||
		!strings.Contains(res.Stdout, "fatal: token *** rejected") {
		t.Errorf("-o junit: exit %d\n%s", res.Code, res.Stdout)
	}

	res = run(t, bins.Kubectl, env, "", "apply", "-f", spec)
	leaks("apply", res.Stdout+res.Stderr)
	if !strings.Contains(res.Stdout, "web failed:\n") || !strings.Contains(res.Stdout, what) {
		t.Errorf("the summary lacks the cause and the log lines:\n%s", res.Stdout)
	}
}
