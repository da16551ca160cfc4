//go:build integration

package apply_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/objects"
	"khook.io/core/step"
	"khook.io/core/steps/apply"
	"khook.io/core/testing/testcluster"
)

// kubectl runs the test cluster's kubectl with manifest on its standard
// input; it returns standard output and error, and the error.
func (e *env) kubectl(manifest string, args ...string) (string, string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.Kubectl(e.t), append([]string{"--kubeconfig", e.c.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(manifest)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

func (e *env) mustKubectl(manifest string, args ...string) string {
	e.t.Helper()
	out, errOut, err := e.kubectl(manifest, args...)
	if err != nil {
		e.t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return errOut
}

// lastApplied decodes obj's last-applied annotation with the namespace
// ns written as NS, for a comparison across namespaces.
func lastApplied(t *testing.T, obj *unstructured.Unstructured, ns string) map[string]any {
	t.Helper()
	v, ok := obj.GetAnnotations()[corev1.LastAppliedConfigAnnotation]
	if !ok {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(v, `"`+ns+`"`, `"NS"`)), &m); err != nil {
		t.Fatalf("last-applied of %s: %v", obj.GetName(), err)
	}
	return m
}

// fieldOwners is the managers owning obj's fields but status, by operation.
func fieldOwners(obj *unstructured.Unstructured) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Subresource == "" {
			out = append(out, e.Manager+"/"+string(e.Operation))
		}
	}
	return out
}

// lastAppliedOwners are the managers owning the last-applied annotation.
func lastAppliedOwners(obj *unstructured.Unstructured) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 != nil && bytes.Contains(e.FieldsV1.Raw, []byte(`"f:`+corev1.LastAppliedConfigAnnotation+`"`)) {
			out = append(out, e.Manager+"/"+string(e.Operation))
		}
	}
	return out
}

// capture collects a request's warnings.
type capture struct {
	mu   sync.Mutex
	list []string
}

func (c *capture) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, s)
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.list, "\n")
}

