//go:build integration

package wait_test

import (
	"testing"
	"time"

	"khook.io/core/testing/steptest"
)

// TestChanged: a wait changes nothing, whatever it waits for (decision
// 162: it never triggers a triggeredBy step).
func TestChanged(t *testing.T) {
	c, ns := steptest.Setup(t, "wait-changed")
	steptest.Create(t, c, ns, deployment)
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {ready: \"yes\"}")
	for _, tc := range []struct{ name, body string }{
		{"condition", "for: condition=Available\n  on: deployment/web"},
		{"jsonpath", "for: jsonpath={.data.ready}=yes\n  on: configmap/cfg"},
		{"delete of an absent object", "for: delete\n  on: configmap/absent"},
		{"delete of an unserved type", "for: delete\n  on: widgets.example.com"},
	} {
		out, err := run(t, request(t, c, "name: w\nwait:\n  "+tc.body+"\n  namespace: "+ns, time.Minute))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if out.Changed {
			t.Errorf("%s: Changed = true, want false (%q)", tc.name, out.Message)
		}
	}
}
