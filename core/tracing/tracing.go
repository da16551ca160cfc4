// Package tracing exports a trace of every run by the OpenTelemetry
// conventions, through the OpenTelemetry Go SDK and its OTLP exporters.
// It is off unless the standard environment turns it on
// (OTEL_TRACES_EXPORTER, or an OTLP endpoint: OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or a file of OTLP JSON is asked for
// (--trace-file); off, Start returns a nil *Trace, whose methods do
// nothing, and nothing of the SDK runs.
//
// The spans are drawn from the run's events (core/event), the ones the
// progress lines come from: Sink is one more sink of them. One span for the
// command (the run), under it a span per cluster of a fleet, the run lock's
// and the state record's phases, a span per step, a span per attempt under
// it, and under each attempt its phases (fetch, render, install or apply,
// wait, hook), with a wait's stuck causes as events. A TRACEPARENT in the
// environment (W3C trace context, as CI systems and OpenTofu pass it)
// makes the command's span a child of the caller's. Every text that goes
// into a span passes through the run's redactor.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"khook.io/core/redact"
	"khook.io/core/version"
)

// FlushTimeout bounds the export of the spans at the end of a run: a
// collector that does not answer delays the command's exit by at most
// this long, with a warning, never its outcome.
const FlushTimeout = 10 * time.Second

// Options say how a command's run is traced.
type Options struct {
	// Getenv reads the environment (os.Getenv when nil): the
	// OpenTelemetry variables, TRACEPARENT and TRACESTATE. The OTLP
	// exporters read their own (endpoint, headers, TLS, timeout,
	// compression) from the process's environment, as the SDK does.
	Getenv func(string) string
	// File is --trace-file: the spans are also written there, as OTLP
	// JSON (one export request a line); "": none.
	File string
	// Command names the run ("apply", "destroy").
	Command string
	// Redactor masks every text that goes into a span.
	Redactor *redact.Redactor
	// Stderr receives the console exporter's spans and the warnings of
	// failed exports (nil: discarded).
	Stderr io.Writer
	// Parent, when valid, is the span the run is a child of (the
	// Terraform provider's); else TRACEPARENT decides.
	Parent trace.SpanContext
}

// Enabled reports whether the environment getenv reads, or a trace file,
// turns tracing on.
func Enabled(getenv func(string) string, file string) bool {
	if file != "" {
		return true
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	return len(exporterNames(getenv)) > 0
}

// exporterNames are the exporters the environment asks for: those of
// OTEL_TRACES_EXPORTER (but "none"), or otlp when it is unset and an OTLP
// endpoint is; none when OTEL_SDK_DISABLED is true. Unlike the SDK's
// default (otlp), an environment that says nothing means no tracing: a
// command-line tool must not send spans to localhost unasked.
func exporterNames(getenv func(string) string) []string {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil
	}
	v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if v == "" {
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			return []string{"otlp"}
		}
		return nil
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		switch n = strings.ToLower(strings.TrimSpace(n)); n {
		case "none":
			return nil
		case "":
		default:
			names = append(names, n)
		}
	}
	return names
}

// Trace is the trace of one command's run. A nil *Trace traces nothing.
type Trace struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	root     trace.Span
	ctx      context.Context // the root span's
	red      *redact.Redactor
	stderr   io.Writer
	where    []string // what the spans go to
	warned   sync.Once
	ended    bool
	// clusters are the sinks of the run's clusters, ended with the run
	// when their run did not end them (a fleet that never ran)
	mu       sync.Mutex
	clusters []*Sink
}

// Start starts tracing a command's run: nil when the environment and
// File leave tracing off. The run's span starts now; End ends it and
// exports the trace. An exporter the environment names that khook
// cannot build is a warning, not an error: the run goes on, traced by
// the others if any.
func Start(ctx context.Context, o Options) (*Trace, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if !Enabled(getenv, o.File) {
		return nil, nil
	}
	if o.Redactor == nil {
		o.Redactor = redact.New()
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	t := &Trace{red: o.Redactor, stderr: o.Stderr}
	var exporters []sdktrace.SpanExporter
	for _, name := range exporterNames(getenv) {
		exp, where, err := newExporter(ctx, name, getenv, o.Stderr)
		if err != nil {
			t.warn(err)
			continue
		}
		exporters = append(exporters, exp)
		t.where = append(t.where, where)
	}
	if o.File != "" {
		exp, err := newFileExporter(o.File)
		if err != nil {
			for _, e := range exporters {
				_ = e.Shutdown(ctx)
			}
			return nil, err
		}
		exporters = append(exporters, exp)
		t.where = append(t.where, "written to "+o.File)
	}
	if len(exporters) == 0 {
		return nil, nil
	}
	t.start(ctx, o, getenv, exporters)
	return t, nil
}

// start starts the provider with exporters and the run's span.
func (t *Trace) start(ctx context.Context, o Options, getenv func(string) string, exporters []sdktrace.SpanExporter) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "khook"), attribute.String("service.version", version.Get().Version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
	)
	if err != nil {
		t.warn(fmt.Errorf("resource attributes: %w", err))
		res = resource.Default()
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, exp := range exporters {
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	t.provider = sdktrace.NewTracerProvider(opts...)
	// export failures while the run goes on are a warning, once
	otel.SetErrorHandler(otel.ErrorHandlerFunc(t.warn))
	t.tracer = t.provider.Tracer("khook.io/core/tracing", trace.WithInstrumentationVersion(version.Get().Version))

	parent := ctx
	if o.Parent.IsValid() {
		parent = trace.ContextWithRemoteSpanContext(ctx, o.Parent)
	} else {
		carrier := propagation.MapCarrier{}
		if tp := strings.TrimSpace(getenv("TRACEPARENT")); tp != "" {
			carrier["traceparent"] = tp
			carrier["tracestate"] = strings.TrimSpace(getenv("TRACESTATE"))
		}
		parent = propagation.TraceContext{}.Extract(ctx, carrier)
	}
	t.ctx, t.root = t.tracer.Start(parent, "khook "+o.Command, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("khook.command", o.Command), attribute.String("khook.version", version.Get().Version)))
}

