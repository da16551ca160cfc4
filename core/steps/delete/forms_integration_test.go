//go:build integration

package delete_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/testing/steptest"
)

// TestResourceFormsAsKubectl: delete.resource takes every form kubectl
// reads, TYPE[.VERSION][.GROUP][/NAME] with a resource, singular, short
// name or kind, by name and by type with a selector.
func TestResourceFormsAsKubectl(t *testing.T) {
	e := newEnv(t)
	deployment := func(name string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", labels: {form: x}}\nspec:\n  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata: {labels: {app: " + name + "}}\n    spec:\n      containers: [{name: main, image: example.invalid/x:1}]\n"
	}
	gone := func(name string) bool {
		_, err := e.clients.Typed.AppsV1().Deployments(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return apierrors.IsNotFound(err)
	}
	for i, resource := range []string{"deployments.v1.apps", "Deployment.v1.apps", "deployment.v1.apps", "deploy", "deploy.apps", "Deployment.apps", "Deployment"} {
		name := "d" + strings.Repeat("x", i)
		steptest.Create(t, e.clients, e.ns, deployment(name))
		out := mustRun(t, e.request("name: d\ndelete:\n  resource: "+resource+"/"+name+"\n  namespace: "+e.ns))
		if !strings.Contains(out.Message, "Deployment") || !strings.Contains(out.Message, name) || !gone(name) {
			t.Errorf("%s/%s: %q; gone: %v", resource, name, out.Message, gone(name))
		}
	}
	steptest.Create(t, e.clients, e.ns, deployment("s1"))
	steptest.Create(t, e.clients, e.ns, deployment("s2"))
	mustRun(t, e.request("name: d\ndelete:\n  resource: Deployment.v1.apps\n  selector: form=x\n  namespace: "+e.ns))
	if !gone("s1") || !gone("s2") {
		t.Error("delete by Deployment.v1.apps with a selector left a Deployment")
	}
	_, err := run(t, e.request("name: d\ndelete:\n  resource: Deployment.v9.apps/x\n  namespace: "+e.ns))
	if want := `"Deployment.v9.apps": the server doesn't have a resource type "Deployment" in group "v9.apps"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("unknown version: %v, want %s", err, want)
	}
}
