package render

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"khook.io/core/state"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./render -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./render -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func fixedStatus() *state.Status {
	start := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	end := start.Add(12300 * time.Millisecond)
	rec := &state.Record{
		Version: 1, Spec: "platform", SpecHash: "sha256:abc", KhookVersion: "v1.0.0", Command: "apply", RunStatus: "failed",
		StartedAt: start, UpdatedAt: end, FinishedAt: &end, Salt: "c2FsdA==",
		Steps: map[string]*state.StepRecord{
			"namespace": {Type: "apply", Hash: "sha256:1", Status: state.StepOK, Attempts: 1, DurationMs: 120, FinishedAt: start, Detail: "applied 1 object: 1 created"},
			"cilium":    {Type: "helm", Hash: "sha256:2", Status: state.StepOK, Attempts: 1, DurationMs: 8400, FinishedAt: start, Detail: "installed cilium 1.18.4 (revision 1)"},
			"migrate":   {Type: "job", Hash: "sha256:3", Status: state.StepFailed, Attempts: 2, DurationMs: 3000, FinishedAt: end, Error: "Job default/migrate failed: BackoffLimitExceeded"},
			"ready":     {Type: "wait", Hash: "sha256:4", Status: state.StepSkipped, FinishedAt: end, Detail: "needs migrate, which failed"},
			"old-step":  {Type: "apply", Hash: "sha256:5", Status: state.StepOK, Attempts: 1, DurationMs: 10, FinishedAt: start},
		},
	}
	steps := []state.SpecStep{
		{Name: "namespace", Type: "apply", Hash: "sha256:1", Resumes: true, HashCannotSee: []string{"manifests[1] (url https://example.com/namespace.yaml)"}},
		{Name: "cilium", Type: "helm", Hash: "sha256:2-edited", HashCannotSee: []string{"chart cilium from https://helm.cilium.io/ (version ~1.18 is a range)", "valuesFrom[0] (url https://example.com/cilium-values.yaml)"}},
		{Name: "migrate", Type: "job", Hash: "sha256:3"},
		{Name: "ready", Type: "wait", Hash: "sha256:4"},
		{Name: "argocd", Type: "helm", Hash: "sha256:6", Excluded: true, When: `vars.get("ARGOCD", "false") == "true"`},
		{Name: "new-step", Type: "apply", Hash: "sha256:7"},
	}
	return state.Compare(state.Location{Namespace: "default", Name: "khook-state-platform"}, rec, steps)
}

func TestStatusGolden(t *testing.T) {
	st := fixedStatus()
	var text, js, none bytes.Buffer
	if err := StatusText(&text, st); err != nil {
		t.Fatal(err)
	}
	if err := JSON(&js, NewStatusReport(st)); err != nil {
		t.Fatal(err)
	}
	if err := JSON(&none, NewStatusReport(nil)); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.txt", text.Bytes())
	golden(t, "status.json", js.Bytes())
	if none.String() != "{\n  \"found\": false\n}\n" {
		t.Fatalf("no record: %q", none.String())
	}
	if len(st.Resumes) != 1 || st.Resumes[0] != "namespace" || len(st.Removed) != 1 || st.Removed[0] != "old-step" {
		t.Fatalf("resumes %v, removed %v", st.Resumes, st.Removed)
	}
}
