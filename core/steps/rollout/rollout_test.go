package rollout

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

const workloadYAML = `apiVersion: apps/v1
kind: KIND
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {keep: me}
    spec:
      containers: [{name: main, image: x}]
`

func TestRestartPatch(t *testing.T) {
	for _, kind := range []string{"Deployment", "DaemonSet", "StatefulSet"} {
		t.Run(kind, func(t *testing.T) {
			before := time.Now().Truncate(time.Second)
			p, err := RestartPatch(object(t, strings.Replace(workloadYAML, "KIND", kind, 1)))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Spec struct {
					Template struct {
						Metadata struct {
							Annotations map[string]string `json:"annotations"`
						} `json:"metadata"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(p, &got); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			ann := got.Spec.Template.Metadata.Annotations
			if len(ann) != 1 {
				t.Fatalf("patch %s: want only the restartedAt annotation", p)
			}
			at, err := time.Parse(time.RFC3339, ann["kubectl.kubernetes.io/restartedAt"])
			if err != nil || at.Before(before) {
				t.Errorf("restartedAt = %q (%v)", ann["kubectl.kubernetes.io/restartedAt"], err)
			}
		})
	}
}

func TestRestartPatchRefusesPausedAndOtherKinds(t *testing.T) {
	paused := strings.Replace(workloadYAML, "KIND", "Deployment", 1) + "  paused: true\n"
	if _, err := RestartPatch(object(t, paused)); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Errorf("paused deployment: err = %v", err)
	}
	if _, err := RestartPatch(object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}")); err == nil {
		t.Error("restart of a ConfigMap succeeded")
	}
}

func TestDeadlineExceeded(t *testing.T) {
	d := object(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {progressDeadlineSeconds: 1}
status:
  conditions:
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded, message: 'ReplicaSet "web-1" has timed out progressing.'}
`)
	want := `exceeded its progress deadline (progressDeadlineSeconds: 1): ReplicaSet "web-1" has timed out progressing.`
	if got := deadlineExceeded(d); got != want {
		t.Errorf("deadlineExceeded = %q, want %q", got, want)
	}
	ok := object(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nstatus:\n  conditions:\n  - {type: Progressing, status: \"True\", reason: NewReplicaSetAvailable}\n")
	if got := deadlineExceeded(ok); got != "" {
		t.Errorf("deadlineExceeded of a progressing deployment = %q", got)
	}
}

func TestRollable(t *testing.T) {
	for gk, want := range map[schema.GroupKind]bool{
		{Group: "apps", Kind: "Deployment"}: true, {Group: "apps", Kind: "DaemonSet"}: true, {Group: "apps", Kind: "StatefulSet"}: true,
		{Group: "apps", Kind: "ReplicaSet"}: false, {Group: "extensions", Kind: "Deployment"}: false,
		{Group: "example.com", Kind: "Deployment"}: false, {Kind: "Pod"}: false,
	} {
		if got := rollable(gk); got != want {
			t.Errorf("rollable(%s) = %v", gk, got)
		}
	}
}
