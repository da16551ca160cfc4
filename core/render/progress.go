package render

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"khook.io/core/event"
	"khook.io/core/internal/english"
	"khook.io/core/load"
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
	liveRenderer
	m    *stepsModel
	verb string
}

// liveRenderer is what Progress and FleetProgress share: the live block on
// a terminal, redrawn on every change and four times a second, with the
// console's other lines above it (Above) until Close; frame draws the
// block (final: for the last time, left in the scrollback). Piped (not
// live), the renderers print a line per change instead.
type liveRenderer struct {
	mu      sync.Mutex
	blk     liveBlock
	console *Console
	live    bool
	height  int
	closed  bool
	ticker  *ticker
	frame   func(b *strings.Builder, final bool)
}

// setUp sets the renderer up to write to w as opts say, drawing its block
// with frame; tick starts the periodic redraw.
func (l *liveRenderer) setUp(w io.Writer, opts ProgressOptions, frame func(b *strings.Builder, final bool), tick bool) {
	width, height := opts.size()
	l.blk, l.live, l.height, l.frame = liveBlock{w: w, width: width, color: opts.Color}, opts.Live, height, frame
	if l.live && opts.Console != nil {
		l.console = opts.Console
		l.console.Attach(l)
	}
	if l.live && tick {
		l.ticker = startTicker(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if !l.closed {
				l.redraw()
			}
		})
	}
}

// changed redraws the live block after a change (mu held); false when the
// renderer is piped: the caller prints the change's line.
func (l *liveRenderer) changed() bool {
	if !l.live {
		return false
	}
	if !l.closed {
		l.redraw()
	}
	return true
}

// redraw replaces the live block with a new frame.
func (l *liveRenderer) redraw() {
	var b strings.Builder
	l.blk.erase(&b)
	l.frame(&b, false)
	_, _ = io.WriteString(l.blk.w, b.String())
}

// Above prints text (whole lines) above the live block, which is then
// redrawn; without a live block it is written as it is. Console calls it
// for everything else written to the terminal while the block is shown.
func (l *liveRenderer) Above(text []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.live || l.closed {
		_, _ = l.blk.w.Write(text)
		return
	}
	var b strings.Builder
	l.blk.erase(&b)
	b.Write(text)
	l.frame(&b, false)
	_, _ = io.WriteString(l.blk.w, b.String())
}

// Close stops the live redraw and prints the block one last time (the
// final frame is left in the scrollback, not redrawn, so it may be
// taller than the terminal).
func (l *liveRenderer) Close() {
	if !l.live {
		return
	}
	l.ticker.stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	var b strings.Builder
	l.blk.erase(&b)
	l.frame(&b, true)
	_, _ = io.WriteString(l.blk.w, b.String())
	if l.console != nil {
		l.console.Detach()
	}
}

