package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"khook.io/core/internal/english"
	"khook.io/core/state"
)

// StatusReport is status -o json.
type StatusReport struct {
	Found    bool          `json:"found"`
	Location string        `json:"location,omitempty"`
	Record   *state.Record `json:"record,omitempty"`
	// Resumes lists the steps the next apply skips.
	Resumes []string           `json:"resumes,omitempty"`
	Steps   []state.StepStatus `json:"steps,omitempty"`
	Removed []string           `json:"removed,omitempty"`
}

// NewStatusReport builds the JSON form; st nil means no record.
func NewStatusReport(st *state.Status) StatusReport {
	if st == nil {
		return StatusReport{Found: false}
	}
	return StatusReport{Found: true, Location: st.Location.String(), Record: st.Record, Resumes: st.Resumes, Steps: st.Steps, Removed: st.Removed}
}

// StatusText writes the last run and what the next apply will do.
func StatusText(w io.Writer, st *state.Status) error {
	r := st.Record
	fmt.Fprintf(w, "State record %s\n", st.Location)
	fmt.Fprintf(w, "Spec %s, last %s %s (khook %s)\n", r.Spec, r.Command, r.RunStatus, r.KhookVersion)
	fmt.Fprintf(w, "Started %s", r.StartedAt.UTC().Format(time.RFC3339))
	if r.FinishedAt != nil {
		fmt.Fprintf(w, ", finished %s (%s)", r.FinishedAt.UTC().Format(time.RFC3339), fmtDuration(r.FinishedAt.Sub(r.StartedAt)))
	}
	fmt.Fprintln(w)
	if r.TraceID != "" {
		fmt.Fprintf(w, "Trace %s\n", r.TraceID)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tTYPE\tSTATUS\tATTEMPTS\tDURATION\tNEXT APPLY\tDETAIL")
	for _, s := range st.Steps {
		status, attempts, dur, detail := "-", "-", "-", ""
		if rec := s.Record; rec != nil {
			status, attempts = rec.Status, fmt.Sprint(rec.Attempts)
			if rec.Attempts > 0 {
				dur = fmtDuration(time.Duration(rec.DurationMs) * time.Millisecond)
			}
			detail = rec.Detail
			if rec.Error != "" {
				detail = rec.Error
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Type, status, attempts, dur, s.Why, firstLine(detail))
	}
	for _, name := range st.Removed {
		rec := r.Steps[name]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t-\tno longer in the spec\t%s\n", name, rec.Type, rec.Status, rec.Attempts, firstLine(rec.Detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := hashCannotSee(w, st.Steps); err != nil {
		return err
	}
	runs := len(st.Steps) - len(st.Resumes)
	line := fmt.Sprintf("\nNext apply resumes %s", english.CountNoun(len(st.Resumes), "step"))
	if len(st.Resumes) > 0 {
		line += " (" + strings.Join(st.Resumes, ", ") + ")"
	}
	line += fmt.Sprintf(" and considers %s.\n", english.CountNoun(runs, "other"))
	_, err := io.WriteString(w, line)
	return err
}

// hashCannotSee lists, per step, the remote content its input hash
// identifies by reference only; nothing when there is none.
func hashCannotSee(w io.Writer, steps []state.StepStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, s := range steps {
		for _, r := range s.HashCannotSee {
			if !header {
				fmt.Fprintln(tw, "\nRemote content the input hashes cannot see (a change there re-runs nothing; pin it, or delete the record):")
				header = true
			}
			fmt.Fprintf(tw, "  %s\t%s\n", s.Name, r)
		}
	}
	return tw.Flush()
}
