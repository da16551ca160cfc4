//go:build integration

package patch_test

import (
	"testing"

	"khook.io/core/testing/steptest"
)

// TestChanged: a patch that changes its target reports Changed, the same
// patch again does not (decision 162: triggeredBy reads Changed).
func TestChanged(t *testing.T) {
	for _, tc := range []struct {
		name, target, typ, body string
	}{
		{"strategic", "deployment/web", "strategic", `
    spec:
      template:
        spec:
          containers:
          - {name: main, image: example.invalid/main:2}`},
		{"strategic-configmap", "configmap/cfg", "strategic", `
    data: {a: "2"}`},
		{"merge", "deployment/web", "merge", `
    metadata:
      labels: {old: null, new: label}`},
		{"merge-configmap", "configmap/cfg", "merge", `
    data: {a: "2", b: null}`},
		{"json", "deployment/web", "json", `
    - {op: replace, path: /spec/replicas, value: 2}`},
		{"json-configmap", "configmap/cfg", "json", `
    - {op: add, path: /data/c, value: "3"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ns := steptest.Setup(t, "patch-changed-"+tc.name)
			steptest.Create(t, c, ns, deployment)
			steptest.Create(t, c, ns, `apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {a: "1", b: "1"}
`)
			req := request(t, c, `name: p
patch:
  target: `+tc.target+`
  namespace: `+ns+`
  type: `+tc.typ+`
  patch:`+tc.body+`
`)
			for i, want := range []bool{true, false, false} {
				out, err := run(t, req)
				if err != nil {
					t.Fatalf("run %d: %v", i+1, err)
				}
				if out.Changed != want {
					t.Errorf("run %d: Changed = %v, want %v (%q)", i+1, out.Changed, want, out.Message)
				}
			}
		})
	}
}
