//go:build integration

package wait_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kwait "k8s.io/kubectl/pkg/cmd/wait"

	"khook.io/core/kube"
	khplan "khook.io/core/plan"
	"khook.io/core/step"
	"khook.io/core/steps/wait"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

// gizmos is a namespaced custom resource with a short name and a
// category, each name unique to one test (tests share a cluster, and a
// CRD left by a killed run must not make a bare kind ambiguous).
type gizmos struct{ group, plural, singular, kind, short, category string }

func newGizmos(ns string) gizmos {
	suffix := ns[strings.LastIndexByte(ns, '-')+1:]
	return gizmos{group: ns + ".khook.test", plural: "gizmos" + suffix, singular: "gizmo" + suffix,
		kind: "Gizmo" + suffix, short: "gz" + suffix, category: "khookgizmos" + suffix}
}

// install creates the CRD and deletes it when the test ends.
func (g gizmos) install(t *testing.T, c *kube.Clients) {
	t.Helper()
	steptest.Create(t, c, "", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: `+g.plural+`.`+g.group+`}
spec:
  group: `+g.group+`
  scope: Namespaced
  names: {plural: `+g.plural+`, singular: `+g.singular+`, kind: `+g.kind+`, shortNames: [`+g.short+`], categories: [`+g.category+`]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`)
	t.Cleanup(func() {
		gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		if err := c.Dynamic.Resource(gvr).Delete(context.Background(), g.plural+"."+g.group, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD: %v", err)
		}
	})
}

// TestResourceFormsAsKubectl: wait.on takes every form kubectl reads,
// resolved against the API server's discovery: a resource, its singular,
// its short name, its kind, each with or without version and group, for a
// built-in type and a custom resource (whose category works for a type
// too); an unknown type fails with kubectl's message.
func TestResourceFormsAsKubectl(t *testing.T) {
	c, ns := steptest.Setup(t, "wait-forms")
	g := newGizmos(ns)
	g.install(t, c)
	steptest.Create(t, c, ns, deployment)
	steptest.Create(t, c, ns, "apiVersion: "+g.group+"/v1\nkind: "+g.kind+"\nmetadata: {name: g1, labels: {app: g}}\nspec: {size: 3}")
	const size = "jsonpath={.spec.size}=3"
	for _, tc := range []struct{ on, for_ string }{
		{"deployments.v1.apps/web", "jsonpath={.spec.replicas}=2"},
		{"Deployment.v1.apps/web", "jsonpath={.spec.replicas}=2"},
		{"deployment.v1.apps/web", "jsonpath={.spec.replicas}=2"},
		{"deploy/web", "jsonpath={.spec.replicas}=2"},
		{"deploy.apps/web", "jsonpath={.spec.replicas}=2"},
		{"deployment.apps/web", "jsonpath={.spec.replicas}=2"},
		{"Deployment.apps/web", "jsonpath={.spec.replicas}=2"},
		{g.plural + "." + g.group + "/g1", size},
		{g.kind + "." + g.group + "/g1", size},
		{g.singular + "." + g.group + "/g1", size},
		{g.plural + ".v1." + g.group + "/g1", size},
		{g.kind + ".v1." + g.group + "/g1", size},
		{g.short + "/g1", size},
		{g.short + "." + g.group + "/g1", size},
		{g.kind + "/g1", size},
		{g.plural, size},
		{g.category, size},
	} {
		req := request(t, c, "name: f\nwait:\n  for: "+tc.for_+"\n  on: "+tc.on+"\n  namespace: "+ns, 30*time.Second)
		if p := plan(t, req); p.Action.Word != khplan.ActionNoOp {
			t.Errorf("on: %s: plan %+v, want no-op", tc.on, p)
		}
		if _, err := run(t, req); err != nil {
			t.Errorf("on: %s: %v", tc.on, err)
		}
	}
	for on, want := range map[string]string{
		"deployments.v2.apps/web":         `"deployments.v2.apps": the server doesn't have a resource type "deployments" in group "v2.apps"`,
		g.plural + ".other.khook.test/g1": `"` + g.plural + `.other.khook.test": the server doesn't have a resource type "` + g.plural + `" in group "other.khook.test"`,
		strings.ToUpper(g.short) + "/g1":  `the server doesn't have a resource type "` + strings.ToUpper(g.short) + `"`,
		"all":                             `resource type "all" names several types (a list, or a category such as all): name one type`,
	} {
		req := request(t, c, "name: f\nwait:\n  for: condition=Ready\n  on: "+on+"\n  namespace: "+ns, 30*time.Second)
		if _, err := run(t, req); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("on: %s: %v, want %q", on, err, want)
		}
	}
}

