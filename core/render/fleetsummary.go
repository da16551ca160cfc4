package render

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"khook.io/core/internal/english"
	"khook.io/core/plan"
	"khook.io/core/run"
)

// ClusterRun is how one cluster of a fleet run ended.
type ClusterRun struct {
	// Context is the cluster's kubeconfig context.
	Context string
	// Status is ok, failed or interrupted.
	Status string
	// Err is the cluster's own error, not a step's: it could not be
	// reached, its state record could not be read or written, or it never
	// started (interrupted first).
	Err string
	// Result is its steps' run; nil when they never ran.
	Result   *run.Result
	Started  time.Time
	Duration time.Duration
	// TraceID is the run's trace (OpenTelemetry), "" when not traced.
	TraceID string
}

// counts counts the cluster's steps by status.
func (c ClusterRun) counts() run.Counts {
	if c.Result == nil {
		return run.Counts{}
	}
	return c.Result.Counts()
}

// FirstError is what went wrong first on the cluster: its own error, else
// the step that failed first ("step: error"), else the step that was
// interrupted first; "" for a cluster that succeeded.
func (c ClusterRun) FirstError() string {
	if c.Err != "" {
		return c.Err
	}
	if c.Result == nil {
		return ""
	}
	for _, status := range []string{run.StatusFailed, run.StatusInterrupted} {
		var first *run.StepResult
		for i := range c.Result.Steps {
			s := &c.Result.Steps[i]
			if s.Status == status && (first == nil || s.Finished.Before(first.Finished)) {
				first = s
			}
		}
		if first != nil {
			return first.Name + ": " + first.Error
		}
	}
	return ""
}

// FleetStatus is the status of a fleet run: interrupted when a cluster
// was, else failed when a cluster failed, else ok.
func FleetStatus(runs []ClusterRun) string {
	status := run.RunOK
	for _, c := range runs {
		switch c.Status {
		case run.RunInterrupted:
			return run.RunInterrupted
		case run.RunFailed:
			status = run.RunFailed
		}
	}
	return status
}

// FleetReport is the JSON form of a fleet run (apply --contexts -o json).
type FleetReport struct {
	Name       string `json:"name"`
	Command    string `json:"command"`
	Status     string `json:"status"`
	DurationMs int64  `json:"durationMs"`
	// TraceID is the fleet run's trace (one for every cluster), "" when
	// it was not traced.
	TraceID  string          `json:"traceId,omitempty"`
	Clusters []ClusterReport `json:"clusters"`
}

// ClusterReport is one cluster of a FleetReport.
type ClusterReport struct {
	Context     string `json:"context"`
	Status      string `json:"status"`
	DurationMs  int64  `json:"durationMs"`
	OK          int    `json:"ok"`
	Failed      int    `json:"failed"`
	Interrupted int    `json:"interrupted"`
	Skipped     int    `json:"skipped"`
	// Error is the cluster's first error (see ClusterRun.FirstError).
	Error string       `json:"error"`
	Steps []StepReport `json:"steps"`
}

// NewFleetReport builds the JSON form of a fleet run.
func NewFleetReport(name, command string, runs []ClusterRun, d time.Duration) FleetReport {
	r := FleetReport{Name: name, Command: command, Status: FleetStatus(runs), DurationMs: d.Milliseconds(), Clusters: make([]ClusterReport, len(runs))}
	for i, c := range runs {
		n := c.counts()
		cr := ClusterReport{Context: c.Context, Status: c.Status, DurationMs: c.Duration.Milliseconds(),
			OK: n.OK, Failed: n.Failed, Interrupted: n.Interrupted, Skipped: n.Skipped, Error: c.FirstError(), Steps: []StepReport{}}
		if c.Result != nil {
			cr.Steps = Report(name, command, c.Result).Steps
		}
		r.Clusters[i] = cr
		if c.TraceID != "" {
			r.TraceID = c.TraceID
		}
	}
	return r
}