// TestApplyAsKubectl: an apply step does what kubectl apply does on the
// same manifests (issue 32), side by side on the test cluster: kubectl in
// one namespace, khook in another, compared.
func TestApplyAsKubectl(t *testing.T) {
	t.Run("exported YAML: resourceVersion cleared on create, plan and diff agree", func(t *testing.T) {
		h, k := newEnv(t), newEnv(t)
		data, err := os.ReadFile("testdata/kubectl/deploy-serverside.yaml")
		if err != nil {
			t.Fatal(err)
		}
		manifest := func(ns string) string { return strings.ReplaceAll(string(data), "namespace: test", "namespace: "+ns) }
		h.mustKubectl(manifest(h.ns), "apply", "-f", "-")
		exported := stepYAML("exported", "namespace: "+k.ns, inline(manifest(k.ns)))
		p, err := step.PlanStep(t.Context(), apply.New(apply.Options{}), k.request(exported))
		if err != nil || p.Action.Word != "create" {
			t.Errorf("plan: %+v, %v", p, err)
		}
		d, err := step.DiffStep(t.Context(), apply.New(apply.Options{}), k.request(exported))
		if err != nil || len(d.Objects) != 1 || d.Objects[0].Merged == nil || d.Objects[0].Unavailable != "" {
			t.Errorf("diff: %+v, %v", d, err)
		}
		if out := run(t, k.request(exported)); out.Message != "applied 1 object: 1 created" {
			t.Errorf("apply: %q", out.Message)
		}
		byKubectl, byKhook := h.get(deployGVR, h.ns, "nginx-deployment"), k.get(deployGVR, k.ns, "nginx-deployment")
		if a, b := lastApplied(t, byKubectl, h.ns), lastApplied(t, byKhook, k.ns); a == nil || !reflect.DeepEqual(a, b) {
			t.Errorf("last-applied: kubectl %v\nkhook %v", a, b)
		}
		// applied again, the manifest's resourceVersion is a precondition
		// the live object fails, for both
		_, kerr, err := h.kubectl(manifest(h.ns), "apply", "-f", "-")
		if err == nil || !strings.Contains(kerr, "Conflict") {
			t.Errorf("kubectl's second apply: %v %s", err, kerr)
		}
		if err := runErr(t, k.request(exported)); !strings.Contains(err.Error(), "the object has been modified") {
			t.Errorf("khook's second apply: %v", err)
		}
	})

	t.Run("serverSide after client-side: the annotation kept current, the fields migrated after the apply", func(t *testing.T) {
		h, k := newEnv(t), newEnv(t)
		first := configMap("cm", map[string]string{"a": "1", "b": "2", "c": "3"})
		for _, e := range []*env{h, k} {
			e.mustKubectl(first, "apply", "-n", e.ns, "-f", "-")
		}
		second := configMap("cm", map[string]string{"a": "10", "c": "3"}) // a changed, b dropped
		h.mustKubectl(second, "apply", "--server-side", "-n", h.ns, "-f", "-")
		if out := run(t, k.request(stepYAML("ssa", "namespace: "+k.ns+"\nserverSide: true", inline(second)))); out.Message != "applied 1 object: 1 configured" {
			t.Errorf("khook: %q", out.Message)
		}
		byKubectl, byKhook := h.get(cmGVR, h.ns, "cm"), k.get(cmGVR, k.ns, "cm")
		if !reflect.DeepEqual(byKubectl.Object["data"], byKhook.Object["data"]) {
			t.Errorf("data: kubectl %v, khook %v", byKubectl.Object["data"], byKhook.Object["data"])
		}
		if a, b := lastApplied(t, byKubectl, h.ns), lastApplied(t, byKhook, k.ns); a == nil || !reflect.DeepEqual(a, b) {
			t.Errorf("last-applied: kubectl %v\nkhook %v", a, b)
		}
		if a, b := lastAppliedOwners(byKubectl), lastAppliedOwners(byKhook); !reflect.DeepEqual(a, []string{objects.LastAppliedManager + "/Apply"}) || !reflect.DeepEqual(b, a) {
			t.Errorf("the annotation's owners: kubectl %v, khook %v", a, b)
		}
		for _, obj := range []*unstructured.Unstructured{byKubectl, byKhook} {
			for _, o := range fieldOwners(obj) {
				if strings.HasSuffix(o, "/Update") {
					t.Errorf("%s: a client-side manager still owns fields after the migration: %v", obj.GetNamespace(), fieldOwners(obj))
				}
			}
		}
		// a client-side apply after it prunes from the current annotation
		third := configMap("cm", map[string]string{"a": "10"})
		for _, e := range []*env{h, k} {
			e.mustKubectl(third, "apply", "-n", e.ns, "-f", "-")
		}
		byKubectl, byKhook = h.get(cmGVR, h.ns, "cm"), k.get(cmGVR, k.ns, "cm")
		if !reflect.DeepEqual(byKubectl.Object["data"], byKhook.Object["data"]) || !reflect.DeepEqual(byKhook.Object["data"], map[string]any{"a": "10"}) {
			t.Errorf("client-side after: kubectl %v, khook %v", byKubectl.Object["data"], byKhook.Object["data"])
		}
	})

	t.Run("serverSide: a manifest's literal annotation stored as the real configuration", func(t *testing.T) {
		h, k := newEnv(t), newEnv(t)
		m := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lit\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: '{\"literal\":\"text\"}'\ndata:\n  a: \"1\"\n"
		h.mustKubectl(m, "apply", "--server-side", "-n", h.ns, "-f", "-")
		run(t, k.request(stepYAML("lit", "namespace: "+k.ns+"\nserverSide: true", inline(m))))
		a, b := lastApplied(t, h.get(cmGVR, h.ns, "lit"), h.ns), lastApplied(t, k.get(cmGVR, k.ns, "lit"), k.ns)
		if a == nil || a["literal"] != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("last-applied: kubectl %v\nkhook %v", a, b)
		}
		run(t, k.request(stepYAML("lit", "namespace: "+k.ns+"\nserverSide: true", inline(m)))) // and again, no conflict with itself
	})

	t.Run("client-side over an object without the annotation: kubectl's warning", func(t *testing.T) {
		h, k := newEnv(t), newEnv(t)
		m := configMap("plain", map[string]string{"a": "1"})
		for _, e := range []*env{h, k} {
			e.mustKubectl(m, "create", "-n", e.ns, "-f", "-")
		}
		kubectlWarns := h.mustKubectl(m, "apply", "-n", h.ns, "-f", "-")
		req := k.request(stepYAML("plain", "namespace: "+k.ns, inline(m)))
		var warned capture
		req.Warn = warned.add
		run(t, req)
		const gist = "is missing the kubectl.kubernetes.io/last-applied-configuration annotation which is required by"
		if !strings.Contains(kubectlWarns, gist) || !strings.Contains(warned.String(), gist) || !strings.Contains(warned.String(), "configmaps/plain") {
			t.Errorf("kubectl: %q\nkhook: %q", kubectlWarns, warned.String())
		}
		if a, b := lastApplied(t, h.get(cmGVR, h.ns, "plain"), h.ns), lastApplied(t, k.get(cmGVR, k.ns, "plain"), k.ns); a == nil || !reflect.DeepEqual(a, b) {
			t.Errorf("the annotation patched in: kubectl %v\nkhook %v", a, b)
		}
	})

	t.Run("--field-manager takes over what kubectl applied server-side", func(t *testing.T) {
		h, k := newEnv(t), newEnv(t)
		first := configMap("taken", map[string]string{"a": "1", "b": "2"})
		for _, e := range []*env{h, k} {
			e.mustKubectl(first, "apply", "--server-side", "-n", e.ns, "-f", "-")
		}
		second := configMap("taken", map[string]string{"a": "3"})
		h.mustKubectl(second, "apply", "--server-side", "-n", h.ns, "-f", "-")
		ssa := stepYAML("taken", "namespace: "+k.ns+"\nserverSide: true", inline(second))
		err := runErr(t, k.request(ssa)) // as khook: kubectl's fields are kubectl's
		if !strings.Contains(err.Error(), `.data.a is owned by field manager "kubectl"`) {
			t.Errorf("without --field-manager: %v", err)
		}
		// the refused apply changed nothing: the record khook wrote
		// before it (decision 210) is taken back with it
		if refused := k.get(cmGVR, k.ns, "taken"); refused.GetAnnotations()[objects.AnnotationPrevious] != "" || len(fieldOwners(refused)) != 1 {
			t.Errorf("after the refused apply: annotations %v, owners %v; want nothing of khook's", refused.GetAnnotations(), fieldOwners(refused))
		}
		req := k.request(ssa)
		req.FieldManager = "kubectl"
		run(t, req)
		a, b := h.get(cmGVR, h.ns, "taken"), k.get(cmGVR, k.ns, "taken")
		if !reflect.DeepEqual(a.Object["data"], b.Object["data"]) || !reflect.DeepEqual(b.Object["data"], map[string]any{"a": "3"}) {
			t.Errorf("kubectl %v, khook as kubectl %v", a.Object["data"], b.Object["data"])
		}
		// Khook configured an object its spec did not create, so it keeps
		// a record of what it overwrote, which kubectl does not: the
		// record's manager (the field manager plus -previous) owns the
		// record alone, and it holds kubectl's values before khook, a
		// taken over field (a) and a dropped one (b) alike. Apart from
		// it, the object is kubectl's.
		const recordOwner = "kubectl-previous/Apply"
		if owners := fieldOwners(b); !slices.Contains(owners, recordOwner) || !reflect.DeepEqual(fieldOwners(a), slices.DeleteFunc(owners, func(o string) bool { return o == recordOwner })) {
			t.Errorf("owners: kubectl %v, khook %v; want kubectl's and the record's %s", fieldOwners(a), fieldOwners(b), recordOwner)
		}
		for _, e := range b.GetManagedFields() {
			if e.Manager+"/"+string(e.Operation) == recordOwner && string(e.FieldsV1.Raw) != `{"f:metadata":{"f:annotations":{"f:`+objects.AnnotationPrevious+`":{}}}}` {
				t.Errorf("%s owns %s, want the record alone", recordOwner, e.FieldsV1.Raw)
			}
		}
		var rec struct {
			Values map[string]any `json:"values"`
		}
		if err := json.Unmarshal([]byte(b.GetAnnotations()[objects.AnnotationPrevious]), &rec); err != nil || !reflect.DeepEqual(rec.Values["data"], map[string]any{"a": "1", "b": "2"}) {
			t.Errorf("khook's record %s (%v), want kubectl's a and b", b.GetAnnotations()[objects.AnnotationPrevious], err)
		}
		withoutRecord := maps.Clone(b.GetAnnotations())
		delete(withoutRecord, objects.AnnotationPrevious)
		if !maps.Equal(a.GetAnnotations(), withoutRecord) {
			t.Errorf("annotations: kubectl %v, khook %v", a.GetAnnotations(), b.GetAnnotations())
		}
		// destroy, as the same manager, gives back kubectl's object as
		// khook found it, and leaves nothing of khook's
		destroy := k.request(ssa)
		destroy.FieldManager = "kubectl"
		if _, err := step.DestroyStep(t.Context(), apply.New(apply.Options{}), destroy); err != nil {
			t.Fatalf("destroy: %v", err)
		}
		back := k.get(cmGVR, k.ns, "taken")
		if !reflect.DeepEqual(back.Object["data"], map[string]any{"a": "1", "b": "2"}) || back.GetAnnotations()[objects.AnnotationPrevious] != "" {
			t.Errorf("after destroy: data %v, annotations %v; want kubectl's a and b back, no record", back.Object["data"], back.GetAnnotations())
		}
		for _, o := range fieldOwners(back) {
			if strings.HasPrefix(o, "kubectl/") || strings.HasPrefix(o, "kubectl-previous/") {
				t.Errorf("after destroy %s owns fields still: %v", o, fieldOwners(back))
			}
		}
	})
}
