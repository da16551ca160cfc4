package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"khook.io/core/internal/english"
	"khook.io/core/run"
)

// RunReport is the JSON form of a finished run (apply -o json).
type RunReport struct {
	Name       string `json:"name"`
	Command    string `json:"command"`
	Status     string `json:"status"`
	DurationMs int64  `json:"durationMs"`
	// TraceID is the run's trace (OpenTelemetry, 32 hex digits), "" when
	// the run was not traced.
	TraceID string       `json:"traceId,omitempty"`
	Steps   []StepReport `json:"steps"`
}

// StepReport is one step of a RunReport.
type StepReport struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Status     string `json:"status"`
	Attempts   int    `json:"attempts"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error"`
	SkipReason string `json:"skipReason"`
	Message    string `json:"message,omitempty"`
}

// Report builds the JSON form of res.
func Report(name, command string, res *run.Result) RunReport {
	r := RunReport{Name: name, Command: command, Status: res.Status, DurationMs: res.Duration.Milliseconds(), Steps: make([]StepReport, len(res.Steps))}
	for i, s := range res.Steps {
		r.Steps[i] = StepReport{Name: s.Name, Type: s.Type, Status: s.Status, Attempts: s.Attempts,
			DurationMs: s.Duration.Milliseconds(), Error: s.Error, SkipReason: s.SkipReason, Message: s.Message}
	}
	return r
}

// Summary writes the final table of a run and one closing line that says
// what was done and what was not.
func Summary(w io.Writer, name, command string, res *run.Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tTYPE\tSTATUS\tATTEMPTS\tDURATION\tDETAIL")
	for _, s := range res.Steps {
		detail := s.Message
		switch s.Status {
		case run.StatusFailed, run.StatusInterrupted:
			detail = s.Error
		case run.StatusSkipped:
			detail = s.SkipReason
		}
		dur := "-"
		if s.Attempts > 0 {
			dur = fmtDuration(s.Duration)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.Name, s.Type, s.Status, s.Attempts, dur, firstLine(detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c := res.Counts()
	var failed, interrupted []string
	for _, s := range res.Steps {
		switch s.Status {
		case run.StatusFailed:
			failed = append(failed, s.Name)
		case run.StatusInterrupted:
			interrupted = append(interrupted, s.Name)
		}
	}
	verdict := "succeeded"
	switch res.Status {
	case run.RunFailed:
		verdict = "failed (" + english.CountNoun(len(failed), "step") + " failed: " + strings.Join(failed, ", ") + ")"
	case run.RunInterrupted:
		verdict = "was interrupted"
		if len(interrupted) > 0 {
			verdict += " (" + english.CountNoun(len(interrupted), "step") + " cut short: " + strings.Join(interrupted, ", ") + ")"
		}
	}
	counts := fmt.Sprintf("%d ok, %d failed", c.OK, c.Failed)
	if c.Interrupted > 0 || res.Status == run.RunInterrupted {
		counts += fmt.Sprintf(", %d interrupted", c.Interrupted)
	}
	counts += fmt.Sprintf(", %d skipped", c.Skipped)
	_, err := fmt.Fprintf(w, "\n%s %s %s in %s: %s.\n", command, name, verdict, fmtDuration(res.Duration), counts)
	// a failed step's full error, when it spans lines (a job's log tail)
	for _, s := range res.Steps {
		if s.Status == run.StatusFailed && strings.Contains(s.Error, "\n") {
			fmt.Fprintf(w, "\n%s failed:\n%s\n", s.Name, s.Error)
		}
	}
	return err
}
