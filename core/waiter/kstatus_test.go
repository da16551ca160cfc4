package waiter

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestKStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		obj     string
		ready   bool
		current string // a prefix
		err     string // a substring; "" for none
	}{
		{
			name: "a Deployment whose replica is available",
			obj: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, generation: 1}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1,
  conditions: [{type: Available, status: "True"}, {type: Progressing, status: "True", reason: NewReplicaSetAvailable}]}`,
			ready: true, current: "Current",
		},
		{
			name: "a Deployment not yet available",
			obj: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, generation: 1}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1}`,
			current: "InProgress: ",
		},
		{
			name: "a Deployment whose status is of an older generation",
			obj: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, generation: 2}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1}`,
			current: "InProgress",
		},
		{
			name: "a Deployment past its progress deadline",
			obj: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, generation: 1}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1,
  conditions: [{type: Progressing, status: "False", reason: ProgressDeadlineExceeded, message: too slow}]}`,
			current: "Failed", err: "Deployment ns/web failed",
		},
		{
			name:    "a pending PVC",
			obj:     `{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data, namespace: ns}, status: {phase: Pending}}`,
			current: "InProgress",
		},
		{
			name:  "a bound PVC",
			obj:   `{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data, namespace: ns}, status: {phase: Bound}}`,
			ready: true, current: "Current",
		},
		{
			name:  "a ConfigMap",
			obj:   `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: ns}}`,
			ready: true, current: "Current",
		},
		{
			name: "a DaemonSet not scheduled everywhere",
			obj: `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: ns, generation: 1}
status: {observedGeneration: 1, desiredNumberScheduled: 2, currentNumberScheduled: 1, updatedNumberScheduled: 1, numberAvailable: 1, numberReady: 1}`,
			current: "InProgress",
		},
		{
			name: "a Job that failed",
			obj: `apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: ns}
spec: {completions: 1}
status: {failed: 1, conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded, message: no luck}]}`,
			current: "Failed", err: "Job ns/migrate failed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, err := yaml.YAMLToJSON([]byte(tc.obj))
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				t.Fatal(err)
			}
			ready, current, err := KStatus(u)
			if ready != tc.ready || !strings.HasPrefix(current, tc.current) {
				t.Errorf("KStatus = %v, %q; want %v, %q...", ready, current, tc.ready, tc.current)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error = %v, want one containing %q", err, tc.err)
			}
		})
	}
}
