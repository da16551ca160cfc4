// Package timeline is when a run's steps ran: a bar per step and attempt
// on a time axis, the waits inside each attempt, and the critical path
// (the needs: chain that set the run's total). It is drawn from the same
// events the progress lines come from (Collector, a sink of the run's
// events) or from the state record, which keeps those times
// (FromRecord); core/render draws it.
package timeline

import (
	"slices"
	"sync"
	"time"

	"khook.io/core/event"
	"khook.io/core/state"
)

// Step outcomes the timeline shows beyond the run's own (ok, failed,
// interrupted, skipped).
const (
	// Resumed: the state record let the run skip the step (it succeeded
	// in an earlier run with the same inputs).
	Resumed = "resumed"
	// NotRun: the record has no entry of the step (never ran).
	NotRun = "not run"
	// Running: the run had not recorded the step's end (it was killed).
	Running = "running"
)

// Run is one run of a spec on one cluster, as the timeline draws it.
type Run struct {
	Spec, Command string
	// Status is the run's (ok, failed, interrupted, running).
	Status string
	// Start and End bound the run; End is zero while it runs.
	Start, End time.Time
	TraceID    string
	Steps      []Step // in the spec's order
}

// Step is one step of a run.
type Step struct {
	Name, Type string
	// Status is how the step ended (ok, failed, interrupted, skipped, or
	// one of Resumed, NotRun, Running).
	Status string
	// Needs are the steps it waits for (needs:).
	Needs []string
	// Attempts are its attempts in order; none for a step that never ran
	// in this run. Every attempt but the last failed.
	Attempts []Attempt
	// At is when a step without attempts ended (skipped by the run);
	// zero when it did not end in this run.
	At time.Time
}

// Interval is a span of time.
type Interval struct{ Start, End time.Time }

// Attempt is one attempt of a step: when it ran, and when it waited.
type Attempt struct {
	Interval
	Waits []Interval
}

// Start is when the step's first attempt began (zero: none).
func (s *Step) Start() time.Time {
	if len(s.Attempts) == 0 {
		return time.Time{}
	}
	return s.Attempts[0].Start
}

// End is when the step's last attempt ended (zero: none).
func (s *Step) End() time.Time {
	if len(s.Attempts) == 0 {
		return time.Time{}
	}
	return s.Attempts[len(s.Attempts)-1].End
}

// Def is what the spec says of a step: its name, type and needs.
type Def struct {
	Name, Type string
	Needs      []string
}

// Collector is a sink of a run's events that keeps when each attempt of
// each step ran and waited (event.PhaseWait and event.PhaseHook phases),
// and how each step ended. Safe for concurrent use.
type Collector struct {
	mu         sync.Mutex
	start, end time.Time
	status     string
	steps      map[string]*collected
}

// collected is what the collector knows of one step.
type collected struct {
	typ      string
	status   string
	at       time.Time
	attempts []Attempt
	// open are the waits begun and not ended, by phase and detail
	open map[string][]time.Time
}

// NewCollector returns an empty collector.
func NewCollector() *Collector { return &Collector{steps: map[string]*collected{}} }

