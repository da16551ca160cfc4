package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/state"
	"khook.io/core/steps/builtin"
)

// TestStatusConditional: a step with triggeredBy that the record has done
// with its inputs unchanged is conditional for apply (Dispose), and
// status says so: it runs if its trigger changes, and it is not among the
// steps the next apply resumes (status once said "will resume" of it).
// Its trigger, unchanged too, resumes.
func TestStatusConditional(t *testing.T) {
	ctx := context.Background()
	doc, err := (&load.Loader{Steps: builtin.Registry}).Load(load.Options{File: "-", Redactor: redact.New(), Stdin: strings.NewReader(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: cond}
state: {}
steps:
  - name: config
    apply:
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: web-config, namespace: default}
            data: {level: info}
  - name: restart-web
    needs: [config]
    triggeredBy: [config]
    rollout: {restart: deployment/web, namespace: default}
`)})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	c := (&Engine{Steps: builtin.Registry, Redactor: redact.New()}).Attach(doc, &kube.Clients{Typed: client, Config: &rest.Config{}}, Target{}, Options{})
	rec := state.Record{Version: state.RecordVersion, Spec: "cond", Command: "apply", RunStatus: "ok", StartedAt: time.Now(), Salt: "c2FsdA==", Steps: map[string]*state.StepRecord{}}
	ins, err := c.stepInputs(ctx, rec.SaltBytes(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range doc.Spec.Steps {
		rec.Steps[st.Name] = &state.StepRecord{Type: st.Type(), Status: state.StepOK, Hash: ins[i].Hash}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "khook-state-cond", Namespace: "default", Labels: map[string]string{state.ManagedByLabel: state.ManagedBy}},
		Data:       map[string][]byte{state.DataKey: data},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// apply's fates, by hand: the trigger resumes, the triggered step is
	// conditional
	resumed := Resumes(doc, &rec, hashesOf(ins))
	applied := Dispose(doc, CommandApply, nil, Facts{Resumed: resumed})
	if applied[0].Fate != FateResume || applied[1].Fate != FateConditional {
		t.Fatalf("apply's fates: %s, %s; want resume, conditional", applied[0].Fate, applied[1].Fate)
	}

	st, err := NewStatus(c).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"config":      {state.NextResume, "unchanged — will resume"},
		"restart-web": {NextConditional, "unchanged — runs if config changes"},
	}
	for _, s := range st.Steps {
		if w := want[s.Name]; s.Next != w[0] || s.Why != w[1] {
			t.Errorf("%s: next %q (%q), want %q (%q)", s.Name, s.Next, s.Why, w[0], w[1])
		}
	}
	if strings.Join(st.Resumes, ",") != "config" {
		t.Errorf("resumes %v, want [config]", st.Resumes)
	}
}
