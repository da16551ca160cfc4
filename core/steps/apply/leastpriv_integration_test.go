//go:build integration

package apply_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"khook.io/core/step"
	"khook.io/core/steps/apply"
	"khook.io/core/testing/steptest"
)

var saGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

const serviceAccount = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: %s\n"

// limitedEnv is a test as the least-privilege user, in the one namespace
// it may use (configmaps, secrets, pods, deployments, jobs; no
// serviceaccounts, and no namespace reads), with names unique to the
// test; whatever it leaves is deleted by the admin afterwards.
type limitedEnv struct {
	*env
	lim  *steptest.Options
	ns   string
	name func(string) string
	req  func(yaml string) *step.Request
}

func newLimitedEnv(t *testing.T) *limitedEnv {
	e := newEnv(t)
	lim := steptest.Clients(t, e.c.LimitedRESTConfig(t))
	le := &limitedEnv{env: e, ns: e.c.LimitedNamespace}
	le.name = func(s string) string { return s + "-" + e.ns }
	le.req = func(yaml string) *step.Request { return steptest.Request(t, lim, yaml, steptest.Options{}) }
	return le
}

// cleanup deletes the named objects of the limited namespace after the
// test, as the admin.
func (le *limitedEnv) cleanup(gvr schema.GroupVersionResource, names ...string) {
	le.t.Cleanup(func() {
		for _, n := range names {
			_ = le.res(gvr, le.ns).Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
}

// TestPlanLeastPrivilege: a user who may not read namespaces still gets a
// plan of what it may read: create and configure, not unknown; an object
// it may not read is unknown, alone, with the server's reason.
func TestPlanLeastPrivilege(t *testing.T) {
	le := newLimitedEnv(t)
	a, b, sa := le.name("lp-plan-a"), le.name("lp-plan-b"), le.name("lp-plan-sa")
	steptest.Create(t, le.clients, le.ns, configMap(b, nil))
	le.cleanup(cmGVR, b)

	pred := steptest.Plan(t, apply.New(apply.Options{}), le.req(stepYAML("cms", "namespace: "+le.ns, inline(configMap(a, nil)), inline(configMap(b, nil)))))
	if pred.Action.Word != "configure" || pred.Reason != "1 to create, 1 to configure" {
		t.Errorf("plan = %+v, want configure (1 to create, 1 to configure)", pred)
	}
	// b was created without apply: apply adds its last-applied configuration
	want := []string{"ConfigMap/" + a + " in " + le.ns + ": create", "ConfigMap/" + b + " in " + le.ns + `: configure: metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`}
	if strings.Join(pred.Details, "|") != strings.Join(want, "|") {
		t.Errorf("details %q, want %q", pred.Details, want)
	}

	pred = steptest.Plan(t, apply.New(apply.Options{}), le.req(stepYAML("mixed", "namespace: "+le.ns+"\ncreateNamespace: true", inline(configMap(a, nil)), inline(fmt.Sprintf(serviceAccount, sa)))))
	if pred.Action.Word != "unknown" || pred.Reason != "may not read serviceaccounts in "+le.ns {
		t.Errorf("plan = %+v, want unknown: may not read serviceaccounts", pred)
	}
	if len(pred.Details) != 2 || pred.Details[0] != "ConfigMap/"+a+" in "+le.ns+": create" ||
		!strings.Contains(pred.Details[1], `cannot get resource "serviceaccounts"`) {
		t.Errorf("details %q", pred.Details)
	}
}

// TestApplyPartialSaysWhatWasApplied: a step that stops at a forbidden
// object says, in its error, how many objects it applied before it.
func TestApplyPartialSaysWhatWasApplied(t *testing.T) {
	le := newLimitedEnv(t)
	a, b, sa, c := le.name("lp-a"), le.name("lp-b"), le.name("lp-sa"), le.name("lp-c")
	le.cleanup(cmGVR, a, b, c)
	for _, serverSide := range []bool{false, true} {
		err := runErr(t, le.req(stepYAML("partial", fmt.Sprintf("namespace: %s\nserverSide: %v", le.ns, serverSide),
			inline(configMap(a, nil)), inline(configMap(b, nil)), inline(fmt.Sprintf(serviceAccount, sa)), inline(configMap(c, nil)))))
		prefix := "applied 2 of 4 objects before ServiceAccount/" + sa + " failed: serviceaccounts"
		if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), `is forbidden: User "khook-limited" cannot`) {
			t.Errorf("serverSide=%v: error %q, want it to start %q", serverSide, err, prefix)
		}
		if !apierrors.IsForbidden(err) {
			t.Errorf("the error chain lost the API status: %v", err)
		}
		if le.absent(cmGVR, le.ns, a) || le.absent(cmGVR, le.ns, b) || !le.absent(cmGVR, le.ns, c) {
			t.Errorf("serverSide=%v: want %s and %s applied, %s not", serverSide, a, b, c)
		}
	}
}

// TestDestroyDeletesWhatItMay: destroy deletes every object it may (all
// created by this spec), and names the one it could not read, with why.
func TestDestroyDeletesWhatItMay(t *testing.T) {
	le := newLimitedEnv(t)
	a, sa, b := le.name("lp-d-a"), le.name("lp-d-sa"), le.name("lp-d-b")
	created := func(y string) string {
		return strings.Replace(y, "metadata:\n", "metadata:\n  annotations: {khook.io/created-by: steptest}\n", 1)
	}
	steptest.Create(t, le.clients, le.ns, created(configMap(a, nil)))
	steptest.Create(t, le.clients, le.ns, created(fmt.Sprintf(serviceAccount, sa)))
	steptest.Create(t, le.clients, le.ns, created(configMap(b, nil)))
	le.cleanup(cmGVR, a, b)
	le.cleanup(saGVR, sa)
	req := le.req(stepYAML("undo", "namespace: "+le.ns, inline(configMap(a, nil)), inline(fmt.Sprintf(serviceAccount, sa)), inline(configMap(b, nil))))
	ctx, cancel := context.WithTimeout(t.Context(), req.Timeout)
	defer cancel()
	_, err := step.DestroyStep(ctx, apply.New(apply.Options{}), req)
	if err == nil {
		t.Fatal("destroy succeeded, but the ServiceAccount may not be deleted")
	}
	want := "could not undo 1 of 3 objects: ServiceAccount/" + sa + " in " + le.ns + ": serviceaccounts \"" + sa + "\" is forbidden"
	if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "(deleted 2 objects)") {
		t.Errorf("error %q, want it to start %q and end (deleted 2 objects)", err, want)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("the error chain lost the API status: %v", err)
	}
	if !le.absent(cmGVR, le.ns, a) || !le.absent(cmGVR, le.ns, b) || le.absent(saGVR, le.ns, sa) {
		t.Error("both ConfigMaps must be gone (the first one comes after the refused object), the ServiceAccount left")
	}
}

