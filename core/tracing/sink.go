package tracing

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"khook.io/core/event"
	"khook.io/core/redact"
)

// StepInfo is what the events do not say of a step: what it acts on and
// its fate in this run.
type StepInfo struct {
	Name string
	// Target is the step's one-line summary ("chart x 1.0 as release y in
	// ns").
	Target string
	// Fate is the engine's (run, resume, excluded, ...).
	Fate string
}

// Sink turns one cluster's events into spans: a nil *Sink drops them.
// Safe for concurrent use, as the engine emits from many goroutines.
type Sink struct {
	tracer trace.Tracer
	red    *redact.Redactor

	mu      sync.Mutex
	ctx     context.Context // the parent of the cluster's spans
	cluster trace.Span      // a fleet's cluster span; nil for a single run
	root    trace.Span      // the span the cluster's status goes to
	infos   map[string]StepInfo
	steps   map[string]*stepSpans
	phases  []*openPhase // the run's own phases (lock, record) still open
	ended   bool
}

// stepSpans are the spans of one step.
type stepSpans struct {
	span    trace.Span
	ctx     context.Context
	attempt trace.Span // the current attempt's, nil between attempts
	actx    context.Context
	phases  []*openPhase // the attempt's phases still open, innermost last
	cause   string       // the last cause a wait of the attempt found
}

type openPhase struct {
	phase, detail string
	span          trace.Span
	ctx           context.Context
}

// Cluster is the sink of the events of the run on one cluster, context
// its kubeconfig context: in a fleet (fleet true) under a span of its
// own, "cluster <context>"; else directly under the run's span, which
// then carries the context.
func (t *Trace) Cluster(context string, fleet bool) *Sink {
	if t == nil {
		return nil
	}
	s := &Sink{tracer: t.tracer, red: t.red, ctx: t.ctx, root: t.root, infos: map[string]StepInfo{}, steps: map[string]*stepSpans{}}
	attr := attribute.String("khook.context", t.red.String(context))
	if fleet {
		s.ctx, s.cluster = t.tracer.Start(t.ctx, "cluster "+t.red.String(context), trace.WithAttributes(attr))
		s.root = s.cluster
	} else if context != "" {
		t.root.SetAttributes(attr)
	}
	t.mu.Lock()
	t.clusters = append(t.clusters, s)
	t.mu.Unlock()
	return s
}

// Steps tells the sink each step's target and fate.
func (s *Sink) Steps(infos []StepInfo) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range infos {
		s.infos[in.Name] = in
	}
}

// End ends what is still open of the cluster's spans (a run that stopped
// before its steps ended: the lock not taken, Ctrl-C) and the cluster's
// span, with status, the cluster's outcome, and err, why it failed (nil:
// it did not).
func (s *Sink) End(status string, err error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	now := time.Now()
	for _, p := range s.phases {
		p.span.End(trace.WithTimestamp(now))
	}
	for _, st := range s.steps {
		s.endAttempt(st, now)
		if st.span != nil {
			st.span.End(trace.WithTimestamp(now))
		}
	}
	if status != "" {
		s.root.SetAttributes(attribute.String("khook.run.status", status))
	}
	if err != nil {
		s.root.SetStatus(codes.Error, s.red.String(err.Error()))
	}
	if s.cluster != nil {
		if status != "" && status != "ok" && err == nil {
			s.cluster.SetStatus(codes.Error, "the run "+status)
		}
		s.cluster.End(trace.WithTimestamp(now))
	}
}

// Emit turns one event into spans.
func (s *Sink) Emit(e event.Event) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	if e.Step == "" {
		s.runEvent(e)
		return
	}
	st := s.steps[e.Step]
	if st == nil {
		st = &stepSpans{}
		s.steps[e.Step] = st
	}
	switch e.Kind {
	case event.StepStarted:
		s.startStep(st, e)
		s.endAttempt(st, e.Time)
		st.actx, st.attempt = s.tracer.Start(st.ctx, "attempt "+strconv.Itoa(e.Attempt), trace.WithTimestamp(e.Time),
			trace.WithAttributes(attribute.Int("khook.attempt", e.Attempt)))
		st.cause = ""
	case event.PhaseStarted:
		if st.attempt == nil {
			return
		}
		parent := st.actx
		if n := len(st.phases); n > 0 {
			parent = st.phases[n-1].ctx
		}
		p := &openPhase{phase: e.Phase, detail: e.Detail}
		p.ctx, p.span = s.tracer.Start(parent, e.Phase, trace.WithTimestamp(e.Time),
			trace.WithAttributes(attribute.String("khook.phase", e.Phase), attribute.String("khook.phase.detail", s.red.String(e.Detail))))
		st.phases = append(st.phases, p)
	case event.PhaseEnded:
		st.phases = s.endPhase(st.phases, e)
	case event.StepCause:
		text := s.red.String(e.Message)
		span := st.attempt
		if n := len(st.phases); n > 0 {
			span = st.phases[n-1].span
		}
		if span != nil {
			span.AddEvent("khook.cause", trace.WithTimestamp(e.Time), trace.WithAttributes(
				attribute.String("khook.cause", text), attribute.Bool("khook.cause.final", e.Final)))
		}
		st.cause = text
	case event.StepProgress:
		// progress lines stay on the terminal: the phases and causes say
		// what a trace needs of them
	case event.StepRetrying:
		if st.attempt != nil {
			s.failAttempt(st, "failed", e.Message, e.Time)
			st.attempt.SetAttributes(attribute.String("khook.attempt.next", "retry in "+e.Delay.String()))
			s.endAttempt(st, e.Time)
		}
	case event.StepSucceeded, event.StepFailed, event.StepInterrupted, event.StepSkipped:
		s.endStep(st, e)
	}
}

