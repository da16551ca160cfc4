package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/state"
	"khook.io/core/steps/builtin"
)

// statusOptions builds status's options alone for spec, reading the
// record through client.
func statusOptions(t *testing.T, spec, output string, client kubernetes.Interface) (*StatusOptions, *strings.Builder) {
	t.Helper()
	var out strings.Builder
	f := NewStatusFlags()
	f.Spec.File = spec
	if err := f.Output.Set(output); err != nil {
		t.Fatal(err)
	}
	o, err := f.ToOptions(genericiooptions.IOStreams{Out: &out}, SpecSource{Loader: builtinLoader(), Redactor: redact.New()}, &Clusters{Steps: builtin.Registry})
	if err != nil {
		t.Fatal(err)
	}
	o.Clients = func(context.Context) (*kube.Clients, error) {
		return &kube.Clients{Typed: client, Config: &rest.Config{}}, nil
	}
	return o, &out
}

// TestStatusOptions: status's options, built alone with a fake clientset,
// say a spec is not applied yet, then show the record a run left: when
// it ran and each step's outcome.
func TestStatusOptions(t *testing.T) {
	ctx := context.Background()
	const spec = "testdata/golden-state-spec.yaml"
	client := fake.NewClientset()

	o, out := statusOptions(t, spec, "text", client)
	if err := o.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if want := "golden-state is not applied yet: no state record at default/khook-state-golden-state.\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}

	// the record a run of apply left: crds succeeded, operator failed
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec, err := json.Marshal(state.Record{Version: state.RecordVersion, Spec: "golden-state", Command: "apply", RunStatus: "failed", StartedAt: started, FinishedAt: &started, Salt: "c2FsdA==", Steps: map[string]*state.StepRecord{
		"crds":     {Type: "apply", Status: state.StepOK, Hash: "x", FinishedAt: started, Detail: "1 object created"},
		"operator": {Type: "helm", Status: state.StepFailed, FinishedAt: started, Error: "install failed: boom"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "khook-state-golden-state", Namespace: "default", Labels: map[string]string{state.ManagedByLabel: state.ManagedBy}},
		Data:       map[string][]byte{state.DataKey: rec},
	}
	if _, err := client.CoreV1().Secrets("default").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for output, wants := range map[string][]string{
		"text": {"crds", "operator", "install failed: boom"},
		"json": {`"runStatus": "failed"`, `"name": "operator"`},
	} {
		o, out := statusOptions(t, spec, output, client)
		if err := o.Run(ctx); err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s output lacks %q:\n%s", output, w, out.String())
			}
		}
	}
}

// TestStatusNeedsState: a spec without a state: block is refused before
// any cluster is asked.
func TestStatusNeedsState(t *testing.T) {
	o, _ := statusOptions(t, "testdata/golden-spec.yaml", "text", nil)
	o.Clients = func(context.Context) (*kube.Clients, error) {
		t.Fatal("the cluster was asked")
		return nil, nil
	}
	var inv *load.InvalidError
	if err := o.Run(context.Background()); !errors.As(err, &inv) || !strings.Contains(err.Error(), "add state: {}") {
		t.Errorf("want an invalid spec, got %v", err)
	}
}
