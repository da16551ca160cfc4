package render

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"

	"khook.io/core/redact"
	"khook.io/core/timeline"
)

// The timeline picture's geometry, in pixels (CSS px: one SVG unit).
const (
	tlWidth     = 1000
	tlLabelX    = 12
	tlPlotX0    = 240
	tlPlotX1    = 970
	tlRowsY     = 84 // the first row's top
	tlRowH      = 24
	tlBarDY     = 5  // a bar's top below its row's
	tlBarH      = 14 // a bar's height
	tlWaitH     = 6  // the wait band at a bar's bottom
	tlMinBarW   = 4  // the narrowest bar (an attempt of a few ms)
	tlMarkW     = 6  // a step the run skipped: a mark, not a bar
	tlLegendGap = 18
)

// TimelineColors are the fill colours of the bars, by what they show: a
// step's last attempt by its outcome, an attempt that failed and was
// retried, a step the run skipped or resumed (a mark).
var TimelineColors = map[string]string{
	"ok":               "#2f9e44",
	"failed":           "#e03131",
	"retried":          "#f08c00",
	"interrupted":      "#ae3ec9",
	"skipped":          "#adb5bd",
	timeline.Resumed:   "#ced4da",
	timeline.Running:   "#1c7ed6",
	"wait":             "#000000",
	"critical-outline": "#111111",
}

// TimelineSVG draws a run as an SVG picture: a row per step (in the
// spec's order), a bar per attempt on the run's time axis coloured by its
// outcome (an attempt that failed and was retried in its own colour),
// the waits inside each attempt shaded along the bar's bottom, a mark for
// a step the run skipped or resumed, and the critical path (the needs:
// chain that set the total, timeline.Run.CriticalPath) outlined and named.
// Every text is redacted with red before it is escaped. The picture is
// self-contained: no script, font or style sheet from anywhere.
func TimelineSVG(w io.Writer, r *timeline.Run, red *redact.Redactor) error {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	drawTimeline(&b, r, red)
	_, err := io.WriteString(w, b.String())
	return err
}

// TimelineHTML is TimelineSVG in a page of its own: the picture at the
// page's top left (the same pixels as the SVG), for a browser to open.
func TimelineHTML(w io.Writer, r *timeline.Run, red *redact.Redactor) error {
	var b strings.Builder
	title := html.EscapeString(red.String("khook " + r.Command + " " + r.Spec))
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n", title)
	b.WriteString("<style>html, body { margin: 0; padding: 0; background: #fff; } svg { display: block; }</style>\n</head>\n<body>\n")
	drawTimeline(&b, r, red)
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// tlAxis maps times to x.
type tlAxis struct {
	start time.Time
	total time.Duration
}

func (a tlAxis) x(t time.Time) int {
	f := float64(t.Sub(a.start)) / float64(a.total)
	return tlPlotX0 + int(math.Round(f*float64(tlPlotX1-tlPlotX0)))
}

// drawTimeline writes the <svg> element.
func drawTimeline(b *strings.Builder, r *timeline.Run, red *redact.Redactor) {
	esc := func(s string) string { return html.EscapeString(red.String(s)) }
	start, end := r.Bounds()
	ax := tlAxis{start: start, total: end.Sub(start)}
	if ax.total <= 0 {
		ax.total = time.Second
	}
	path := r.CriticalPath()
	onPath := map[string]bool{}
	for _, n := range path {
		onPath[n] = true
	}
	rowsEnd := tlRowsY + len(r.Steps)*tlRowH
	height := rowsEnd + tlLegendGap + 2*tlRowH
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Arial, Helvetica, sans-serif" font-size="12">`+"\n", tlWidth, height, tlWidth, height)
	fmt.Fprintf(b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", tlWidth, height)

	// title: what ran, how it ended, how long; the critical path; the trace
	status := r.Status
	if status == "" {
		status = timeline.Running
	}
	fmt.Fprintf(b, `<text x="%d" y="22" font-size="15" font-weight="bold">khook %s %s: %s in %s</text>`+"\n", tlLabelX, esc(r.Command), esc(r.Spec), esc(status), tlDuration(ax.total))
	line := "critical path: none (no step ran)"
	if len(path) > 0 {
		steps := map[string]*timeline.Step{}
		for i := range r.Steps {
			steps[r.Steps[i].Name] = &r.Steps[i]
		}
		first, last := steps[path[0]], steps[path[len(path)-1]]
		line = fmt.Sprintf("critical path (the needs: chain that set the total): %s, %s", strings.Join(path, " → "), tlDuration(last.End().Sub(first.Start())))
	}
	fmt.Fprintf(b, `<text x="%d" y="44" fill="#333333">%s</text>`+"\n", tlLabelX, esc(line))
	if r.TraceID != "" {
		fmt.Fprintf(b, `<text x="%d" y="22" fill="#666666" font-size="11" text-anchor="end">trace %s</text>`+"\n", tlPlotX1, esc(r.TraceID))
	}

	// the axis: ticks and their labels, a line across the rows
	step := tlTick(ax.total)
	for d := time.Duration(0); d <= ax.total; d += step {
		x := ax.x(start.Add(d))
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#e9ecef" stroke-width="1"/>`+"\n", x, tlRowsY-8, x, rowsEnd)
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#868e96" font-size="11" text-anchor="middle">%s</text>`+"\n", x, tlRowsY-12, tlDuration(d))
	}

	for i, s := range r.Steps {
		y := tlRowsY + i*tlRowH
		if i%2 == 1 {
			fmt.Fprintf(b, `<rect x="0" y="%d" width="%d" height="%d" fill="#f8f9fa"/>`+"\n", y, tlWidth, tlRowH)
		}
		weight, color := "normal", "#212529"
		if onPath[s.Name] {
			weight = "bold"
		}
		if len(s.Attempts) == 0 {
			color = "#868e96"
		}
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="%s" font-weight="%s">%s <tspan fill="#868e96" font-weight="normal">%s</tspan></text>`+"\n",
			tlLabelX, y+16, color, weight, esc(cutName(s.Name)), esc(s.Type+" · "+s.Status))
		for k, a := range s.Attempts {
			drawAttempt(b, ax, s, k, a, y, onPath[s.Name], esc)
		}
		if len(s.Attempts) == 0 && (s.Status == "skipped" || s.Status == timeline.Resumed) {
			at := s.At
			if at.IsZero() {
				at = start
			}
			x := min(ax.x(at), tlPlotX1-tlMarkW)
			fmt.Fprintf(b, `<rect class="mark" data-step="%s" data-status="%s" x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
				esc(s.Name), esc(s.Status), x, y+tlBarDY, tlMarkW, tlBarH, TimelineColors[s.Status], esc(s.Name+": "+s.Status))
		}
	}

	// the legend
	y := rowsEnd + tlLegendGap
	x := tlLabelX
	for _, it := range []struct{ key, label string }{
		{"ok", "ok"}, {"failed", "failed"}, {"retried", "attempt failed, retried"}, {"interrupted", "interrupted"},
		{"skipped", "skipped"}, {timeline.Resumed, "resumed (state record)"},
	} {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="14" height="%d" fill="%s"/>`+"\n", x, y, tlBarH, TimelineColors[it.key])
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#495057">%s</text>`+"\n", x+19, y+11, it.label)
		x += 30 + 7*len(it.label)
	}
	y += tlRowH
	x = tlLabelX
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="28" height="%d" fill="%s"/>`+"\n", x, y, tlBarH, TimelineColors["ok"])
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="28" height="%d" fill="%s" fill-opacity="0.45"/>`+"\n", x, y+tlBarH-tlWaitH, tlWaitH, TimelineColors["wait"])
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#495057">waiting (for objects to become ready or gone, for a chart's hooks)</text>`+"\n", x+34, y+11)
	x += 460
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="28" height="%d" fill="%s" stroke="%s" stroke-width="2"/>`+"\n", x, y, tlBarH, TimelineColors["ok"], TimelineColors["critical-outline"])
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#495057">on the critical path</text>`+"\n", x+34, y+11)
	b.WriteString("</svg>\n")
}