// newExporter builds the exporter OTEL_TRACES_EXPORTER names: otlp over
// the protocol OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL says (grpc, or http/protobuf: the
// default), or console (standard error). It also says where the spans go.
func newExporter(ctx context.Context, name string, getenv func(string) string, stderr io.Writer) (sdktrace.SpanExporter, string, error) {
	switch name {
	case "otlp":
		proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
		if proto == "" {
			proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
		}
		switch proto {
		case "grpc":
			exp, err := otlptracegrpc.New(ctx)
			return exp, "sent by OTLP/gRPC", err
		case "", "http/protobuf":
			exp, err := otlptracehttp.New(ctx)
			return exp, "sent by OTLP/HTTP", err
		}
		return nil, "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: khook sends traces by grpc or http/protobuf", proto)
	case "console":
		exp, err := stdouttrace.New(stdouttrace.WithWriter(stderr))
		return exp, "printed to standard error", err
	}
	return nil, "", fmt.Errorf("OTEL_TRACES_EXPORTER %q: khook exports traces by otlp or console (or none)", name)
}

// warn writes the first export error of the run to standard error.
func (t *Trace) warn(err error) {
	if t == nil || err == nil {
		return
	}
	t.warned.Do(func() {
		fmt.Fprintf(t.stderr, "Warning: trace: %s\n", t.red.String(err.Error()))
	})
}

// ID is the trace's id (32 hex digits), "" for a nil Trace.
func (t *Trace) ID() string {
	if t == nil {
		return ""
	}
	return t.root.SpanContext().TraceID().String()
}

// Context is the context of the run's span, for what runs under it.
func (t *Trace) Context() context.Context {
	if t == nil {
		return context.Background()
	}
	return t.ctx
}

// Sampled reports whether the run's spans are recorded and exported (a
// caller's TRACEPARENT may say not to).
func (t *Trace) Sampled() bool { return t != nil && t.root.SpanContext().IsSampled() }

// SetSpec names the spec the run applies (khook.spec).
func (t *Trace) SetSpec(name string) {
	if t != nil {
		t.root.SetAttributes(attribute.String("khook.spec", t.red.String(name)))
	}
}

// SetContext names the cluster a single run runs on (khook.context).
func (t *Trace) SetContext(name string) {
	if t != nil {
		t.root.SetAttributes(attribute.String("khook.context", t.red.String(name)))
	}
}

// Describe says where the spans went: "sent by OTLP/gRPC, written to x".
func (t *Trace) Describe() string {
	if t == nil {
		return ""
	}
	return strings.Join(t.where, ", ")
}

// End ends the run's span with the command's exit code (and error,
// redacted), and exports what is left of the trace, bounded by
// FlushTimeout. An export that fails is a warning on standard error.
func (t *Trace) End(exitCode int, err error) {
	if t == nil || t.ended {
		return
	}
	t.ended = true
	t.mu.Lock()
	for _, s := range t.clusters {
		s.End("", nil)
	}
	t.mu.Unlock()
	t.root.SetAttributes(attribute.Int("process.exit.code", exitCode))
	if exitCode != 0 {
		msg := fmt.Sprintf("exit code %d", exitCode)
		if err != nil && err.Error() != "" {
			msg = t.red.String(err.Error())
		}
		t.root.SetStatus(codes.Error, msg)
	}
	t.root.End()
	ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
	defer cancel()
	if err := t.provider.ForceFlush(ctx); err != nil {
		t.warn(fmt.Errorf("trace %s not exported (%s): %w", t.ID(), t.Describe(), err))
	}
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.warn(fmt.Errorf("trace %s: %w", t.ID(), err))
	}
}