// kubectlWait runs kubectl wait's own code against the test cluster:
// `kubectl wait --for=<forArg> --timeout=0 -n <ns> <arg>`. It returns
// whether the condition is met, or the error kubectl fails with.
func kubectlWait(t *testing.T, cl *testcluster.Cluster, ns, forArg, arg string) (bool, error) {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &cl.Kubeconfig
	flags.Namespace = &ns
	cache := t.TempDir() // not ~/.kube/cache
	flags.CacheDir = &cache
	wf := kwait.NewWaitFlags(flags, genericiooptions.NewTestIOStreamsDiscard())
	wf.ForCondition = []string{forArg}
	wf.Timeout = 0
	o, err := wf.ToOptions([]string{arg})
	if err != nil {
		t.Fatalf("kubectl wait --for=%s: %v", forArg, err)
	}
	err = o.RunWaitContext(context.Background())
	if err != nil && strings.HasPrefix(err.Error(), "condition not met for ") {
		return false, nil
	}
	return err == nil, err
}

// TestJSONPathAsKubectlOnRealObjects: on objects the API server stored, a
// jsonpath wait decides as kubectl wait does (run through kubectl's code
// with --timeout=0 against the same cluster): several values and a map or
// list compared with a value fail the wait at once with kubectl's reason,
// a map, a list or an empty string without a value meet it.
func TestJSONPathAsKubectlOnRealObjects(t *testing.T) {
	cl := testcluster.Get(t)
	c, ns := steptest.Setup(t, "wait-kjsonpath")
	steptest.Create(t, c, ns, `apiVersion: apps/v1
kind: Deployment
metadata: {name: two, labels: {tier: front}}
spec:
  replicas: 1
  selector: {matchLabels: {app: two}}
  template:
    metadata: {labels: {app: two}}
    spec:
      containers: [{name: a, image: example.invalid/a:1}, {name: b, image: example.invalid/b:1}]
`)
	steptest.Create(t, c, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {empty: \"\", phase: Running}")
	for _, tc := range []struct{ arg, on, for_ string }{
		{"deployment/two", "deployment/two", "jsonpath={.spec.template.spec.containers[*].name}=a"},
		{"deployment/two", "deployment/two", "jsonpath={.spec.template.spec.containers[*].name}"},
		{"deployment/two", "deployment/two", "jsonpath={.spec.template.spec.containers[0].name}=a"},
		{"deployment/two", "deployment/two", "jsonpath={.spec.template.spec.containers[5].name}"},
		{"deployment/two", "deployment/two", "jsonpath={.metadata.labels}"},
		{"deployment/two", "deployment/two", "jsonpath={.metadata.labels}=front"},
		{"deployment/two", "deployment/two", "jsonpath={.spec.template.spec.containers}"},
		{"deployment/two", "deployment/two", "jsonpath={.spec.template.spec.containers}=a"},
		{"deployment/two", "deployment/two", "jsonpath={.spec.replicas}=1"},
		{"deployment/two", "deployment/two", "jsonpath={.spec.replicas}=2"},
		{"deployment/two", "deployment/two", "jsonpath={.spec.paused}"},
		{"configmap/cm", "configmap/cm", "jsonpath={.data.empty}"},
		{"configmap/cm", "configmap/cm", "jsonpath={.data.phase}=Running"},
		{"configmap/cm", "configmap/cm", "jsonpath={.data.phase}= Running "},
		{"configmap/cm", "configmap/cm", "jsonpath={.data.*}"},
		{"configmap/cm", "configmap/cm", "jsonpath={.data.absent}"},
	} {
		t.Run(tc.for_, func(t *testing.T) {
			met, kerr := kubectlWait(t, cl, ns, tc.for_, tc.arg)
			t.Logf("kubectl wait: met %v, error %v", met, kerr)
			req := request(t, c, "name: j\nwait:\n  for: '"+tc.for_+"'\n  on: "+tc.on+"\n  namespace: "+ns, time.Second)
			// a live plan looks once, as --timeout=0 does
			p, err := step.PlanStep(context.Background(), wait.New(), req)
			switch {
			case kerr != nil:
				if err == nil || !strings.Contains(err.Error(), kerr.Error()) {
					t.Errorf("kubectl fails with %q; the plan: %+v, %v", kerr, p, err)
				}
				// and the run fails at once with the same reason
				if _, err := run(t, req); err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), kerr.Error()) {
					t.Errorf("kubectl fails with %q; the run: %v", kerr, err)
				}
			case met:
				if err != nil || p.Action.Word != khplan.ActionNoOp {
					t.Errorf("kubectl: met; the plan: %+v, %v", p, err)
				}
			default:
				if err != nil || p.Action.Word != khplan.ActionWait {
					t.Errorf("kubectl: not met; the plan: %+v, %v", p, err)
				}
			}
		})
	}
}
