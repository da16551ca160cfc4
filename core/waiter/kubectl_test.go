package waiter

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kwait "k8s.io/kubectl/pkg/cmd/wait"

	"khook.io/core/spec"
)

// verdict is what one look at an object decides.
type verdict struct {
	met bool
	err string // the wait fails at once with this error
}

// kubectlVerdict runs kubectl wait's own condition function, as `kubectl
// wait --for=<forArg> --timeout=0` does: one GET of obj, one check.
func kubectlVerdict(t *testing.T, forArg string, obj *unstructured.Unstructured) verdict {
	t.Helper()
	server := "https://127.0.0.1:1"
	flags := genericclioptions.NewConfigFlags(false)
	flags.APIServer = &server
	wf := kwait.NewWaitFlags(flags, genericiooptions.NewTestIOStreamsDiscard())
	wf.ForCondition = []string{forArg}
	o, err := wf.ToOptions([]string{"configmaps/x"})
	if err != nil {
		t.Fatalf("kubectl rejects --for=%s: %v", forArg, err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	obj = obj.DeepCopy()
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetName("x")
	obj.SetNamespace("default")
	scheme := runtime.NewScheme()
	o.DynamicClient = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{gvr: "ConfigMapList"}, obj)
	o.Timeout = 0
	info := &resource.Info{
		Name: "x", Namespace: "default",
		Mapping: &meta.RESTMapping{Resource: gvr, GroupVersionKind: gvr.GroupVersion().WithKind("ConfigMap"), Scope: meta.RESTScopeNamespace},
	}
	_, done, err := o.ConditionFn[0](context.Background(), info, o)
	switch {
	case done:
		return verdict{met: true}
	case err != nil && strings.HasPrefix(err.Error(), "condition not met for "):
		return verdict{}
	case err != nil:
		return verdict{err: err.Error()}
	}
	t.Fatalf("kubectl: not done without an error")
	return verdict{}
}

// khookVerdict is the waiter's decision on the same object.
func khookVerdict(t *testing.T, forArg string, obj *unstructured.Unstructured) verdict {
	t.Helper()
	ok, _, err := compile(t, forArg).Check(obj)
	if err != nil {
		return verdict{err: err.Error()}
	}
	return verdict{met: ok}
}

// sample has one field of every shape a JSONPath can reach.
const sample = `
metadata:
  generation: 2
  labels: {app: web}
  annotations: {}
spec:
  str: Running
  padded: " Running "
  empty: ""
  int: 2
  float: 2.5
  bool: true
  nothing: null
  map: {a: b}
  emptyMap: {}
  list: [a, b]
  one: [a]
  emptyList: []
  items:
  - {name: a, ready: true}
  - {name: b, ready: false}
status:
  observedGeneration: 2
  conditions:
  - {type: Ready, status: "True"}
  - {type: Stale, status: "True", observedGeneration: 1}
  - {type: Odd}
`

// TestJSONPathMatchesKubectlWait runs every case through kubectl wait's own
// condition code (k8s.io/kubectl/pkg/cmd/wait) and through the waiter, and
// wants the same decision: met, not yet, or a failed wait with kubectl's
// reason.
func TestJSONPathMatchesKubectlWait(t *testing.T) {
	o := obj(t, sample)
	cases := []string{
		// one scalar
		"jsonpath={.spec.str}=Running", "jsonpath={.spec.str}=Pending", "jsonpath={.spec.str}",
		"jsonpath={.spec.padded}=Running", "jsonpath={.spec.str}=running",
		"jsonpath={.spec.empty}", "jsonpath={.spec.empty}=x",
		"jsonpath={.spec.int}=2", "jsonpath={.spec.int}='2'", "jsonpath={.spec.int}=2.0",
		"jsonpath={.spec.float}=2.5", "jsonpath={.spec.bool}=true", "jsonpath={.spec.bool}=True",
		"jsonpath={.spec.nothing}", "jsonpath={.spec.nothing}=x", "jsonpath={.spec.nothing}=<nil>",
		// absent
		"jsonpath={.spec.absent}", "jsonpath={.spec.absent}=x", "jsonpath={.spec.absent.deeper}",
		"jsonpath={.spec.str.deeper}", "jsonpath={.spec.list[5]}", "jsonpath={.spec.emptyList[0]}",
		// maps and lists
		"jsonpath={.spec.map}", "jsonpath={.spec.map}=x", "jsonpath={.spec.emptyMap}",
		"jsonpath={.spec.list}", "jsonpath={.spec.list}=a", "jsonpath={.spec.emptyList}",
		"jsonpath={.spec.emptyList}=x", "jsonpath={.metadata.annotations}",
		// several values
		"jsonpath={.spec.list[*]}", "jsonpath={.spec.list[*]}=a", "jsonpath={.spec.one[*]}=a",
		"jsonpath={.spec.items[*].name}=a", "jsonpath={.spec.items[0].name}=a",
		"jsonpath={.spec.items[*].ready}", "jsonpath={.spec.emptyList[*]}",
		"jsonpath={.spec.map.*}=b", "jsonpath={.spec.list[0,1]}=a", "jsonpath={..name}=a",
		"jsonpath={.spec['str','int']}=Running",
		// filters
		`jsonpath={.status.conditions[?(@.type=="Ready")].status}=True`,
		`jsonpath={.status.conditions[?(@.type=="Missing")].status}=True`,
		`jsonpath={.status.conditions[?(@.status=="True")].type}=Ready`,
		`jsonpath={.spec.items[?(@.ready==true)].name}=a`,
		// relaxed forms
		"jsonpath=.spec.str=Running", "jsonpath=spec.str=Running", "jsonpath=spec.list",
		// conditions
		"condition=Ready", "condition=ready=true", "condition=Ready=False", "condition=Stale",
		"condition=Odd", "condition=Absent",
	}
	for _, forArg := range cases {
		t.Run(forArg, func(t *testing.T) {
			want := kubectlVerdict(t, forArg, o)
			got := khookVerdict(t, forArg, o)
			if got.met != want.met || (got.err == "") != (want.err == "") || !strings.Contains(got.err, want.err) {
				t.Errorf("kubectl: %+v; khook: %+v", want, got)
			}
		})
	}
}

// TestWaitForParsesAsKubectl: a --for argument kubectl refuses, khook
// refuses too, and the other way round, except (docs/cli.md) a braced
// expression with a single "=" inside it (a filter with !=, <=, >=, or "="
// in a quoted key), which kubectl splits at that "=" and khook reads to its
// closing brace, and conditions that kubectl accepts but that can never be
// met (an empty condition name or value) or that the spec has no form for
// (create).
func TestWaitForParsesAsKubectl(t *testing.T) {
	server := "https://127.0.0.1:1"
	flags := genericclioptions.NewConfigFlags(false)
	flags.APIServer = &server
	kubectlAccepts := func(forArg string) error {
		wf := kwait.NewWaitFlags(flags, genericiooptions.NewTestIOStreamsDiscard())
		wf.ForCondition = []string{forArg}
		_, err := wf.ToOptions([]string{"configmaps/x"})
		return err
	}
	same := []string{
		"jsonpath={.a}", "jsonpath=.a", "jsonpath=a.b", "jsonpath={.a}=x", "jsonpath={.a}='x'", `jsonpath={.a}="x"`,
		"jsonpath={.a}=", "jsonpath={.a}=''", "jsonpath=", "jsonpath={}", "jsonpath={.a}=x=y", "jsonpath={.a} =x",
		"jsonpath={.a}b=c", "jsonpath={{.a}}=x", "jsonpath={.a}{.b}", "jsonpath={range .a[*]}{.b}{end}",
		`jsonpath={.a[?(@.b=="c")].d}=v`, `jsonpath=.a[?(@.b=="c")].d=v`, "jsonpath={.a[}", "jsonpath={.a[0:2]}",
		`jsonpath={.metadata.annotations.a\.b}=x`, "jsonpath={.a}==x",
		"condition=Ready", "condition=Ready=False", "delete", "DELETE", "Delete",
	}
	for _, forArg := range same {
		kerr := kubectlAccepts(forArg)
		_, err := spec.ParseWaitFor(forArg)
		if (kerr == nil) != (err == nil) {
			t.Errorf("%s: kubectl: %v; khook: %v", forArg, kerr, err)
		}
	}
	superset := []string{
		`jsonpath={.a[?(@.b!="c")].d}=v`, `jsonpath={.a[?(@.n>=2)].d}=v`, `jsonpath={.metadata.annotations['a=b']}=v`,
	}
	stricter := []string{"condition=", "condition=Ready=", "create"}
	for _, forArg := range stricter {
		if err := kubectlAccepts(forArg); err != nil {
			t.Errorf("%s: kubectl refuses it now: %v", forArg, err)
		}
		if _, err := spec.ParseWaitFor(forArg); err == nil {
			t.Errorf("%s: khook accepts it", forArg)
		}
	}
	for _, forArg := range superset {
		if err := kubectlAccepts(forArg); err == nil {
			t.Errorf("%s: kubectl accepts it now: drop it from the documented difference", forArg)
		}
		if _, err := spec.ParseWaitFor(forArg); err != nil {
			t.Errorf("%s: %v", forArg, err)
		}
	}
}
