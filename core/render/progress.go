package render

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"khook.io/core/event"
	"khook.io/core/redact"
)

// Progress renders a run's events for people. On a terminal it keeps a
// live block of one line per step (pending, running with elapsed time and
// attempt, ok, failed, interrupted, skipped), redrawn in place; otherwise
// it prints one line per state change.
//
// The live block never outgrows the terminal: with more steps than rows it
// shows the running and failed steps first, then the most recent ones, and
// one line counting the rest; every line is cut to the terminal's width,
// measured in display cells (a CJK character or an emoji takes two), so no
// line wraps and the cursor always returns to the block's first line. When
// it closes, the block is printed in full one last time. Lines other code
// writes to the same terminal meanwhile (API warnings, client logs) go
// through Above (see Console), which prints them above the block.
//
// Step messages are redacted with the options' Redactor before they are
// measured; callers still hand it a writer that redacts.
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	console *Console
	red     *redact.Redactor
	live    bool
	color   bool
	width   int
	height  int
	start   time.Time
	now     func() time.Time
	order   []string
	steps   map[string]*liveStep
	seq     int // bumped on every state change, to order them
	drawn   int // lines of the last live frame
	closed  bool
	stop    chan struct{}
	stopped chan struct{}
	verb    string
}

type liveStep struct {
	name, typ string
	state     string // pending, running, ok, failed, interrupted, skipped
	attempt   int
	started   time.Time
	elapsed   time.Duration
	note      string
	changed   int // seq of the last state change
}

// ProgressOptions say how to render.
type ProgressOptions struct {
	// Live redraws one line per step in place (a terminal).
	Live bool
	// Color uses ANSI colors (a terminal without NO_COLOR).
	Color bool
	// Width and Height are the terminal's size in cells; the live block
	// keeps to Width-1 columns and Height-1 lines. Zero: 120 and 24.
	Width, Height int
	// Verb names the run in piped lines ("apply", "destroy").
	Verb string
	// Redactor masks step messages before they are measured and cut.
	Redactor *redact.Redactor
	// Console, when Live, is the terminal's shared standard error: the
	// Progress attaches to it (other lines written there are printed above
	// the block) until Close. Frames then go to the writer given to
	// NewProgress, which must reach Console.Terminal.
	Console *Console
}

// The terminal size assumed when the options give none.
const (
	defaultWidth  = 120
	defaultHeight = 24
)

// NewProgress starts a renderer for the steps, in the order given.
func NewProgress(w io.Writer, steps []StepInfo, opts ProgressOptions) *Progress {
	return newProgress(w, steps, opts, time.Now, true)
}

// newProgress is NewProgress with a clock, and without the periodic
// redraw (tests draw on events only).
func newProgress(w io.Writer, steps []StepInfo, opts ProgressOptions, now func() time.Time, tick bool) *Progress {
	p := &Progress{w: w, red: opts.Redactor, live: opts.Live, color: opts.Color, width: opts.Width, height: opts.Height,
		now: now, start: now(), steps: make(map[string]*liveStep, len(steps)), verb: opts.Verb}
	if p.width <= 0 {
		p.width = defaultWidth
	}
	if p.height <= 0 {
		p.height = defaultHeight
	}
	for _, s := range steps {
		p.order = append(p.order, s.Name)
		p.steps[s.Name] = &liveStep{name: s.Name, typ: s.Type, state: "pending"}
	}
	if p.live && opts.Console != nil {
		p.console = opts.Console
		p.console.Attach(p)
	}
	if p.live && tick {
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
	if s == nil {
		return
	}
	msg := p.red.String(e.Message)
	line := ""
	switch e.Kind {
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
		s.note = msg
		line = "… " + msg
	case event.StepRetrying:
		s.note = fmt.Sprintf("attempt %d failed, retrying in %s: %s", e.Attempt, e.Delay, firstLine(msg))
		line = s.note
	case event.StepSucceeded:
		s.state, s.elapsed, s.note = "ok", e.Elapsed, msg
		line = "ok " + fmtDuration(e.Elapsed)
		if msg != "" {
			line += ": " + msg
		}
	case event.StepFailed:
		s.state, s.elapsed, s.note = "failed", e.Elapsed, msg
		line = "failed after " + fmtDuration(e.Elapsed) + ": " + msg
	case event.StepInterrupted:
		s.state, s.elapsed, s.note = "interrupted", e.Elapsed, msg
		line = "interrupted after " + fmtDuration(e.Elapsed)
		if msg != "interrupted" {
			line = msg + " (after " + fmtDuration(e.Elapsed) + ")"
		}
	case event.StepSkipped:
		s.state, s.elapsed, s.note = "skipped", e.Elapsed, msg
		line = "skipped: " + msg
	default:
		return
	}
	p.seq++
	s.changed = p.seq
	if p.live {
		if !p.closed {
			p.redraw()
		}
		return
	}
	_, _ = fmt.Fprintf(p.w, "[%7s] %-*s %s\n", fmtDuration(p.now().Sub(p.start)), p.nameWidth(), s.name, line)
}

// Above prints text (whole lines) above the live block, which is then
// redrawn; without a live block it is written as it is. Console calls it
// for everything else written to the terminal while the block is shown.
func (p *Progress) Above(text []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.live || p.closed {
		_, _ = p.w.Write(text)
		return
	}
	var b strings.Builder
	p.erase(&b)
	b.Write(text)
	p.frame(&b, p.visible())
	_, _ = io.WriteString(p.w, b.String())
}

// Close stops the live redraw and prints the block one last time, every
// step in full (the final frame is left in the scrollback, not redrawn, so
// it may be taller than the terminal).
func (p *Progress) Close() {
	if !p.live {
		return
	}
	if p.stop != nil {
		close(p.stop)
		<-p.stopped
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	var b strings.Builder
	p.erase(&b)
	p.frame(&b, p.order)
	_, _ = io.WriteString(p.w, b.String())
	if p.console != nil {
		p.console.Detach()
	}
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
			if !p.closed {
				p.redraw()
			}
			p.mu.Unlock()
		}
	}
}

