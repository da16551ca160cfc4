package spec

import "testing"

func TestDisplayPath(t *testing.T) {
	tests := []struct{ path, step, want string }{
		{"steps[3].helm.repo", "cilium", "steps[3] (cilium).helm.repo"},
		{"steps[3]", "cilium", "steps[3] (cilium)"},
		{"steps[3].name", "", "steps[3].name"},
		{"steps[12].name", "Bad Name", `steps[12] ("Bad Name").name`},
		{"steps[0].name", "a\u200bb", `steps[0] ("a\u200bb").name`},
		{"metadata.name", "x", "metadata.name"},
	}
	for _, tt := range tests {
		e := &FieldError{Path: tt.path, Step: tt.step}
		if got := e.DisplayPath(); got != tt.want {
			t.Errorf("%s with %q: got %s, want %s", tt.path, tt.step, got, tt.want)
		}
	}
}
