package cli

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
	"khook.io/core/lock"
	"khook.io/core/redact"
	"khook.io/core/state"
)

// TestHolderEnded: the note of a run watching a lock whose holder looks
// gone says the holder exited without releasing it when the holder's own
// record says its run ended after it took the lock, and says nothing
// otherwise.
func TestHolderEnded(t *testing.T) {
	ctx := context.Background()
	f := NewSpecFlags()
	f.File = "testdata/golden-state-spec.yaml"
	so, err := f.ToOptions(SpecSource{Loader: builtinLoader(), Redactor: redact.New()})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := so.Load()
	if err != nil {
		t.Fatal(err)
	}
	took := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := lock.Holder{ID: "aaaa", Acquired: took, Renewed: took.Add(40 * time.Second)}
	for _, tc := range []struct {
		name     string
		status   string
		finished time.Time
		want     string
	}{
		{"ended after taking the lock", "interrupted", took.Add(42 * time.Second), "(its record says its apply ended interrupted 42s after it took the lock: it exited without releasing it)"},
		{"still running", "running", time.Time{}, ""},
		{"an earlier run's end", "ok", took.Add(-time.Minute), ""},
		{"no record", "", time.Time{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.status != "" {
				rec := state.Record{Version: state.RecordVersion, Spec: "golden-state", Command: "apply", RunStatus: tc.status, StartedAt: took, Salt: "c2FsdA=="}
				if !tc.finished.IsZero() {
					rec.FinishedAt = &tc.finished
				}
				data, err := json.Marshal(rec)
				if err != nil {
					t.Fatal(err)
				}
				sec := &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: "khook-state-golden-state", Namespace: "default", Labels: map[string]string{state.ManagedByLabel: state.ManagedBy}},
					Data:       map[string][]byte{state.DataKey: data},
				}
				if _, err := client.CoreV1().Secrets("default").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			s := &session{doc: doc, clients: &kube.Clients{Typed: client, Config: &rest.Config{}}}
			got := s.holderEnded(ctx, h)
			if strings.TrimSpace(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
