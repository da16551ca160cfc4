package render

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"khook.io/core/event"
	"khook.io/core/internal/english"
	"khook.io/core/redact"
)

// FleetProgress renders a fleet run: the same spec run on several clusters
// (kubeconfig contexts), some at once. On a terminal it keeps one live
// block per cluster, a line for the cluster (its state, time and step
// counts) over a line per step as Progress draws them; when the blocks do
// not fit, each cluster gets an equal share of the rows (its running and
// failed steps first, then a line counting the rest) while that leaves it
// three rows or more, then one line per cluster (with what its running
// step does), and when there are more clusters than rows, the running
// and failed ones first and a line counting the rest. Piped, it prints one line per
// change, prefixed with the context. Other lines written to the terminal
// meanwhile go above the block (see Console), as with Progress.
type FleetProgress struct {
	liveRenderer
	clusters []*clusterState
	now      func() time.Time
	start    time.Time
	red      *redact.Redactor
	verb     string
	seq      int
}

// ClusterInfo names a cluster of a fleet (its kubeconfig context) and the
// steps it runs, in their order.
type ClusterInfo struct {
	Context string
	Steps   []StepInfo
}

// Cluster states, besides the run statuses ok, failed and interrupted.
const (
	ClusterWaiting    = "waiting"    // for a place among the clusters run at once
	ClusterConnecting = "connecting" // checking the cluster, reading its state record
	ClusterRunning    = "running"
)

type clusterState struct {
	name              string
	m                 *stepsModel
	state             string
	started, finished time.Time
	note              string // the cluster's own error
	changed           int
}

// NewFleetProgress starts a renderer for the clusters, in the order given.
func NewFleetProgress(w io.Writer, clusters []ClusterInfo, opts ProgressOptions) *FleetProgress {
	return newFleetProgress(w, clusters, opts, time.Now, true)
}

func newFleetProgress(w io.Writer, clusters []ClusterInfo, opts ProgressOptions, now func() time.Time, tick bool) *FleetProgress {
	f := &FleetProgress{now: now, start: now(), red: opts.Redactor, verb: opts.Verb}
	for _, c := range clusters {
		f.clusters = append(f.clusters, &clusterState{name: c.Context, m: newStepsModel(c.Steps, opts.Redactor, now), state: ClusterWaiting})
	}
	f.setUp(w, opts, f.drawFrame, tick)
	return f
}

// ClusterProgress is one cluster's part of a FleetProgress: the sink of
// its run's events, and its own state.
type ClusterProgress struct {
	f *FleetProgress
	c *clusterState
}

// Cluster returns the progress of cluster i (in NewFleetProgress's order).
func (f *FleetProgress) Cluster(i int) *ClusterProgress {
	return &ClusterProgress{f: f, c: f.clusters[i]}
}

// Emit renders one event of the cluster's run; safe for concurrent use.
func (p *ClusterProgress) Emit(e event.Event) {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Kind == event.RunStarted {
		f.setState(p.c, ClusterRunning, "")
		return
	}
	s, line := p.c.m.apply(e)
	if s == nil {
		return
	}
	f.seq++
	p.c.changed = f.seq
	if f.changed() {
		return
	}
	f.piped(p.c, fmt.Sprintf("%-*s %s", p.c.m.nameWidth(), s.name, line))
}

// Connecting says the cluster's turn came: khook checks it and reads its
// state record.
func (p *ClusterProgress) Connecting() {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.c.started = p.f.now()
	p.f.setState(p.c, ClusterConnecting, "")
}

// Finished says how the cluster's run ended (ok, failed, interrupted),
// with the cluster's own error when there is one (it could not be
// reached, its state record could not be written; the steps' errors are
// theirs).
func (p *ClusterProgress) Finished(status, err string) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.c.finished = p.f.now()
	if p.c.started.IsZero() {
		p.c.started = p.c.finished
	}
	p.f.setState(p.c, status, p.f.red.String(err))
}

// stepCounts says how many of the cluster's steps are in each state, or
// that its steps never ran (it ended before they started).
func (c *clusterState) stepCounts() string {
	counts := c.m.counts()
	switch c.state {
	case ClusterWaiting, ClusterConnecting, ClusterRunning:
	default:
		if counts["pending"] == len(c.m.order) {
			return "no step ran"
		}
	}
	return countList(counts)
}

// setState changes a cluster's state and renders it.
func (f *FleetProgress) setState(c *clusterState, state, note string) {
	c.state, c.note = state, note
	f.seq++
	c.changed = f.seq
	if f.changed() {
		return
	}
	var line string
	switch state {
	case ClusterConnecting:
		line = "connecting"
	case ClusterRunning:
		line = f.verb + " started"
	default:
		line = fmt.Sprintf("%s %s after %s: %s", f.verb, state, fmtDuration(c.finished.Sub(c.started)), c.stepCounts())
		if note != "" {
			line += ": " + note
		}
	}
	f.piped(c, line)
}

