package run

import (
	"context"
	"testing"

	"khook.io/core/plan"
)

// TestTriggers: a task with triggers runs only when one of them ended ok
// having changed something; otherwise it is skipped with its reason and
// still satisfies its needers.
func TestTriggers(t *testing.T) {
	// config <- mid <- restart <- after; restart is triggered by config and mid
	g, _ := plan.NewGraph([]plan.Node{{Name: "config"}, {Name: "mid", Needs: []string{"config"}}, {Name: "restart", Needs: []string{"mid"}}, {Name: "after", Needs: []string{"restart"}}})
	tests := []struct {
		name        string
		config, mid Outcome
		midErr      error
		midSkip     string
		want        string // restart's status
	}{
		{"config changed", Outcome{Changed: true}, Outcome{}, nil, "", StatusOK},
		{"transitive trigger changed", Outcome{}, Outcome{Changed: true}, nil, "", StatusOK},
		{"nothing changed", Outcome{}, Outcome{}, nil, "", StatusSkipped},
		{"skipIf found it done", Outcome{Skipped: true, SkipReason: "exists", Changed: true}, Outcome{}, nil, "", StatusSkipped},
		{"trigger resumed", Outcome{}, Outcome{}, nil, "unchanged (state record)", StatusSkipped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			tasks := []Task{
				{Name: "config", Attempt: func(context.Context, int) (Outcome, error) { return tt.config, nil }},
				{Name: "mid", Skip: tt.midSkip, Attempt: func(context.Context, int) (Outcome, error) { return tt.mid, tt.midErr }},
				{Name: "restart", Triggers: []int{0, 1}, NotTriggered: "not triggered", Attempt: func(context.Context, int) (Outcome, error) {
					ran = true
					return Outcome{Changed: true}, nil
				}},
				{Name: "after", Attempt: func(context.Context, int) (Outcome, error) { return Outcome{}, nil }},
			}
			res := Schedule(context.Background(), g, tasks, Options{})
			r := res.Steps[2]
			if r.Status != tt.want || ran != (tt.want == StatusOK) {
				t.Fatalf("restart: %s (ran %v), want %s", r.Status, ran, tt.want)
			}
			if tt.want == StatusSkipped && r.SkipReason != "not triggered" {
				t.Errorf("skip reason %q", r.SkipReason)
			}
			if res.Steps[3].Status != StatusOK || res.Status != RunOK {
				t.Errorf("after: %s, run %s: a task not triggered must satisfy its needers", res.Steps[3].Status, res.Status)
			}
		})
	}
}
