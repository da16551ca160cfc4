package render

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"khook.io/core/event"
)

// Progress renders a run's events for people. On a terminal it keeps one
// live line per step (pending, running with elapsed time and attempt, ok,
// failed, skipped), redrawn in place; otherwise it prints one line per
// state change. Callers hand it a writer that redacts.
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	live    bool
	color   bool
	width   int
	start   time.Time
	order   []string
	steps   map[string]*liveStep
	drawn   int // lines of the last live frame
	stop    chan struct{}
	stopped chan struct{}
	verb    string
}

type liveStep struct {
	name, typ string
	state     string // pending, running, ok, failed, skipped
	attempt   int
	started   time.Time
	elapsed   time.Duration
	note      string
}

// ProgressOptions say how to render.
type ProgressOptions struct {
	// Live redraws one line per step in place (a terminal).
	Live bool
	// Color uses ANSI colors (a terminal without NO_COLOR).
	Color bool
	// Width is the terminal width; lines are cut to it when live.
	Width int
	// Verb names the run in piped lines ("apply", "destroy").
	Verb string
}

// NewProgress starts a renderer for the steps, in the order given.
func NewProgress(w io.Writer, steps []StepInfo, opts ProgressOptions) *Progress {
	p := &Progress{w: w, live: opts.Live, color: opts.Color, width: opts.Width, start: time.Now(),
		steps: make(map[string]*liveStep, len(steps)), verb: opts.Verb}
	if p.width <= 0 {
		p.width = 120
	}
	for _, s := range steps {
		p.order = append(p.order, s.Name)
		p.steps[s.Name] = &liveStep{name: s.Name, typ: s.Type, state: "pending"}
	}
	if p.live {
		p.stop, p.stopped = make(chan struct{}), make(chan struct{})
		go p.tick()
	}
	return p
}

// StepInfo names a step for the renderer.
type StepInfo struct{ Name, Type string }

// Emit renders one event; safe for concurrent use.
func (p *Progress) Emit(e event.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.steps[e.Step]
	if s == nil && e.Step != "" {
		return
	}
	line := ""
	switch e.Kind {
	case event.StepPending:
		return
	case event.StepStarted:
		s.state, s.attempt = "running", e.Attempt
		if s.started.IsZero() {
			s.started = e.Time
		}
		s.note = ""
		line = "started"
		if e.Attempt > 1 {
			line = fmt.Sprintf("started attempt %d", e.Attempt)
		}
	case event.StepProgress:
		s.note = e.Message
		line = "… " + e.Message
	case event.StepRetrying:
		s.note = fmt.Sprintf("attempt %d failed, retrying in %s: %s", e.Attempt, e.Delay, firstLine(e.Message))
		line = s.note
	case event.StepSucceeded:
		s.state, s.elapsed, s.note = "ok", e.Elapsed, e.Message
		line = "ok " + fmtDuration(e.Elapsed)
		if e.Message != "" {
			line += ": " + e.Message
		}
	case event.StepFailed:
		s.state, s.elapsed, s.note = "failed", e.Elapsed, firstLine(e.Message)
		line = "failed after " + fmtDuration(e.Elapsed) + ": " + e.Message
	case event.StepSkipped:
		s.state, s.elapsed, s.note = "skipped", e.Elapsed, e.Message
		line = "skipped: " + e.Message
	default:
		return
	}
	if p.live {
		p.redraw()
		return
	}
	fmt.Fprintf(p.w, "[%7s] %-*s %s\n", fmtDuration(time.Since(p.start)), p.nameWidth(), s.name, line)
}

// Close stops the live redraw, leaving the final frame.
func (p *Progress) Close() {
	if !p.live {
		return
	}
	close(p.stop)
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redraw()
}

func (p *Progress) tick() {
	defer close(p.stopped)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.redraw()
			p.mu.Unlock()
		}
	}
}

func (p *Progress) nameWidth() int {
	w := 4
	for _, n := range p.order {
		w = max(w, len(n))
	}
	return w
}

const (
	ansiReset  = "\x1b[0m"
	ansiGreen  = "\x1b[32m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
)

func (p *Progress) redraw() {
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	nw := p.nameWidth()
	for _, name := range p.order {
		s := p.steps[name]
		mark, color := "·", ansiDim
		detail := ""
		switch s.state {
		case "running":
			mark, color = "›", ansiYellow
			detail = fmtDuration(time.Since(s.started))
			if s.attempt > 1 {
				detail += fmt.Sprintf(" (attempt %d)", s.attempt)
			}
		case "ok":
			mark, color = "✓", ansiGreen
			detail = fmtDuration(s.elapsed)
		case "failed":
			mark, color = "✗", ansiRed
			detail = fmtDuration(s.elapsed)
		case "skipped":
			mark, color = "-", ansiDim
		}
		line := fmt.Sprintf("%s %-*s  %-7s  %-7s  %-16s %s", mark, nw, s.name, s.typ, s.state, detail, s.note)
		line = cut(line, p.width-1)
		if p.color {
			line = color + line + ansiReset
		}
		b.WriteString("\r\x1b[K")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	p.drawn = len(p.order)
	_, _ = io.WriteString(p.w, b.String())
}

func cut(s string, width int) string {
	r := []rune(s)
	if len(r) <= width || width <= 1 {
		return s
	}
	return string(r[:width-1]) + "…"
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
