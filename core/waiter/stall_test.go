package waiter

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func stallObj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil { // numbers as the API's decoder reads them
		t.Fatal(err)
	}
	return u
}

// TestStateOfIgnoresTimestamps: a controller refreshing a condition's
// lastUpdateTime is no progress; a count, a reason or a generation that
// changes is.
func TestStateOfIgnoresTimestamps(t *testing.T) {
	base := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, generation: 1}
status:
  replicas: 2
  unavailableReplicas: 2
  conditions:
  - {type: Progressing, status: "True", reason: ReplicaSetUpdated, lastUpdateTime: "2026-11-28T02:45:59Z", lastTransitionTime: "2026-11-28T02:45:59Z"}
`
	same := map[string]string{
		"a refreshed lastUpdateTime": `"2026-11-28T02:46:00Z", lastTransitionTime: "2026-11-28T02:45:59Z"}`,
	}
	for what, repl := range same {
		other := stallObj(t, replace(base, `"2026-11-28T02:45:59Z", lastTransitionTime: "2026-11-28T02:45:59Z"}`, repl))
		if stateOf(stallObj(t, base)) != stateOf(other) {
			t.Errorf("%s counts as progress", what)
		}
	}
	for what, y := range map[string]string{
		"a ready replica":  replace(base, "unavailableReplicas: 2", "unavailableReplicas: 1\n  readyReplicas: 1"),
		"another reason":   replace(base, "ReplicaSetUpdated", "NewReplicaSetAvailable"),
		"a new generation": replace(base, "generation: 1", "generation: 2"),
	} {
		if stateOf(stallObj(t, base)) == stateOf(stallObj(t, y)) {
			t.Errorf("%s is not progress", what)
		}
	}
	ev := evaluation{pending: []notReady{{name: "Deployment ns/web", obj: stallObj(t, base), state: stateOf(stallObj(t, base))}}}
	if len(ev.objects()) != 1 || ev.progressKey() == (evaluation{}).progressKey() {
		t.Errorf("evaluation: objects %d, progress key %q", len(ev.objects()), ev.progressKey())
	}
}

func replace(s, old, new string) string { return strings.ReplaceAll(s, old, new) }
