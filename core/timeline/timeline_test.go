package timeline

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"khook.io/core/event"
	"khook.io/core/run"
	"khook.io/core/state"
)

// graph is a run.Graph of named steps and their needs.
type graph struct {
	names []string
	needs map[string][]string
}

func (g graph) Len() int { return len(g.names) }

func (g graph) index(n string) int { return slices.Index(g.names, n) }

func (g graph) Needs(i int) []int {
	var out []int
	for _, n := range g.needs[g.names[i]] {
		out = append(out, g.index(n))
	}
	return out
}

func (g graph) Needers(i int) []int {
	var out []int
	for j, n := range g.names {
		if slices.Contains(g.needs[n], g.names[i]) {
			out = append(out, j)
		}
	}
	return out
}

// runChains runs, with the real scheduler, the steps of g each sleeping
// its duration, and returns the run as collected from its events.
func runChains(t *testing.T, g graph, durations map[string]time.Duration) *Run {
	t.Helper()
	tasks := make([]run.Task, g.Len())
	var defs []Def
	for i, n := range g.names {
		d := durations[n]
		tasks[i] = run.Task{Name: n, Type: "wait", Attempt: func(ctx context.Context, _ int) (run.Outcome, error) {
			end := event.Phase(ctx, event.PhaseWait, "sleep")
			time.Sleep(d)
			end(nil)
			return run.Outcome{}, nil
		}}
		defs = append(defs, Def{Name: n, Type: "wait", Needs: g.needs[n]})
	}
	c := NewCollector()
	// the engine hands each attempt its context with the run's sink; a
	// task here does it itself
	for i := range tasks {
		fn, name := tasks[i].Attempt, tasks[i].Name
		tasks[i].Attempt = func(ctx context.Context, n int) (run.Outcome, error) {
			return fn(event.WithAttempt(ctx, c, name, "wait", n), n)
		}
	}
	res := run.Schedule(context.Background(), g, tasks, run.Options{Events: c})
	if res.Status != run.RunOK {
		t.Fatalf("run %s", res.Status)
	}
	return c.Run("chains", "apply", "", defs, nil)
}

// TestCriticalPathIsTheLongerChain: of two needs: chains run side by side
// with known durations, the critical path is the longer one, whichever
// it is, and it holds its steps in order.
func TestCriticalPathIsTheLongerChain(t *testing.T) {
	g := graph{names: []string{"a1", "a2", "a3", "b1", "b2"}, needs: map[string][]string{"a2": {"a1"}, "a3": {"a2"}, "b2": {"b1"}}}
	ms := time.Millisecond
	for _, c := range []struct {
		durations map[string]time.Duration
		want      []string
	}{
		{map[string]time.Duration{"a1": 100 * ms, "a2": 150 * ms, "a3": 100 * ms, "b1": 100 * ms, "b2": 100 * ms}, []string{"a1", "a2", "a3"}},
		{map[string]time.Duration{"a1": 50 * ms, "a2": 50 * ms, "a3": 50 * ms, "b1": 150 * ms, "b2": 250 * ms}, []string{"b1", "b2"}},
	} {
		r := runChains(t, g, c.durations)
		if got := r.CriticalPath(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("durations %v: critical path %v, want %v", c.durations, got, c.want)
		}
		for _, s := range r.Steps {
			if len(s.Attempts) != 1 || len(s.Attempts[0].Waits) != 1 {
				t.Fatalf("%s: %+v: want one attempt with one wait", s.Name, s.Attempts)
			}
			a := s.Attempts[0]
			if got := a.End.Sub(a.Start); got < c.durations[s.Name] {
				t.Errorf("%s lasted %s, less than its %s", s.Name, got, c.durations[s.Name])
			}
			if w := a.Waits[0]; w.Start.Before(a.Start) || w.End.After(a.End) {
				t.Errorf("%s: its wait %v is not inside its attempt %v", s.Name, w, a.Interval)
			}
		}
	}
}

