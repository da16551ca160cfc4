//go:build integration

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/testing/testcluster"
)

// theirObjects are what another team applied with kubectl before khook:
// two Deployments and two ConfigMaps.
const theirObjects = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {team: a}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.0
        env: [{name: A, value: "1"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: scaled}
spec:
  replicas: 2
  selector: {matchLabels: {app: scaled}}
  template:
    metadata: {labels: {app: scaled}}
    spec:
      containers: [{name: web, image: nginx:1.0}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {team: a}}
data: {owner: theirs, k: before}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: frozen}
data: {a: theirs}
`

// giveBackSpec configures each of them with a full manifest (and a
// namespace that exists), and creates one ConfigMap.
const giveBackSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: giveback}
steps:
  - name: app
    apply:
      namespace: %[1]s
      serverSide: %[3]v
      manifests:
        - inline: |
            apiVersion: v1
            kind: Namespace
            metadata: {name: %[2]s, labels: {khook: added}, annotations: {note: by-khook}}
            ---
            apiVersion: apps/v1
            kind: Deployment
            metadata: {name: web, labels: {team: a, khook: added}}
            spec:
              replicas: 3
              selector: {matchLabels: {app: web}}
              template:
                metadata: {labels: {app: web, tier: front}}
                spec:
                  containers:
                  - name: web
                    image: nginx:2.0
                    env: [{name: A, value: "1"}, {name: B, value: "2"}]
            ---
            apiVersion: apps/v1
            kind: Deployment
            metadata: {name: scaled}
            spec:
              replicas: 3
              selector: {matchLabels: {app: scaled}}
              template:
                metadata: {labels: {app: scaled}}
                spec:
                  containers: [{name: web, image: nginx:1.0}]
            ---
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: settings, labels: {team: a, khook: added}}
            data: {owner: theirs, k: khook-value, added: by-khook}
            ---
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: frozen}
            data: {a: theirs, b: khook}
            immutable: true
            ---
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: mine}
            data: {a: b}
`

// TestDestroyGivesBackWhatKhookTook, with the built binary, client-side
// and server-side: objects another team applied with kubectl are
// configured by a spec with full manifests; afterwards kubectl patches a
// key khook wrote and kubectl scale sets replicas khook wrote. destroy
// --dry-run says what becomes of each field (golden file); destroy then
// does exactly that: the Deployment khook configured gets back the spec,
// labels and annotations it had before khook (a valid object), the
// patched key and the scaled replicas survive, what khook added goes, the
// existing Namespace loses khook's label and annotations and is kept, the
// ConfigMap khook made immutable cannot be reverted (the server rejects
// it: shown in the plan, reported, exit 1) while everything else is
// undone.
func TestDestroyGivesBackWhatKhookTook(t *testing.T) {
	// kubectl as the test cluster's binaries hold it (docs/test-cluster.md)
	kubectl := kubectlBin(t)
	cs := typed(t)
	ctx := context.Background()
	for _, serverSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) {
			ns := testcluster.Get(t).NewNamespace(t, "giveback")
			team := testcluster.Get(t).NewNamespace(t, "giveteam")
			k := func(stdin string, args ...string) {
				t.Helper()
				if res := run(t, kubectl, kubeEnv(t), stdin, append(args, "-n", ns)...); res.Code != 0 {
					t.Fatalf("kubectl %v: exit %d\n%s%s", args, res.Code, res.Stdout, res.Stderr)
				}
			}
			k(theirObjects, "apply", "-f", "-")
			before, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			teamBefore, err := cs.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			spec := writeSpec(t, fmt.Sprintf(giveBackSpec, ns, team, serverSide))
			if r, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 {
				t.Fatalf("apply: exit %d %+v\n%s", res.Code, r, res.Stderr)
			}
			// other writers, after khook
			k("", "patch", "configmap", "settings", "--type", "merge", "-p", `{"data":{"k":"theirs-patch"}}`)
			k("", "scale", "deployment", "scaled", "--replicas", "5")

			dry := run(t, bins.Kubectl, kubeEnv(t), "", "destroy", "-f", spec, "--dry-run")
			if dry.Code != 0 {
				t.Fatalf("destroy --dry-run: exit %d\n%s%s", dry.Code, dry.Stdout, dry.Stderr)
			}
			out := strings.ReplaceAll(dry.Stdout, testcluster.Get(t).RESTConfig(t).Host, "SERVER")
			out = strings.ReplaceAll(strings.ReplaceAll(out, team, "TEAM"), ns, "NS")
			goldenFile(t, fmt.Sprintf("destroy-giveback-serverside-%v.txt", serverSide), out)

			r, res := applyJSON(t, "destroy", spec, kubeEnv(t))
			status, _, errText, _ := r.step(t, "app")
			if res.Code != 1 || status != "failed" || !strings.Contains(errText, "could not undo 1 of 6 objects: ConfigMap/frozen in "+ns+": the server rejects giving back khook's fields") || !strings.Contains(errText, "immutable") {
				t.Fatalf("destroy: exit %d, step %s %q; want exit 1 naming the rejected ConfigMap\n%s", res.Code, status, errText, res.Stderr)
			}
			after, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after.Spec, before.Spec) {
				t.Errorf("web's spec after destroy:\n%+v\nwant it as before khook:\n%+v", after.Spec, before.Spec)
			}
			delete(after.Annotations, "deployment.kubernetes.io/revision") // the controller's rollout count
			delete(before.Annotations, "deployment.kubernetes.io/revision")
			if !reflect.DeepEqual(after.Labels, before.Labels) || !reflect.DeepEqual(after.Annotations, before.Annotations) {
				t.Errorf("web's labels and annotations after destroy: %v %v, want %v %v", after.Labels, after.Annotations, before.Labels, before.Annotations)
			}
			scaled, err := cs.AppsV1().Deployments(ns).Get(ctx, "scaled", metav1.GetOptions{})
			if err != nil || *scaled.Spec.Replicas != 5 {
				t.Errorf("scaled: %v, want kubectl scale's 5 replicas kept", err)
			}
			settings, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"owner": "theirs", "k": "theirs-patch"}; !reflect.DeepEqual(settings.Data, want) || !reflect.DeepEqual(settings.Labels, map[string]string{"team": "a"}) {
				t.Errorf("settings after destroy: %v %v, want %v and only the team's label", settings.Data, settings.Labels, want)
			}
			if frozen, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "frozen", metav1.GetOptions{}); err != nil || frozen.Data["b"] != "khook" {
				t.Errorf("frozen: %v, want it left as it is", err)
			}
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("mine: %v, want it deleted", err)
			}
			teamAfter, err := cs.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{})
			if err != nil || teamAfter.DeletionTimestamp != nil {
				t.Fatalf("the existing namespace: %v, want it kept", err)
			}
			if !reflect.DeepEqual(teamAfter.Labels, teamBefore.Labels) || !reflect.DeepEqual(teamAfter.Annotations, teamBefore.Annotations) {
				t.Errorf("the existing namespace after destroy: %v %v, want %v %v", teamAfter.Labels, teamAfter.Annotations, teamBefore.Labels, teamBefore.Annotations)
			}
		})
	}
}

