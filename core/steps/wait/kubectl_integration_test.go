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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kwait "k8s.io/kubectl/pkg/cmd/wait"
	"sigs.k8s.io/yaml"

	"khook.io/core/internal/steptest"
	"khook.io/core/internal/testcluster"
	"khook.io/core/kube"
	"khook.io/core/steps/wait"
)

// gizmoCRD is a namespaced custom resource with a short name and a
// category, in a group of this package's own (packages share a cluster).
const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.wait.targets.khook.test}
spec:
  group: wait.targets.khook.test
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList, shortNames: [gz], categories: [khookgizmos]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// installGizmos creates the CRD (or finds it from an earlier run) and
// deletes it when the test ends.
func installGizmos(t *testing.T, c *kube.Clients) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(gizmoCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ctx := context.Background()
	if _, err := c.Dynamic.Resource(gvr).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Dynamic.Resource(gvr).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
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
	installGizmos(t, c)
	steptest.Create(t, c, ns, deployment)
	steptest.Create(t, c, ns, "apiVersion: wait.targets.khook.test/v1\nkind: Gizmo\nmetadata: {name: g1, labels: {app: g}}\nspec: {size: 3}")
	for _, tc := range []struct{ on, for_ string }{
		{"deployments.v1.apps/web", "jsonpath={.spec.replicas}=2"},
		{"Deployment.v1.apps/web", "jsonpath={.spec.replicas}=2"},
		{"deployment.v1.apps/web", "jsonpath={.spec.replicas}=2"},
		{"deploy/web", "jsonpath={.spec.replicas}=2"},
		{"deploy.apps/web", "jsonpath={.spec.replicas}=2"},
		{"deployment.apps/web", "jsonpath={.spec.replicas}=2"},
		{"Deployment.apps/web", "jsonpath={.spec.replicas}=2"},
		{"gizmos.wait.targets.khook.test/g1", "jsonpath={.spec.size}=3"},
		{"Gizmo.wait.targets.khook.test/g1", "jsonpath={.spec.size}=3"},
		{"gizmo.wait.targets.khook.test/g1", "jsonpath={.spec.size}=3"},
		{"gizmos.v1.wait.targets.khook.test/g1", "jsonpath={.spec.size}=3"},
		{"Gizmo.v1.wait.targets.khook.test/g1", "jsonpath={.spec.size}=3"},
		{"gz/g1", "jsonpath={.spec.size}=3"},
		{"Gizmo/g1", "jsonpath={.spec.size}=3"},
		{"gizmos", "jsonpath={.spec.size}=3"},
		{"khookgizmos", "jsonpath={.spec.size}=3"},
		{"gz.wait.targets.khook.test", "jsonpath={.spec.size}=3"},
	} {
		req := request(t, c, "name: f\nwait:\n  for: "+tc.for_+"\n  on: "+tc.on+"\n  namespace: "+ns, 30*time.Second)
		if p := plan(t, req); p.Action != wait.ActionNoOp {
			t.Errorf("on: %s: plan %+v, want no-op", tc.on, p)
		}
		if _, err := run(t, req); err != nil {
			t.Errorf("on: %s: %v", tc.on, err)
		}
	}
	for on, want := range map[string]string{
		"deployments.v2.apps/web":    `"deployments.v2.apps": the server doesn't have a resource type "deployments" in group "v2.apps"`,
		"gizmos.other.khook.test/g1": `"gizmos.other.khook.test": the server doesn't have a resource type "gizmos" in group "other.khook.test"`,
		"GZ/g1":                      `the server doesn't have a resource type "GZ"`,
		"all":                        `resource type "all" names several types (a list, or a category such as all): name one type`,
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
			p, err := wait.New().Plan(context.Background(), req)
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
				if err != nil || p.Action != wait.ActionNoOp {
					t.Errorf("kubectl: met; the plan: %+v, %v", p, err)
				}
			default:
				if err != nil || p.Action != wait.ActionWait {
					t.Errorf("kubectl: not met; the plan: %+v, %v", p, err)
				}
			}
		})
	}
}
