package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"khook.io/core/engine"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/timeline"
	"khook.io/core/tracing"
)

// TraceFlags are --trace-file and --timeline: what a run leaves of where
// its time went besides the trace the OpenTelemetry environment asks for.
type TraceFlags struct {
	// File is --trace-file: the run's trace as OTLP JSON.
	File string
	// Timeline is --timeline: the timeline picture, SVG (HTML when the
	// name ends in .html or .htm).
	Timeline string
}

// AddFlags registers the flags.
func (f *TraceFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.File, "trace-file", "", "write the run's OpenTelemetry trace to FILE as OTLP JSON (one export request a line), with or without a collector (OTEL_EXPORTER_OTLP_ENDPOINT); see docs/tracing.md")
	cmd.Flags().StringVar(&f.Timeline, "timeline", "", "at the end, draw the run as a timeline picture into FILE (SVG; HTML when FILE ends in .html): a bar per step and attempt, waits shaded, the critical path marked")
}

// check refuses a --timeline with --contexts: a picture is one cluster's
// run (status --timeline --contexts draws each).
func (f *TraceFlags) check(fleet bool) error {
	for _, fl := range [...]struct{ name, value string }{{"--trace-file", f.File}, {"--timeline", f.Timeline}} {
		if fl.value != "" && strings.TrimSpace(fl.value) == "" {
			return invalid(fmt.Errorf("%s needs a file name", fl.name))
		}
	}
	if fleet && f.Timeline != "" {
		return invalid(errors.New("--timeline draws one cluster's run: with --contexts, draw each cluster's with status --timeline FILE --context NAME"))
	}
	return nil
}

// startTrace starts the run's trace: nil when the environment and
// --trace-file leave tracing off.
func (o *RunOptions) startTrace(ctx context.Context) (*tracing.Trace, error) {
	getenv := os.Getenv
	if o.Environ != nil {
		getenv = func(k string) string { return envLookup(o.Environ, k) }
	}
	tr, err := tracing.Start(ctx, tracing.Options{Getenv: getenv, File: o.Trace.File, Command: o.Command, Redactor: o.Redactor, Stderr: o.Streams.ErrOut})
	if err != nil {
		return nil, invalid(err)
	}
	return tr, nil
}

// endTrace ends the run's trace with the command's outcome, saying its id
// and where it went on standard error.
func (o *RunOptions) endTrace(tr *tracing.Trace, err error) {
	if tr == nil {
		return
	}
	code := ExitOK
	if err != nil {
		code = exitCode(err, ExitFailed)
	}
	var exitErr *ExitError
	if errors.As(err, &exitErr) && exitErr.Err == nil {
		err = nil // silent: the summary said why; the exit code says it
	}
	if tr.Sampled() {
		fmt.Fprintf(o.Streams.ErrOut, "Trace %s: %s.\n", tr.ID(), tr.Describe())
	} else {
		fmt.Fprintf(o.Streams.ErrOut, "Trace %s: not recorded (TRACEPARENT says the caller does not sample it).\n", tr.ID())
	}
	tr.End(code, err)
}

// traceSteps are the steps as the trace names them: target and fate.
func traceSteps(doc *load.Document, disp []engine.Disposition) []tracing.StepInfo {
	out := make([]tracing.StepInfo, len(doc.Spec.Steps))
	for i := range doc.Spec.Steps {
		st := &doc.Spec.Steps[i]
		out[i] = tracing.StepInfo{Name: st.Name, Target: st.Summary()}
		if i < len(disp) {
			out[i].Fate = disp[i].Fate.String()
		}
	}
	return out
}

// writeTimeline draws r into the file name, SVG or (name ending in .html
// or .htm) HTML.
func writeTimeline(name string, r *timeline.Run, red *redact.Redactor) error {
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("--timeline: %w", err)
	}
	draw := render.TimelineSVG
	if ext := strings.ToLower(filepath.Ext(name)); ext == ".html" || ext == ".htm" {
		draw = render.TimelineHTML
	}
	if err := draw(f, r, red); err != nil {
		f.Close()
		return fmt.Errorf("--timeline %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--timeline %s: %w", name, err)
	}
	return nil
}
