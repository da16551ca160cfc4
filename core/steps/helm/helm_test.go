package helm

import (
	"testing"

	khelm "khook.io/core/helm"
	"khook.io/core/step"
)

// TestRunLabel: the label the helm package writes on a revision is the
// one the step contract names.
func TestRunLabel(t *testing.T) {
	if khelm.RunLabel != step.RunLabel || khelm.RunLockLabel != step.RunLockLabel {
		t.Errorf("helm writes %q and %q, the step contract names %q and %q", khelm.RunLabel, khelm.RunLockLabel, step.RunLabel, step.RunLockLabel)
	}
}

// TestRunOf: the request's run reaches the helm package, a zero one as
// a run that knows of no abandoned run.
func TestRunOf(t *testing.T) {
	tests := []struct {
		name  string
		run   step.RunInfo
		id    string
		asked string
		gone  bool
	}{
		{name: "zero", asked: "a"},
		{name: "id", run: step.RunInfo{ID: "me"}, id: "me", asked: "a"},
		{name: "abandoned", run: step.RunInfo{ID: "me", Abandoned: func(id string) bool { return id == "a" }}, id: "me", asked: "a", gone: true},
		{name: "other", run: step.RunInfo{ID: "me", Abandoned: func(id string) bool { return id == "a" }}, id: "me", asked: "b"},
		{name: "empty id", run: step.RunInfo{Abandoned: func(string) bool { return true }}, asked: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runOf(&step.Request{Run: tt.run})
			if r.ID != tt.id {
				t.Errorf("ID = %q, want %q", r.ID, tt.id)
			}
			if got := r.Abandoned(tt.asked); got != tt.gone {
				t.Errorf("Abandoned(%q) = %v, want %v", tt.asked, got, tt.gone)
			}
		})
	}
}
