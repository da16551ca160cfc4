// Package run schedules a spec's steps. It knows nothing of step kinds: it
// receives the steps' graph and a task per step (a name, settings and an
// attempt function) and runs each as soon as all its needs are satisfied
// — levels are how plan shows the DAG, not a barrier — with per-attempt
// timeouts, retries and onError, reporting everything as events.
//
// A Walker walks the graph (concurrency limit, readiness of the nodes that
// wait, cancellation) and knows nothing of what a node does; the run's
// policies (policy.go: which ends satisfy needers, which stop the run, skip
// reasons, the run's status; attempt.go: timeouts, retries, interrupted
// or failed) are plain functions of a step's outcome.
package run

import (
	"context"
	"fmt"
	"time"

	"khook.io/core/event"
)

// Schedule executes the tasks, tasks[i] being node i of g, and returns when
// every task has ended. A task starts once every task it needs has ended
// ok. Cancelling ctx interrupts the run: running attempts are cancelled,
// nothing new starts, and every task not yet run is reported skipped.
func Schedule(ctx context.Context, g Graph, tasks []Task, opts Options) *Result {
	if g.Len() != len(tasks) {
		panic(fmt.Sprintf("run: %d tasks for a graph of %d nodes", len(tasks), g.Len()))
	}
	s := &scheduler{tasks: tasks, results: make([]StepResult, len(tasks)), sink: opts.Events}
	if s.sink == nil {
		s.sink = event.Discard
	}
	start := time.Now()
	s.sink.Emit(event.Event{Kind: event.RunStarted, Time: start})
	for i, t := range tasks {
		s.results[i] = StepResult{Name: t.Name, Type: t.Type}
	}
	for i, t := range tasks {
		if len(g.Needs(i)) > 0 {
			s.sink.Emit(event.Event{Kind: event.StepPending, Time: time.Now(), Step: t.Name, Type: t.Type})
		}
	}
	w := Walker{Graph: g, Limit: opts.Parallelism}
	w.Walk(ctx, s)
	res := &Result{Status: runStatus(s.results), Steps: s.results, Duration: time.Since(start)}
	s.sink.Emit(event.Event{Kind: event.RunFinished, Time: time.Now(), Message: res.Status, Elapsed: res.Duration})
	return res
}

// scheduler is the Visitor of a run: it runs a task's attempts, records
// each task's end as its result and an event, and applies the policies.
type scheduler struct {
	tasks   []Task
	results []StepResult // by task; Visit writes only its own task's
	sink    event.Sink
}

// Skip skips a task decided up front (a when: exclusion, a resumed step);
// it satisfies the tasks that need it.
func (s *scheduler) Skip(i int) (skip, ok bool) {
	t := &s.tasks[i]
	if t.Skip != "" {
		cause := t.SkipCause
		if !cause.UpFront() {
			cause = event.SkipUpFront
		}
		s.skipped(i, t.Skip, cause)
		return true, true
	}
	if len(t.Triggers) > 0 && !s.triggered(t) {
		s.skipped(i, t.NotTriggered, event.SkipNotTriggered)
		return true, true
	}
	return false, false
}

// triggered reports whether one of t's triggers ended ok having changed
// something. Its triggers are among its needs, so each has ended.
func (s *scheduler) triggered(t *Task) bool {
	for _, j := range t.Triggers {
		if r := s.results[j]; r.Status == StatusOK && r.Changed {
			return true
		}
	}
	return false
}

// Visit makes task i's attempts.
func (s *scheduler) Visit(ctx context.Context, i int) {
	s.results[i] = attemptLoop(ctx, &s.tasks[i], s.results[i], s.sink)
}

// Done reports how task i ended; its policies say whether its needers may
// run and whether the run goes on.
func (s *scheduler) Done(i int) (ok bool, stop error) {
	res := s.results[i]
	s.emitEnd(res)
	return satisfies(res), stopAfter(&s.tasks[i], res)
}

// Blocked skips task i because a task it needs did not satisfy it.
func (s *scheduler) Blocked(i, need int) {
	s.skipped(i, blockedReason(s.results[need]), event.SkipBlocked)
}

// Unreached skips task i, which the run never reached.
func (s *scheduler) Unreached(i int, cause error) {
	reason, why := unreached(cause)
	s.skipped(i, reason, why)
}

// skipped ends task i, which never ran, skipped for reason, of cause.
func (s *scheduler) skipped(i int, reason string, cause event.SkipCause) {
	s.results[i].Status, s.results[i].SkipReason, s.results[i].Skip = StatusSkipped, reason, cause
	s.emitEnd(s.results[i])
}

// endKinds are the events of a step's end, by status.
var endKinds = map[string]event.Kind{
	StatusOK:          event.StepSucceeded,
	StatusFailed:      event.StepFailed,
	StatusInterrupted: event.StepInterrupted,
	StatusSkipped:     event.StepSkipped,
}

// emitEnd reports how a step ended: its message, error or skip reason.
func (s *scheduler) emitEnd(res StepResult) {
	msg := res.Error
	switch res.Status {
	case StatusOK:
		msg = res.Message
	case StatusSkipped:
		msg = res.SkipReason
	}
	s.sink.Emit(event.Event{Kind: endKinds[res.Status], Time: time.Now(), Step: res.Name, Type: res.Type, Attempt: res.Attempts, Message: msg, Elapsed: res.Duration, Skip: res.Skip})
}