// Emit records e.
func (c *Collector) Emit(e event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Kind {
	case event.RunStarted:
		c.start = e.Time
		return
	case event.RunFinished:
		c.end, c.status = e.Time, e.Message
		return
	}
	if e.Step == "" {
		return
	}
	s := c.steps[e.Step]
	if s == nil {
		s = &collected{typ: e.Type}
		c.steps[e.Step] = s
	}
	last := func() *Attempt {
		if len(s.attempts) == 0 {
			return nil
		}
		return &s.attempts[len(s.attempts)-1]
	}
	switch e.Kind {
	case event.StepStarted:
		s.attempts = append(s.attempts, Attempt{Interval: Interval{Start: e.Time}})
		s.open = nil
	case event.PhaseStarted:
		if isWait(e.Phase) && last() != nil {
			if s.open == nil {
				s.open = map[string][]time.Time{}
			}
			k := e.Phase + "\x00" + e.Detail
			s.open[k] = append(s.open[k], e.Time)
		}
	case event.PhaseEnded:
		k := e.Phase + "\x00" + e.Detail
		if a := last(); isWait(e.Phase) && a != nil && len(s.open[k]) > 0 {
			begun := s.open[k][len(s.open[k])-1]
			s.open[k] = s.open[k][:len(s.open[k])-1]
			a.Waits = append(a.Waits, Interval{Start: begun, End: e.Time})
		}
	case event.StepRetrying:
		if a := last(); a != nil && a.End.IsZero() {
			a.End = e.Time
			c.closeWaits(s, e.Time)
		}
	case event.StepSucceeded, event.StepFailed, event.StepInterrupted, event.StepSkipped:
		s.status, s.at = statusOf(e.Kind), e.Time
		if a := last(); a != nil && a.End.IsZero() {
			a.End = e.Time
			c.closeWaits(s, e.Time)
		}
	}
}

// closeWaits ends the waits still open in the last attempt of s at t
// (an attempt that ended while it waited).
func (c *Collector) closeWaits(s *collected, t time.Time) {
	a := &s.attempts[len(s.attempts)-1]
	for _, begun := range s.open {
		for _, b := range begun {
			a.Waits = append(a.Waits, Interval{Start: b, End: t})
		}
	}
	s.open = nil
	slices.SortFunc(a.Waits, func(x, y Interval) int { return x.Start.Compare(y.Start) })
}

func isWait(phase string) bool { return phase == event.PhaseWait || phase == event.PhaseHook }

func statusOf(k event.Kind) string {
	switch k {
	case event.StepSucceeded:
		return "ok"
	case event.StepFailed:
		return "failed"
	case event.StepInterrupted:
		return "interrupted"
	}
	return "skipped"
}

// Attempts returns the attempts collected of the named step so far.
func (c *Collector) Attempts(name string) []Attempt {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.steps[name]
	if s == nil {
		return nil
	}
	out := make([]Attempt, len(s.attempts))
	for i, a := range s.attempts {
		out[i] = Attempt{Interval: a.Interval, Waits: slices.Clone(a.Waits)}
	}
	return out
}

// Run is the run collected, its steps in the order of defs. A step the
// run skipped up front because the record resumes it is Resumed when
// resumed says so.
func (c *Collector) Run(spec, command, traceID string, defs []Def, resumed func(name string) bool) *Run {
	c.mu.Lock()
	r := &Run{Spec: spec, Command: command, Status: c.status, Start: c.start, End: c.end, TraceID: traceID}
	c.mu.Unlock()
	if r.Status == "" {
		r.Status = Running
	}
	for _, d := range defs {
		st := Step{Name: d.Name, Type: d.Type, Needs: d.Needs, Status: NotRun, Attempts: c.Attempts(d.Name)}
		c.mu.Lock()
		if s := c.steps[d.Name]; s != nil {
			st.At = s.at
			switch {
			case s.status != "":
				st.Status = s.status
			case len(st.Attempts) > 0:
				st.Status = Running
			}
		}
		c.mu.Unlock()
		if st.Status == "skipped" && len(st.Attempts) == 0 && resumed != nil && resumed(d.Name) {
			st.Status = Resumed
		}
		r.Steps = append(r.Steps, st)
	}
	return r
}

// Record is the attempts' times as the state record keeps them: in
// milliseconds after the first attempt's start, which it returns.
func Record(attempts []Attempt) (time.Time, []state.AttemptTimes) {
	if len(attempts) == 0 {
		return time.Time{}, nil
	}
	base := attempts[0].Start
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.Sub(base).Milliseconds()
	}
	out := make([]state.AttemptTimes, len(attempts))
	for i, a := range attempts {
		out[i] = state.AttemptTimes{Start: ms(a.Start), End: ms(a.End)}
		for _, w := range a.Waits {
			out[i].Waits = append(out[i].Waits, [2]int64{ms(w.Start), ms(w.End)})
		}
	}
	return base, out
}