// TestPlanReadOnlyObject: an object the user may read but not write is
// predicted from what it may do: unchanged when client-side apply's
// three-way patch (computed locally) is empty, configure saying that it
// may not dry-run it otherwise; never unknown.
func TestPlanReadOnlyObject(t *testing.T) {
	le := newLimitedEnv(t)
	sa := le.name("lp-ro-sa")
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get", "list"}}}}
	if _, err := le.clients.Typed.RbacV1().Roles(le.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "khook-limited"}}}
	if _, err := le.clients.Typed.RbacV1().RoleBindings(le.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = le.clients.Typed.RbacV1().RoleBindings(le.ns).Delete(context.Background(), sa, metav1.DeleteOptions{})
		_ = le.clients.Typed.RbacV1().Roles(le.ns).Delete(context.Background(), sa, metav1.DeleteOptions{})
	})
	le.cleanup(saGVR, sa)
	// applied by the admin: the last-applied annotation is there
	run(t, le.request(stepYAML("sa", "namespace: "+le.ns, inline(fmt.Sprintf(serviceAccount, sa)))))

	var pred step.Prediction
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		pred = steptest.Plan(t, apply.New(apply.Options{}), le.req(stepYAML("sa", "namespace: "+le.ns, inline(fmt.Sprintf(serviceAccount, sa)))))
		return pred.Action.Word != "unknown", nil // the RoleBinding takes effect
	})
	if err != nil || pred.Action.Word != "unchanged" {
		t.Fatalf("plan of the applied ServiceAccount, read-only: %+v (%v)", pred, err)
	}
	labelled := strings.Replace(fmt.Sprintf(serviceAccount, sa), "metadata:\n", "metadata:\n  labels: {team: x}\n", 1)
	pred = steptest.Plan(t, apply.New(apply.Options{}), le.req(stepYAML("sa", "namespace: "+le.ns, inline(labelled))))
	want := "ServiceAccount/" + sa + " in " + le.ns + ": configure (exists; may not dry-run it: "
	if pred.Action.Word != "configure" || len(pred.Details) != 1 || !strings.HasPrefix(pred.Details[0], want) {
		t.Errorf("plan of a changed ServiceAccount, read-only: %+v, want %q...", pred, want)
	}
}
