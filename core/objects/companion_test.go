package objects

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Where the record goes: beside the objects whose annotations their
// controllers copy, and beside any object whose annotations cannot hold
// it; the companion's name is the object's, hashed, in its namespace.
func TestCompanionPlace(t *testing.T) {
	deploy := yamlObj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: team}\n")
	cm := yamlObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: team}\n")
	role := yamlObj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: web}\n")
	for obj, copied := range map[string]bool{"Deployment": true, "ConfigMap": false} {
		o := cm
		if obj == "Deployment" {
			o = deploy
		}
		if annotationsCopied(o) != copied {
			t.Errorf("%s: annotations copied %v, want %v", obj, !copied, copied)
		}
	}
	for _, k := range []string{"DaemonSet", "StatefulSet"} {
		if !annotationsCopied(yamlObj(t, "apiVersion: apps/v1\nkind: "+k+"\nmetadata: {name: x}\n")) {
			t.Errorf("%s: its controller copies its annotations onto ControllerRevisions", k)
		}
	}
	ns1, n1 := companionRef(deploy)
	ns2, n2 := companionRef(cm)
	ns3, n3 := companionRef(role)
	if ns1 != "team" || ns3 != "default" || n1 == n2 || !strings.HasPrefix(n1, companionPrefix) || len(n1) > 63 || n3 == n1 {
		t.Errorf("companions: %s/%s, %s/%s, %s/%s", ns1, n1, ns2, n2, ns3, n3)
	}
	// the annotations the server counts after khook's write: keys and the
	// longer values, the last-applied one with khook's configuration
	live := yamlObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\n")
	live.SetAnnotations(map[string]string{corev1.LastAppliedConfigAnnotation: strings.Repeat("x", 190<<10), "a": "1"})
	manifest := yamlObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, annotations: {a: \"22\"}}\n")
	record := strings.Repeat("r", 70<<10)
	want := len(corev1.LastAppliedConfigAnnotation) + 190<<10 + len("a") + 2 + len(AnnotationPrevious) + len(record)
	if got := annotationBytes(live, manifest, "{}", record); got != want || got <= totalAnnotationBytes {
		t.Errorf("annotationBytes = %d, want %d, over the limit", got, want)
	}
	// a pointer in the annotation names the companion, and holds no record
	var j previousJSON
	if err := json.Unmarshal([]byte(pointer(cm)), &j); err != nil || j.In != "Secret/"+n2 || j.Known != nil {
		t.Errorf("pointer %s: %+v %v", pointer(cm), j, err)
	}
}