// FromRecord is the last run a state record keeps, its steps in the order
// of defs (the spec's). A step whose entry is older than the run (it
// resumed) is Resumed; one without an entry NotRun. A step recorded
// without attempt times (by an earlier khook, or trimmed to fit) is one
// bar, from its start (its end less its duration) to its end.
func FromRecord(rec *state.Record, defs []Def) *Run {
	r := &Run{Spec: rec.Spec, Command: rec.Command, Status: rec.RunStatus, Start: rec.StartedAt, TraceID: rec.TraceID}
	if rec.FinishedAt != nil {
		r.End = *rec.FinishedAt
	}
	for _, d := range defs {
		st := Step{Name: d.Name, Type: d.Type, Needs: d.Needs, Status: NotRun}
		e := rec.Steps[d.Name]
		switch {
		case e == nil:
		case e.FinishedAt.Before(rec.StartedAt):
			st.Status = Resumed
		case e.Status == state.StepRunning:
			st.Status = Running
			if e.StartedAt != nil {
				end := rec.UpdatedAt
				if !r.End.IsZero() {
					end = r.End
				}
				st.Attempts = []Attempt{{Interval: Interval{Start: *e.StartedAt, End: end}}}
			}
		default:
			st.Status = e.Status
			st.Attempts = recordedAttempts(e)
			if len(st.Attempts) == 0 {
				st.At = e.FinishedAt
			}
		}
		r.Steps = append(r.Steps, st)
	}
	return r
}

// recordedAttempts are the attempts of a step entry of this run.
func recordedAttempts(e *state.StepRecord) []Attempt {
	if e.Attempts == 0 {
		return nil
	}
	if e.StartedAt == nil || len(e.Timeline) == 0 {
		end := e.FinishedAt
		return []Attempt{{Interval: Interval{Start: end.Add(-time.Duration(e.DurationMs) * time.Millisecond), End: end}}}
	}
	at := func(ms int64) time.Time { return e.StartedAt.Add(time.Duration(ms) * time.Millisecond) }
	out := make([]Attempt, len(e.Timeline))
	for i, a := range e.Timeline {
		out[i] = Attempt{Interval: Interval{Start: at(a.Start), End: at(a.End)}}
		for _, w := range a.Waits {
			out[i].Waits = append(out[i].Waits, Interval{Start: at(w[0]), End: at(w[1])})
		}
	}
	return out
}

// CriticalPath is the needs: chain that set the run's total, first step
// first: the step that ended last, then the need it waited for last (the
// need that ended last before it started), and so on back to a step that
// waited for none. Steps that did not run in this run are not on it; nil
// when no step ran.
func (r *Run) CriticalPath() []string {
	byName := make(map[string]*Step, len(r.Steps))
	var last *Step
	for i := range r.Steps {
		s := &r.Steps[i]
		byName[s.Name] = s
		if len(s.Attempts) > 0 && (last == nil || s.End().After(last.End())) {
			last = s
		}
	}
	var path []string
	seen := map[string]bool{}
	for s := last; s != nil && !seen[s.Name]; {
		seen[s.Name] = true
		path = append(path, s.Name)
		var next *Step
		for _, n := range s.Needs {
			d := byName[n]
			if d == nil || len(d.Attempts) == 0 || d.End().After(s.Start()) {
				continue
			}
			if next == nil || d.End().After(next.End()) {
				next = d
			}
		}
		s = next
	}
	slices.Reverse(path)
	return path
}

// Bounds are the times the timeline's axis spans: the run's start to its
// end, widened to every attempt and mark.
func (r *Run) Bounds() (start, end time.Time) {
	start, end = r.Start, r.End
	widen := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if start.IsZero() || t.Before(start) {
			start = t
		}
		if t.After(end) {
			end = t
		}
	}
	for _, s := range r.Steps {
		for _, a := range s.Attempts {
			widen(a.Start)
			widen(a.End)
		}
		widen(s.At)
	}
	return start, end
}