// runEvent handles an event of the run itself: its lock's and record's
// phases, its start and end.
func (s *Sink) runEvent(e event.Event) {
	switch e.Kind {
	case event.PhaseStarted:
		p := &openPhase{phase: e.Phase, detail: e.Detail}
		p.ctx, p.span = s.tracer.Start(s.ctx, e.Phase, trace.WithTimestamp(e.Time),
			trace.WithAttributes(attribute.String("khook.phase", e.Phase), attribute.String("khook.phase.detail", s.red.String(e.Detail))))
		s.phases = append(s.phases, p)
	case event.PhaseEnded:
		s.phases = s.endPhase(s.phases, e)
	case event.RunFinished:
		s.root.SetAttributes(attribute.String("khook.run.status", e.Message), attribute.Int64("khook.run.duration_ms", e.Elapsed.Milliseconds()))
	}
}

// endPhase ends the innermost open phase of e's name and detail.
func (s *Sink) endPhase(open []*openPhase, e event.Event) []*openPhase {
	for i := len(open) - 1; i >= 0; i-- {
		p := open[i]
		if p.phase != e.Phase || p.detail != e.Detail {
			continue
		}
		if e.Message != "" {
			p.span.SetStatus(codes.Error, s.red.String(e.Message))
		}
		p.span.End(trace.WithTimestamp(e.Time))
		return append(open[:i], open[i+1:]...)
	}
	return open
}

// startStep starts the step's span, once, at its first attempt or the
// event that skips it.
func (s *Sink) startStep(st *stepSpans, e event.Event) {
	if st.span != nil {
		return
	}
	info := s.infos[e.Step]
	st.ctx, st.span = s.tracer.Start(s.ctx, e.Type+" "+s.red.String(e.Step), trace.WithTimestamp(e.Time), trace.WithAttributes(
		attribute.String("khook.step.name", s.red.String(e.Step)),
		attribute.String("khook.step.kind", e.Type),
		attribute.String("khook.step.target", s.red.String(info.Target)),
		attribute.String("khook.step.fate", info.Fate),
	))
}

// failAttempt marks the current attempt failed (status error, the error
// as an exception event, the last cause its waits found as an event).
func (s *Sink) failAttempt(st *stepSpans, outcome, msg string, at time.Time) {
	msg = s.red.String(msg)
	st.attempt.SetAttributes(attribute.String("khook.attempt.outcome", outcome))
	st.attempt.AddEvent("exception", trace.WithTimestamp(at), trace.WithAttributes(
		attribute.String("exception.type", "khook.step."+outcome), attribute.String("exception.message", msg)))
	st.attempt.SetStatus(codes.Error, msg)
}

// endAttempt ends the current attempt and its open phases at t.
func (s *Sink) endAttempt(st *stepSpans, t time.Time) {
	for i := len(st.phases) - 1; i >= 0; i-- {
		st.phases[i].span.End(trace.WithTimestamp(t))
	}
	st.phases = nil
	if st.attempt != nil {
		st.attempt.End(trace.WithTimestamp(t))
		st.attempt, st.actx = nil, nil
	}
}

// endStep ends the step: its last attempt and its span, with its outcome.
func (s *Sink) endStep(st *stepSpans, e event.Event) {
	s.startStep(st, e)
	outcome := map[event.Kind]string{event.StepSucceeded: "ok", event.StepFailed: "failed", event.StepInterrupted: "interrupted", event.StepSkipped: "skipped"}[e.Kind]
	msg := s.red.String(e.Message)
	if st.attempt != nil {
		switch e.Kind {
		case event.StepFailed:
			s.failAttempt(st, outcome, e.Message, e.Time)
		default:
			st.attempt.SetAttributes(attribute.String("khook.attempt.outcome", outcome))
		}
		s.endAttempt(st, e.Time)
	}
	st.span.SetAttributes(attribute.String("khook.step.outcome", outcome), attribute.Int("khook.step.attempts", e.Attempt))
	if msg != "" {
		key := "khook.step.message"
		if e.Kind == event.StepSkipped {
			key = "khook.step.skip_reason"
		}
		st.span.SetAttributes(attribute.String(key, msg))
	}
	if e.Kind == event.StepFailed {
		if st.cause != "" {
			st.span.AddEvent("khook.cause", trace.WithTimestamp(e.Time), trace.WithAttributes(
				attribute.String("khook.cause", st.cause), attribute.Bool("khook.cause.final", true)))
		}
		st.span.SetStatus(codes.Error, msg)
	}
	st.span.End(trace.WithTimestamp(e.Time))
	st.span = nil
}

// Sink is an event.Sink.
var _ event.Sink = (*Sink)(nil)