// TestGiveBackNeverShowsSecrets: a Secret and a ConfigMap that existed
// before khook are configured with a planted secret (KHOOK_SECRET_*):
// neither the secret nor the values it replaced (a Secret's old password,
// the old text around a secret in a ConfigMap) appear in khook's record on
// the objects, in destroy --dry-run's plan or in destroy's output, in any
// encoding; the plan says those fields cannot be given back, and destroy
// removes what khook added.
func TestGiveBackNeverShowsSecrets(t *testing.T) {
	cs := typed(t)
	ctx := context.Background()
	ns := testcluster.Get(t).NewNamespace(t, "givesecret")
	const old = "0ld-Passw0rd-before-khook"
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": old}}, metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"}, Data: map[string]string{"url": "postgres://app@db/main?password=" + old + "&ssl=on"}}, metav1.CreateOptions{FieldManager: "team-a"}); err != nil {
		t.Fatal(err)
	}
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: givesecret}
steps:
  - name: creds
    apply:
      namespace: %s
      manifests:
        - inline: |
            apiVersion: v1
            kind: Secret
            metadata: {name: creds}
            stringData: {password: "${TOKEN}", extra: added}
            ---
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: conf}
            data: {url: "postgres://app@db/main?password=${TOKEN}&ssl=on"}
`, ns))
	env := kubeEnv(t, "KHOOK_SECRET_TOKEN="+planted)
	if r, res := applyJSON(t, "apply", spec, env); res.Code != 0 {
		t.Fatalf("apply: exit %d %+v\n%s", res.Code, r, res.Stderr)
	}
	leaks := append(plantedForms(), old, base64.StdEncoding.EncodeToString([]byte(old)))
	check := func(what, text string) {
		t.Helper()
		for _, l := range leaks {
			if strings.Contains(text, l) {
				t.Errorf("%s carries %q:\n%s", what, l, text)
			}
		}
	}
	for _, o := range []struct{ kind, name string }{{"Secret", "creds"}, {"ConfigMap", "conf"}} {
		var ann map[string]string
		if o.kind == "Secret" {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, o.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ann = s.Annotations
		} else {
			c, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, o.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ann = c.Annotations
		}
		if ann["khook.io/previous"] == "" {
			t.Fatalf("%s/%s carries no record", o.kind, o.name)
		}
		check(o.kind+"/"+o.name+"'s record", ann["khook.io/previous"])
	}
	dry := run(t, bins.Kubectl, env, "", "destroy", "-f", spec, "--dry-run")
	check("destroy --dry-run", dry.Stdout+dry.Stderr)
	for _, want := range []string{
		".data.password: stays as khook wrote it (cannot be given back: khook never records a Secret's values)",
		".data.extra: removed (khook added it)",
		".data.url: stays as khook wrote it (cannot be given back: its value before khook held a secret, which khook never records)",
	} {
		if dry.Code != 0 || !strings.Contains(dry.Stdout, want) {
			t.Errorf("destroy --dry-run: exit %d, lacks %q:\n%s%s", dry.Code, want, dry.Stdout, dry.Stderr)
		}
	}
	r, res := applyJSON(t, "destroy", spec, env)
	check("destroy", res.Stdout+res.Stderr)
	if res.Code != 0 || r.Status != "ok" {
		t.Fatalf("destroy: exit %d\n%s", res.Code, res.Stderr)
	}
	s, err := cs.CoreV1().Secrets(ns).Get(ctx, "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Data["extra"]; ok || string(s.Data["password"]) != planted || s.Annotations["khook.io/previous"] != "" {
		t.Errorf("creds after destroy: keys %v, record %q; want extra removed, khook's password kept, no record", s.Data, s.Annotations["khook.io/previous"])
	}
}