// drawAttempt draws attempt k of step s in the row at y.
func drawAttempt(b *strings.Builder, ax tlAxis, s timeline.Step, k int, a timeline.Attempt, y int, critical bool, esc func(string) string) {
	status := s.Status
	if k < len(s.Attempts)-1 {
		status = "retried"
	}
	fill := TimelineColors[status]
	if fill == "" {
		fill = TimelineColors["skipped"]
	}
	end := a.End
	if end.IsZero() {
		end = a.Start
	}
	x1, x2 := ax.x(a.Start), ax.x(end)
	width := max(x2-x1, tlMinBarW)
	if x1+width > tlPlotX1 {
		x1 = tlPlotX1 - width
	}
	var waited time.Duration
	for _, wt := range a.Waits {
		waited += wt.End.Sub(wt.Start)
	}
	title := fmt.Sprintf("%s (%s) attempt %d: %s, %s", s.Name, s.Type, k+1, status, tlDuration(end.Sub(a.Start)))
	if waited > 0 {
		title += fmt.Sprintf(", of which waiting %s", tlDuration(waited))
	}
	stroke := ""
	if critical {
		stroke = fmt.Sprintf(` stroke="%s" stroke-width="2"`, TimelineColors["critical-outline"])
	}
	fmt.Fprintf(b, `<rect class="bar" data-step="%s" data-attempt="%d" data-status="%s" x="%d" y="%d" width="%d" height="%d" fill="%s"%s><title>%s</title></rect>`+"\n",
		esc(s.Name), k+1, status, x1, y+tlBarDY, width, tlBarH, fill, stroke, esc(title))
	for _, wt := range a.Waits {
		w1, w2 := max(ax.x(wt.Start), x1), min(ax.x(wt.End), x1+width)
		if w2-w1 < 1 {
			continue
		}
		fmt.Fprintf(b, `<rect class="wait" data-step="%s" data-attempt="%d" x="%d" y="%d" width="%d" height="%d" fill="%s" fill-opacity="0.45"><title>%s</title></rect>`+"\n",
			esc(s.Name), k+1, w1, y+tlBarDY+tlBarH-tlWaitH, w2-w1, tlWaitH, TimelineColors["wait"], esc(fmt.Sprintf("%s attempt %d: waiting %s", s.Name, k+1, tlDuration(wt.End.Sub(wt.Start)))))
	}
}

// cutName keeps a step's name to what its column holds.
func cutName(s string) string {
	if r := []rune(s); len(r) > 28 {
		return string(r[:27]) + "…"
	}
	return s
}

// tlTicks are the axis's possible tick spacings.
var tlTicks = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second,
	10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute,
	15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// tlTick is the axis's tick spacing: the smallest of tlTicks that makes
// at most ten ticks.
func tlTick(total time.Duration) time.Duration {
	for _, d := range tlTicks {
		if total/d <= 10 {
			return d
		}
	}
	return total / 10
}

// tlDuration writes a duration as the axis and titles show it.
func tlDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		s := fmt.Sprintf("%.1f", d.Seconds())
		return strings.TrimSuffix(s, ".0") + "s"
	}
	return d.Round(time.Second).String()
}