// TestCriticalPathFollowsTheNeedWaitedFor: a step with two needs is on
// the path after the one that ended last; steps that did not run in the
// run are not on it.
func TestCriticalPathFollowsTheNeedWaitedFor(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	span := func(a, b int) []Attempt {
		return []Attempt{{Interval: Interval{Start: t0.Add(time.Duration(a) * time.Second), End: t0.Add(time.Duration(b) * time.Second)}}}
	}
	r := &Run{Steps: []Step{
		{Name: "ns", Status: Resumed},
		{Name: "cni", Needs: []string{"ns"}, Attempts: span(0, 5)},
		{Name: "certs", Needs: []string{"cni"}, Attempts: span(5, 7)},
		{Name: "ingress", Needs: []string{"cni"}, Attempts: span(5, 9)},
		{Name: "gitops", Needs: []string{"certs", "ingress"}, Attempts: span(9, 12)},
		{Name: "early", Attempts: span(0, 1)},
	}}
	if got, want := r.CriticalPath(), []string{"cni", "ingress", "gitops"}; !reflect.DeepEqual(got, want) {
		t.Errorf("critical path %v, want %v", got, want)
	}
	if got := (&Run{Steps: []Step{{Name: "a", Status: Resumed}}}).CriticalPath(); got != nil {
		t.Errorf("a run that ran nothing: %v", got)
	}
}

// TestRecordRoundTrip: the attempts the collector saw, kept in the
// record as the journal keeps them, come back from the record as they
// were (to the millisecond), a retried attempt and its waits included;
// a step the record has from an earlier run is resumed.
func TestRecordRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	c := NewCollector()
	emit := func(k event.Kind, step string, attempt, ms int, phase string) {
		c.Emit(event.Event{Kind: k, Step: step, Type: "helm", Attempt: attempt, Time: at(ms), Phase: phase, Detail: "readiness"})
	}
	c.Emit(event.Event{Kind: event.RunStarted, Time: at(0)})
	emit(event.StepStarted, "web", 1, 10, "")
	emit(event.PhaseStarted, "web", 1, 20, event.PhaseWait)
	emit(event.PhaseEnded, "web", 1, 900, event.PhaseWait)
	emit(event.StepRetrying, "web", 1, 910, "")
	emit(event.StepStarted, "web", 2, 1910, "")
	emit(event.PhaseStarted, "web", 2, 1920, event.PhaseHook)
	emit(event.StepSucceeded, "web", 2, 2500, "") // ended while its hook wait was open
	c.Emit(event.Event{Kind: event.RunFinished, Time: at(2600), Message: "ok"})

	start, times := Record(c.Attempts("web"))
	want := []state.AttemptTimes{{Start: 0, End: 900, Waits: [][2]int64{{10, 890}}}, {Start: 1900, End: 2490, Waits: [][2]int64{{1910, 2490}}}}
	if !start.Equal(at(10)) || !reflect.DeepEqual(times, want) {
		t.Fatalf("Record: %s %+v, want %s %+v", start, times, at(10), want)
	}
	fin := at(2600)
	rec := &state.Record{Spec: "s", Command: "apply", RunStatus: "ok", StartedAt: at(0), FinishedAt: &fin, Steps: map[string]*state.StepRecord{
		"web": {Type: "helm", Status: state.StepOK, Attempts: 2, DurationMs: 2490, FinishedAt: at(2500), StartedAt: &start, Timeline: times},
		"old": {Type: "apply", Status: state.StepOK, Attempts: 1, DurationMs: 5, FinishedAt: at(-60000)},
	}}
	r := FromRecord(rec, []Def{{Name: "old", Type: "apply"}, {Name: "web", Type: "helm", Needs: []string{"old"}}, {Name: "new", Type: "wait"}})
	fromEvents := c.Run("s", "apply", "", []Def{{Name: "web", Type: "helm"}}, nil).Steps[0].Attempts
	if got := r.Steps[1].Attempts; !reflect.DeepEqual(got, fromEvents) {
		t.Errorf("from the record %+v, from the events %+v", got, fromEvents)
	}
	if r.Steps[0].Status != Resumed || r.Steps[2].Status != NotRun || r.Steps[1].Status != "ok" {
		t.Errorf("statuses %s %s %s", r.Steps[0].Status, r.Steps[1].Status, r.Steps[2].Status)
	}
	// an entry without attempt times (trimmed, or an earlier khook): one
	// bar from its start to its end
	rec.Steps["web"].Timeline, rec.Steps["web"].StartedAt = nil, nil
	r = FromRecord(rec, []Def{{Name: "web"}})
	if a := r.Steps[0].Attempts; len(a) != 1 || !a[0].Start.Equal(at(10)) || !a[0].End.Equal(at(2500)) {
		t.Errorf("without times: %+v", a)
	}
}