// stepsModel is the state of one run's steps, as progress shows it.
type stepsModel struct {
	red   *redact.Redactor
	now   func() time.Time
	start time.Time
	order []string
	steps map[string]*liveStep
	seq   int // bumped on every state change, to order them
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

func newStepsModel(steps []StepInfo, red *redact.Redactor, now func() time.Time) *stepsModel {
	m := &stepsModel{red: red, now: now, start: now(), steps: make(map[string]*liveStep, len(steps))}
	for _, s := range steps {
		m.order = append(m.order, s.Name)
		m.steps[s.Name] = &liveStep{name: s.Name, typ: s.Type, state: "pending"}
	}
	return m
}

// liveBlock is a block of lines redrawn in place on a terminal.
type liveBlock struct {
	w     io.Writer
	width int
	color bool
	drawn int // lines of the last frame
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

// size is the terminal size the options give, or the default.
func (o ProgressOptions) size() (width, height int) {
	width, height = o.Width, o.Height
	if width <= 0 {
		width = defaultWidth
	}
	if height <= 0 {
		height = defaultHeight
	}
	return width, height
}

// NewProgress starts a renderer for the steps, in the order given.
func NewProgress(w io.Writer, steps []StepInfo, opts ProgressOptions) *Progress {
	return newProgress(w, steps, opts, time.Now, true)
}

// newProgress is NewProgress with a clock, and without the periodic
// redraw (tests draw on events only).
func newProgress(w io.Writer, steps []StepInfo, opts ProgressOptions, now func() time.Time, tick bool) *Progress {
	p := &Progress{m: newStepsModel(steps, opts.Redactor, now), verb: opts.Verb}
	p.setUp(w, opts, p.drawFrame, tick)
	return p
}

// drawFrame draws the block: the steps a frame of the terminal's rows
// shows, or (final) every step.
func (p *Progress) drawFrame(b *strings.Builder, final bool) {
	names := p.m.order
	if !final {
		names = p.m.visible(p.height - 1)
	}
	p.m.frame(b, &p.blk, names, "")
}

// StepInfo names a step for the renderer.
type StepInfo struct{ Name, Type string }

// StepInfos names doc's steps in order for a renderer.
func StepInfos(doc *load.Document, order []int) []StepInfo {
	infos := make([]StepInfo, len(order))
	for k, i := range order {
		st := &doc.Spec.Steps[i]
		infos[k] = StepInfo{Name: st.Name, Type: st.Type()}
	}
	return infos
}

// ProgressOutput is where a run's progress goes: standard error, live
// when it is a terminal.
type ProgressOutput struct {
	// ErrOut is the redacting standard error.
	ErrOut io.Writer
	// Terminal is standard error as the process has it: an *os.File that
	// is a terminal makes progress live.
	Terminal io.Writer
	// Console is standard error beneath ErrOut, shared with a live block.
	Console  *Console
	Redactor *redact.Redactor
	// NoColor: NO_COLOR is set, in the process's environment or the
	// run's.
	NoColor bool
}

// Options are how progress renders on standard error, and the writer it
// renders to: live on a terminal (its size, colors unless NO_COLOR,
// attached to the console so that other lines go above it).
func (p ProgressOutput) Options(verb string) (ProgressOptions, io.Writer) {
	opts := ProgressOptions{Verb: verb, Redactor: p.Redactor}
	if f, ok := p.Terminal.(*os.File); ok && p.Console != nil && term.IsTerminal(int(f.Fd())) {
		opts.Live = true
		opts.Color = !p.NoColor
		if w, h, err := term.GetSize(int(f.Fd())); err == nil {
			opts.Width, opts.Height = w, h
		}
		// warnings and client logs written meanwhile go above the block
		opts.Console = p.Console
		return opts, p.Redactor.Writer(p.Console.Terminal())
	}
	return opts, p.ErrOut
}

// Progress starts the renderer of a run of doc's steps in order.
func (p ProgressOutput) Progress(verb string, doc *load.Document, order []int) *Progress {
	opts, w := p.Options(verb)
	return NewProgress(w, StepInfos(doc, order), opts)
}

// Fleet starts the renderer of a fleet run on clusters.
func (p ProgressOutput) Fleet(verb string, clusters []ClusterInfo) *FleetProgress {
	opts, w := p.Options(verb)
	return NewFleetProgress(w, clusters, opts)
}

// Emit renders one event; safe for concurrent use.
func (p *Progress) Emit(e event.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, line := p.m.apply(e)
	if s == nil || p.changed() {
		return
	}
	_, _ = fmt.Fprintf(p.blk.w, "[%7s] %-*s %s\n", fmtDuration(p.m.now().Sub(p.m.start)), p.m.nameWidth(), s.name, line)
}

// apply records e and returns the step it changed with the piped line
// that says so; nil when e changes nothing shown.
func (m *stepsModel) apply(e event.Event) (*liveStep, string) {
	s := m.steps[e.Step]
	if s == nil {
		return nil, ""
	}
	msg := m.red.String(e.Message)
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
		return nil, ""
	}
	m.seq++
	s.changed = m.seq
	return s, line
}

// ticker calls a redraw four times a second until stopped.
type ticker struct {
	done    chan struct{}
	stopped chan struct{}
}

func startTicker(redraw func()) *ticker {
	t := &ticker{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(t.stopped)
		tk := time.NewTicker(250 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-t.done:
				return
			case <-tk.C:
				redraw()
			}
		}
	}()
	return t
}

