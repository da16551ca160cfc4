//go:build integration

package apply_test

import (
	"context"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/step"
	"khook.io/core/steps/apply"
)

// TestChanged: an apply step reports Changed when it creates or
// configures an object, not when every object is unchanged nor when
// skipIf: exists skips (decision 162).
func TestChanged(t *testing.T) {
	for _, serverSide := range []bool{false, true} {
		t.Run("serverSide="+strconv.FormatBool(serverSide), func(t *testing.T) {
			e := newEnv(t)
			fields := "namespace: " + e.ns + "\nserverSide: " + strconv.FormatBool(serverSide)
			v1 := e.request(stepYAML("cm", fields, inline(configMap("a", map[string]string{"v": "1"}))))
			v2 := e.request(stepYAML("cm", fields, inline(configMap("a", map[string]string{"v": "2"}))))
			skip := e.request(stepYAML("cm", fields+"\nskipIf: exists", inline(configMap("a", map[string]string{"v": "3"}))))
			for _, tc := range []struct {
				name string
				req  *step.Request
				want bool
			}{
				{"created", v1, true},
				{"unchanged", v1, false},
				{"configured", v2, true},
				{"unchanged again", v2, false},
				{"skipIf: exists", skip, false},
			} {
				if out := run(t, tc.req); out.Changed != tc.want {
					t.Errorf("%s: Changed = %v, want %v (%+v)", tc.name, out.Changed, tc.want, out)
				}
			}
		})
	}
}

// TestChangedNamespaceCreated: createNamespace creating the step's
// namespace is a change even when every object is unchanged (the objects
// here name another namespace); with the namespace there, nothing changes.
func TestChangedNamespaceCreated(t *testing.T) {
	e := newEnv(t)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: " + e.ns + "\ndata: {v: \"1\"}\n"
	run(t, e.request(stepYAML("pre", "namespace: "+e.ns, inline(cm))))
	name := e.ns + "-created"
	t.Cleanup(func() {
		_ = e.clients.Typed.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	req := e.request(stepYAML("mkns", "namespace: "+name+"\ncreateNamespace: true", inline(cm)))
	for i, want := range []bool{true, false} {
		out := run(t, req)
		if out.Changed != want {
			t.Errorf("run %d: Changed = %v, want %v (%q)", i+1, out.Changed, want, out.Message)
		}
		if i == 0 && out.Message != "applied 1 object: 1 unchanged; namespace "+name+" created" {
			t.Errorf("run 1: message %q, want the object unchanged and the namespace created", out.Message)
		}
	}
}

// TestChangedDestroy: undoing an apply step is a change when it deletes
// or reverts an object, not when everything is already gone.
func TestChangedDestroy(t *testing.T) {
	e := newEnv(t)
	req := e.request(stepYAML("cm", "namespace: "+e.ns, inline(configMap("gone", map[string]string{"v": "1"}))))
	run(t, req)
	for i, want := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(t.Context(), req.Timeout)
		out, err := step.DestroyStep(ctx, apply.New(apply.Options{}), req)
		cancel()
		if err != nil {
			t.Fatalf("destroy %d: %v", i+1, err)
		}
		if out.Changed != want {
			t.Errorf("destroy %d: Changed = %v, want %v (%q)", i+1, out.Changed, want, out.Message)
		}
	}
}
