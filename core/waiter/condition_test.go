package waiter

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"khook.io/core/spec"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	// unstructured objects decoded from JSON hold int64, not float64
	u := &unstructured.Unstructured{Object: m}
	fixInts(u.Object)
	return u
}

func fixInts(x any) {
	switch v := x.(type) {
	case map[string]any:
		for k, e := range v {
			if f, ok := e.(float64); ok && f == float64(int64(f)) {
				v[k] = int64(f)
			} else {
				fixInts(e)
			}
		}
	case []any:
		for i, e := range v {
			if f, ok := e.(float64); ok && f == float64(int64(f)) {
				v[i] = int64(f)
			} else {
				fixInts(e)
			}
		}
	}
}

// compile parses and compiles a wait.for expression.
func compile(t *testing.T, forArg string) *Condition {
	t.Helper()
	wf, err := spec.ParseWaitFor(forArg)
	if err != nil {
		t.Fatalf("%s: %v", forArg, err)
	}
	c, err := NewCondition(wf)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, generation: 2}
spec:
  replicas: 2
status:
  observedGeneration: 2
  readyReplicas: 2
  replicas: 2
  phase: ""
  labels: {}
  conditions:
  - type: Available
    status: "False"
    reason: MinimumReplicasUnavailable
  - type: Progressing
    status: "True"
    reason: NewReplicaSetAvailable
  - type: Stale
    status: "True"
    observedGeneration: 1
`

func TestConditionCheck(t *testing.T) {
	d := obj(t, deployment)
	noConds := obj(t, "metadata: {name: x}\nstatus: {}")
	for _, tc := range []struct {
		name, for_ string
		o          *unstructured.Unstructured
		want       bool
		current    string
	}{
		{"condition false", "condition=Available", d, false, "status False (MinimumReplicasUnavailable)"},
		{"condition true", "condition=Progressing", d, true, "status True (NewReplicaSetAvailable)"},
		{"condition name case-insensitive", "condition=progressing", d, true, "status True (NewReplicaSetAvailable)"},
		{"condition with value", "condition=Available=False", d, true, "status False (MinimumReplicasUnavailable)"},
		{"condition value case-insensitive", "condition=Available=false", d, true, "status False (MinimumReplicasUnavailable)"},
		{"condition value mismatch", "condition=Progressing=False", d, false, "status True (NewReplicaSetAvailable)"},
		{"condition missing", "condition=Ready", d, false, "no Ready condition yet"},
		{"no conditions", "condition=Ready", noConds, false, "no conditions yet"},
		{"stale observed generation", "condition=Stale", d, false, "status True, observed for generation 1 of 2"},
		{"jsonpath any value", "jsonpath={.status.readyReplicas}", d, true, "value 2"},
		{"jsonpath relaxed equals", "jsonpath=.status.readyReplicas=2", d, true, "value 2"},
		{"jsonpath bare equals", "jsonpath=status.replicas=2", d, true, "value 2"},
		{"jsonpath mismatch", "jsonpath={.status.readyReplicas}=3", d, false, "value 2"},
		{"jsonpath missing path is not yet", "jsonpath={.status.nothing.here}", d, false, "{.status.nothing.here} not found"},
		{"jsonpath missing path with value", "jsonpath={.status.nothing}=x", d, false, "{.status.nothing} not found"},
		{"jsonpath empty string is a value, as in kubectl", "jsonpath={.status.phase}", d, true, `value ""`},
		{"jsonpath empty map is a value, as in kubectl", "jsonpath={.status.labels}", d, true, "value an object of 0 fields"},
		{"jsonpath filter", `jsonpath={.status.conditions[?(@.type=="Progressing")].status}=True`, d, true, `value "True"`},
		{"jsonpath filter mismatch", `jsonpath={.status.conditions[?(@.type=="Available")].status}=True`, d, false, `value "False"`},
		{"jsonpath filter no match", `jsonpath={.status.conditions[?(@.type=="Ready")].status}=True`, d, false, `{.status.conditions[?(@.type=="Ready")].status} not found`},
		{"jsonpath quoted value", `jsonpath={.metadata.name}="web"`, d, true, `value "web"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cur, err := compile(t, tc.for_).Check(tc.o)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if got != tc.want || cur != tc.current {
				t.Errorf("Check(%s) = %v, %q; want %v, %q", tc.for_, got, cur, tc.want, tc.current)
			}
		})
	}
}

// TestJSONPathRefusals: what kubectl wait refuses ends the wait with its
// reason, naming the object (kubectl_test.go checks the same against
// kubectl's code).
func TestJSONPathRefusals(t *testing.T) {
	d := obj(t, deployment)
	for _, tc := range []struct{ for_, want string }{
		{"jsonpath={.status.conditions[*].status}=False", "Deployment default/web: jsonpath {.status.conditions[*].status}=False: given jsonpath expression matches more than one value"},
		{"jsonpath={.status.conditions[*].reason}", "matches more than one value"},
		{"jsonpath={.spec}=x", "Deployment default/web: jsonpath {.spec}=x: jsonpath leads to a nested object or list which is not supported"},
		{"jsonpath={.status.conditions}=x", "jsonpath leads to a nested object or list which is not supported"},
		{"jsonpath={.status.conditions[7].status}", "array index out of bounds"},
	} {
		ok, _, err := compile(t, tc.for_).Check(d)
		if ok || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%s) = %v, %v; want the error %q", tc.for_, ok, err, tc.want)
		}
	}
}

func TestNewConditionRejectsDelete(t *testing.T) {
	if _, err := NewCondition(spec.WaitFor{Kind: spec.ForDelete}); err == nil {
		t.Fatal("NewCondition(delete) succeeded")
	}
}

func TestDescribe(t *testing.T) {
	for in, want := range map[string]string{
		"condition=Ready":              "condition Ready",
		"condition=Ready=true":         "condition Ready",
		"condition=Ready=False":        "condition Ready=False",
		"jsonpath=.status.phase":       "jsonpath {.status.phase}",
		"jsonpath=status.phase=Active": "jsonpath {.status.phase}=Active",
		"delete":                       "deletion",
	} {
		wf, err := spec.ParseWaitFor(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := Describe(wf); got != want {
			t.Errorf("Describe(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestQuoteValueBounded(t *testing.T) {
	long := strings.Repeat("x", 500)
	if got := quoteValue(long); len(got) > maxValueLen+3 {
		t.Errorf("quoteValue of 500 bytes is %d bytes", len(got))
	}
}