// stop ends the redraws and waits for the last one; a nil ticker is
// stopped already.
func (t *ticker) stop() {
	if t == nil {
		return
	}
	select {
	case <-t.done:
	default:
		close(t.done)
	}
	<-t.stopped
}

func (m *stepsModel) nameWidth() int {
	w := 4
	for _, n := range m.order {
		w = max(w, DisplayWidth(n))
	}
	return w
}

// stateWidth is the width of the state column: "running", or
// "interrupted" once a step is.
func (m *stepsModel) stateWidth() int {
	sw := len("running")
	for _, s := range m.steps {
		sw = max(sw, len(s.state))
	}
	return sw
}

const (
	ansiReset  = "\x1b[0m"
	ansiGreen  = "\x1b[32m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
)

// erase moves the cursor back to the block's first line and clears from
// there to the end of the screen. No line of the block wrapped, so the
// block is exactly drawn lines tall.
func (l *liveBlock) erase(b *strings.Builder) {
	if l.drawn > 0 {
		fmt.Fprintf(b, "\x1b[%dA", l.drawn)
	}
	b.WriteString("\r\x1b[J")
	l.drawn = 0
}

// frame writes the lines of the named steps to blk, each after indent,
// and a line counting the steps not shown.
func (m *stepsModel) frame(b *strings.Builder, blk *liveBlock, names []string, indent string) {
	nw, sw := m.nameWidth(), m.stateWidth()
	for _, name := range names {
		blk.line(b, indent+m.stepLine(m.steps[name], nw, sw), m.steps[name].state)
	}
	if hidden := len(m.order) - len(names); hidden > 0 {
		blk.line(b, indent+m.hiddenLine(names), "pending")
	}
}

// line writes one line of the block, cut to the terminal's width.
func (l *liveBlock) line(b *strings.Builder, text, state string) {
	text = CutWidth(text, l.width-1)
	if l.color {
		text = stateColor(state) + text + ansiReset
	}
	b.WriteString(text)
	b.WriteByte('\n')
	l.drawn++
}

func stateColor(state string) string {
	switch state {
	case "running", "interrupted", "connecting":
		return ansiYellow
	case "ok":
		return ansiGreen
	case "failed":
		return ansiRed
	}
	return ansiDim
}

func (m *stepsModel) stepLine(s *liveStep, nw, sw int) string {
	mark, detail := "·", ""
	switch s.state {
	case "running":
		mark = "›"
		detail = fmtDuration(m.now().Sub(s.started))
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

// counts counts the steps by state.
func (m *stepsModel) counts() map[string]int {
	counts := map[string]int{}
	for _, s := range m.steps {
		counts[s.state]++
	}
	return counts
}

// countList says how many steps are in each state, in a fixed order
// ("3 ok, 1 running, 6 pending").
func countList(counts map[string]int) string {
	var parts []string
	for _, st := range []string{"running", "failed", "interrupted", "ok", "skipped", "pending"} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	return strings.Join(parts, ", ")
}

// hiddenLine counts the steps a frame of names leaves out, by state.
func (m *stepsModel) hiddenLine(names []string) string {
	shown := make(map[string]bool, len(names))
	for _, n := range names {
		shown[n] = true
	}
	counts := map[string]int{}
	for _, n := range m.order {
		if !shown[n] {
			counts[m.steps[n].state]++
		}
	}
	return fmt.Sprintf("… %s not shown: %s", english.CountNoun(len(m.order)-len(names), "more step"), countList(counts))
}

// visible picks the steps a live frame of rows lines shows, in their
// order: all of them when there are rows enough, else, one line being
// kept to count the others, the running steps first, then the failed and
// interrupted ones, then the most recently finished, then the pending ones
// that come first.
func (m *stepsModel) visible(rows int) []string {
	rows = max(rows, 1)
	if len(m.order) <= rows {
		return m.order
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
	idx := make([]int, len(m.order))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		sa, sb := m.steps[m.order[a]], m.steps[m.order[b]]
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
		out[i] = m.order[k]
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