// piped writes one line for cluster c, prefixed with its context and the
// fleet's elapsed time.
func (f *FleetProgress) piped(c *clusterState, line string) {
	_, _ = fmt.Fprintf(f.blk.w, "%-*s [%7s] %s\n", f.contextWidth(), c.name, fmtDuration(f.now().Sub(f.start)), line)
}

func (f *FleetProgress) contextWidth() int {
	w := 4
	for _, c := range f.clusters {
		w = max(w, DisplayWidth(c.name))
	}
	return w
}

// drawFrame draws the clusters within the terminal's rows (see FleetProgress);
// the final frame has no row limit, but draws the blocks only when they
// fit the terminal.
func (f *FleetProgress) drawFrame(b *strings.Builder, final bool) {
	rows := max(f.height-1, 1)
	total := 0
	for _, c := range f.clusters {
		total += 1 + len(c.m.order)
	}
	cw := f.contextWidth()
	switch {
	case total <= rows:
		for _, c := range f.clusters {
			f.blk.line(b, f.clusterLine(c, cw, false), c.state)
			c.m.frame(b, &f.blk, c.m.order, "    ")
		}
	case !final && rows/len(f.clusters) >= 3:
		// a share of the rows each: the cluster's line, its running and
		// failed steps first, a line counting the rest
		per := rows / len(f.clusters)
		for _, c := range f.clusters {
			f.blk.line(b, f.clusterLine(c, cw, false), c.state)
			c.m.frame(b, &f.blk, c.m.visible(per-1), "    ")
		}
	case final || len(f.clusters) <= rows:
		for _, c := range f.clusters {
			f.blk.line(b, f.clusterLine(c, cw, true), c.state)
		}
	default:
		shown := f.visibleClusters(rows - 1)
		for _, c := range shown {
			f.blk.line(b, f.clusterLine(c, cw, true), c.state)
		}
		f.blk.line(b, f.hiddenClusters(shown), ClusterWaiting)
	}
}

// clusterLine is a cluster's line: its state, time and step counts, its
// own error; compact adds what its running steps do, as the line stands
// for the whole block.
func (f *FleetProgress) clusterLine(c *clusterState, cw int, compact bool) string {
	mark, dur := "·", ""
	switch c.state {
	case ClusterConnecting, ClusterRunning:
		mark, dur = "›", fmtDuration(f.now().Sub(c.started))
	case "ok":
		mark, dur = "✓", fmtDuration(c.finished.Sub(c.started))
	case "failed":
		mark, dur = "✗", fmtDuration(c.finished.Sub(c.started))
	case "interrupted":
		mark, dur = "!", fmtDuration(c.finished.Sub(c.started))
	}
	line := fmt.Sprintf("%s %-*s  %-11s  %-8s %s", mark, cw, c.name, c.state, dur, c.stepCounts())
	if c.note != "" {
		line += " · " + Printable(firstLine(c.note))
	}
	if compact && c.state == ClusterRunning {
		for _, n := range c.m.order {
			if s := c.m.steps[n]; s.state == "running" {
				line += " · " + s.name
				if s.note != "" {
					line += ": " + Printable(firstLine(s.note))
				}
				break
			}
		}
	}
	return line
}

// visibleClusters picks n clusters for a frame of lines, in their order:
// the connecting and running ones first, then the failed and interrupted
// ones, then the most recently finished, then the waiting ones that come
// first.
func (f *FleetProgress) visibleClusters(n int) []*clusterState {
	n = max(n, 1)
	rank := func(c *clusterState) int {
		switch c.state {
		case ClusterConnecting, ClusterRunning:
			return 0
		case "failed", "interrupted":
			return 1
		case "ok":
			return 2
		}
		return 3
	}
	idx := make([]int, len(f.clusters))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ca, cb := f.clusters[a], f.clusters[b]
		if ra, rb := rank(ca), rank(cb); ra != rb {
			return ra - rb
		}
		if rank(ca) == 2 {
			return cb.changed - ca.changed
		}
		return a - b
	})
	chosen := idx[:min(n, len(idx))]
	slices.Sort(chosen)
	out := make([]*clusterState, len(chosen))
	for i, k := range chosen {
		out[i] = f.clusters[k]
	}
	return out
}

// hiddenClusters counts the clusters a frame leaves out, by state.
func (f *FleetProgress) hiddenClusters(shown []*clusterState) string {
	counts := map[string]int{}
	for _, c := range f.clusters {
		if !slices.Contains(shown, c) {
			counts[c.state]++
		}
	}
	var parts []string
	for _, st := range []string{ClusterConnecting, ClusterRunning, "failed", "interrupted", "ok", ClusterWaiting} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	return fmt.Sprintf("… %s not shown: %s", english.CountNoun(len(f.clusters)-len(shown), "more cluster"), strings.Join(parts, ", "))
}