func (p *Progress) nameWidth() int {
	w := 4
	for _, n := range p.order {
		w = max(w, DisplayWidth(n))
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

// redraw replaces the live block with a new frame.
func (p *Progress) redraw() {
	var b strings.Builder
	p.erase(&b)
	p.frame(&b, p.visible())
	_, _ = io.WriteString(p.w, b.String())
}

// erase moves the cursor back to the block's first line and clears from
// there to the end of the screen. No line of the block wrapped, so the
// block is exactly p.drawn lines tall.
func (p *Progress) erase(b *strings.Builder) {
	if p.drawn > 0 {
		fmt.Fprintf(b, "\x1b[%dA", p.drawn)
	}
	b.WriteString("\r\x1b[J")
	p.drawn = 0
}

// frame writes one line per named step (in their order), and a line
// counting the steps not shown when the block cannot show them all.
func (p *Progress) frame(b *strings.Builder, names []string) {
	nw, sw := p.nameWidth(), len("running")
	for _, s := range p.steps {
		sw = max(sw, len(s.state)) // "interrupted", once a step is
	}
	for _, name := range names {
		p.line(b, p.stepLine(p.steps[name], nw, sw), p.steps[name].state)
	}
	if hidden := len(p.order) - len(names); hidden > 0 {
		p.line(b, p.hiddenLine(names), "pending")
	}
}

// line writes one line of the block, cut to the terminal's width.
func (p *Progress) line(b *strings.Builder, text, state string) {
	text = CutWidth(text, p.width-1)
	if p.color {
		text = stateColor(state) + text + ansiReset
	}
	b.WriteString(text)
	b.WriteByte('\n')
	p.drawn++
}

func stateColor(state string) string {
	switch state {
	case "running", "interrupted":
		return ansiYellow
	case "ok":
		return ansiGreen
	case "failed":
		return ansiRed
	}
	return ansiDim
}

func (p *Progress) stepLine(s *liveStep, nw, sw int) string {
	mark, detail := "·", ""
	switch s.state {
	case "running":
		mark = "›"
		detail = fmtDuration(p.now().Sub(s.started))
		if s.attempt > 1 {
			detail += fmt.Sprintf(" (attempt %d)", s.attempt)
		}
	case "ok":
		mark, detail = "✓", fmtDuration(s.elapsed)
	case "failed":
		mark, detail = "✗", fmtDuration(s.elapsed)
	case "interrupted":
		mark, detail = "!", fmtDuration(s.elapsed)
	case "skipped":
		mark = "-"
	}
	return fmt.Sprintf("%s %-*s  %-7s  %-*s  %-16s %s", mark, nw, s.name, s.typ, sw, s.state, detail, Printable(firstLine(s.note)))
}

// hiddenLine counts the steps a frame of names leaves out, by state.
func (p *Progress) hiddenLine(names []string) string {
	shown := make(map[string]bool, len(names))
	for _, n := range names {
		shown[n] = true
	}
	counts := map[string]int{}
	for _, n := range p.order {
		if !shown[n] {
			counts[p.steps[n].state]++
		}
	}
	var parts []string
	for _, st := range []string{"running", "failed", "interrupted", "ok", "skipped", "pending"} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	return fmt.Sprintf("… %s not shown: %s", plural(len(p.order)-len(names), "more step"), strings.Join(parts, ", "))
}

// visible picks the steps a live frame shows, in their order: all of them
// when the terminal has the rows, else, one line being kept to count the
// others, the running steps first, then the failed and interrupted ones,
// then the most recently finished, then the pending ones that come first.
func (p *Progress) visible() []string {
	rows := max(p.height-1, 1)
	if len(p.order) <= rows {
		return p.order
	}
	budget := rows - 1
	rank := func(s *liveStep) int {
		switch s.state {
		case "running":
			return 0
		case "failed", "interrupted":
			return 1
		case "ok", "skipped":
			return 2
		}
		return 3
	}
	idx := make([]int, len(p.order))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		sa, sb := p.steps[p.order[a]], p.steps[p.order[b]]
		if ra, rb := rank(sa), rank(sb); ra != rb {
			return ra - rb
		}
		if rank(sa) == 2 {
			return sb.changed - sa.changed // the most recent first
		}
		return a - b
	})
	chosen := idx[:budget]
	slices.Sort(chosen)
	out := make([]string, len(chosen))
	for i, k := range chosen {
		out[i] = p.order[k]
	}
	return out
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