// FleetSummary writes the final table of a fleet run, a line per cluster
// (its status, step counts, duration and first error), one closing line,
// and below it the full error of every failed step the table does not
// show whole.
func FleetSummary(w io.Writer, name, command string, runs []ClusterRun, d time.Duration) error {
	interrupted := slices.ContainsFunc(runs, func(c ClusterRun) bool { return c.counts().Interrupted > 0 })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "CONTEXT\tSTATUS\tOK\tFAILED\tSKIPPED\t"
	if interrupted {
		head += "INTERRUPTED\t"
	}
	fmt.Fprintln(tw, head+"DURATION\tFIRST ERROR")
	for _, c := range runs {
		n := c.counts()
		row := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t", c.Context, c.Status, n.OK, n.Failed, n.Skipped)
		if interrupted {
			row += fmt.Sprintf("%d\t", n.Interrupted)
		}
		first := firstLine(c.FirstError())
		if first == "" {
			first = "-"
		}
		fmt.Fprintf(tw, "%s%s\t%s\n", row, fmtDuration(c.Duration), first)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	byStatus := map[string][]string{}
	for _, c := range runs {
		byStatus[c.Status] = append(byStatus[c.Status], c.Context)
	}
	var parts []string
	for _, st := range []string{run.RunOK, run.RunFailed, run.RunInterrupted} {
		names := byStatus[st]
		switch {
		case len(names) == 0 && st == run.RunInterrupted:
		case st == run.RunOK || len(names) == 0:
			parts = append(parts, fmt.Sprintf("%d %s", len(names), st))
		default:
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(names), st, strings.Join(names, ", ")))
		}
	}
	verdict := "succeeded"
	switch FleetStatus(runs) {
	case run.RunFailed:
		verdict = "failed"
	case run.RunInterrupted:
		verdict = "was interrupted"
	}
	if _, err := fmt.Fprintf(w, "\n%s %s on %s %s in %s: %s.\n", command, name, english.CountNoun(len(runs), "cluster"), verdict, fmtDuration(d), strings.Join(parts, ", ")); err != nil {
		return err
	}
	for _, c := range runs {
		if c.Result == nil {
			if strings.Contains(c.Err, "\n") {
				fmt.Fprintf(w, "\n%s:\n%s\n", c.Context, c.Err)
			}
			continue
		}
		first := c.FirstError()
		for _, s := range c.Result.Steps {
			if s.Status != run.StatusFailed || (first == s.Name+": "+s.Error && !strings.Contains(s.Error, "\n")) {
				continue
			}
			fmt.Fprintf(w, "\n%s: %s failed:\n%s\n", c.Context, s.Name, s.Error)
		}
	}
	return nil
}

// FleetDiff writes the closing line of diff on a fleet of n clusters:
// the contexts of those that differ, and failed, when not "", which ones
// could not be diffed.
func FleetDiff(w io.Writer, n int, differ []string, failed string) {
	line := fmt.Sprintf("\nNo differences on %s", english.CountNoun(n, "cluster"))
	if len(differ) > 0 {
		line = fmt.Sprintf("\nDifferences on %d of %s: %s", len(differ), english.CountNoun(n, "cluster"), strings.Join(differ, ", "))
	}
	if failed != "" {
		line += "; " + failed
	}
	fmt.Fprintln(w, line+".")
}

// FleetResults is the structured output (-o json, yaml) of plan and
// status on a fleet: a result per cluster, in the fleet's order.
type FleetResults struct {
	Clusters []ClusterResult `json:"clusters"`
}

// ClusterResult is one cluster of FleetResults: its plan or its status,
// or the error that ended it (redacted).
type ClusterResult struct {
	Context string        `json:"context"`
	Plan    *plan.Plan    `json:"plan,omitempty"`
	Status  *StatusReport `json:"status,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// Section writes what one cluster of a fleet printed, under a
// "==> context NAME <==" line (a blank line before it but the first's),
// its error last when it has one to say (redacted with red).
func Section(out, errOut io.Writer, first bool, context string, printed, printedErr []byte, err string) {
	if !first {
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "==> context %s <==\n", context)
	_, _ = out.Write(printed)
	_, _ = errOut.Write(printedErr)
	if err != "" {
		fmt.Fprintf(out, "Error: %s\n", err)
	}
}

// PrefixLines returns a writer that writes each line to w after prefix
// (a cluster's API warnings say which cluster they come from); safe for
// concurrent use.
func PrefixLines(w io.Writer, prefix string) io.Writer {
	return &linePrefixer{w: w, prefix: prefix}
}

type linePrefixer struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  string
	midLine bool
}

func (p *linePrefixer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	var out bytes.Buffer
	for len(b) > 0 {
		if !p.midLine {
			out.WriteString(p.prefix)
		}
		line, rest, found := bytes.Cut(b, []byte("\n"))
		out.Write(line)
		if found {
			out.WriteByte('\n')
		}
		p.midLine = !found
		b = rest
	}
	_, err := p.w.Write(out.Bytes())
	return n, err
}
