package tracing

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// newFileExporter is the exporter of --trace-file: the OTLP exporter of
// the SDK (otlptrace, which turns the SDK's spans into OTLP protobuf as it
// does for a collector) with a client that writes each export request to
// path as one line of OTLP JSON, the format of the collector's file
// exporter and otlpjsonfile receiver. The file is created anew.
func newFileExporter(path string) (sdktrace.SpanExporter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--trace-file: %w", err)
	}
	return otlptrace.NewUnstarted(&fileClient{f: f}), nil
}

// fileClient is an otlptrace.Client that writes to a file.
type fileClient struct {
	mu sync.Mutex
	f  *os.File
}

func (c *fileClient) Start(context.Context) error { return nil }

func (c *fileClient) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil
	}
	err := c.f.Close()
	c.f = nil
	return err
}

func (c *fileClient) UploadTraces(_ context.Context, spans []*tracepb.ResourceSpans) error {
	line, err := MarshalJSON(&collectortrace.ExportTraceServiceRequest{ResourceSpans: spans})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return fmt.Errorf("--trace-file: closed")
	}
	if _, err := c.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("--trace-file: %w", err)
	}
	return nil
}

// MarshalJSON encodes an export request as OTLP JSON: protojson with the
// two differences the OTLP specification makes (OTLP/HTTP, JSON
// Protobuf Encoding): enum values as integers, and trace and span ids as
// hex strings rather than base64.
func MarshalJSON(req *collectortrace.ExportTraceServiceRequest) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(req)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if err := hexIDs(doc); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// idFields are the OTLP fields that hold ids.
var idFields = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

// hexIDs turns the base64 ids protojson wrote into hex, everywhere in v.
func hexIDs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && idFields[k] {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%s %q: %w", k, s, err)
				}
				v[k] = hex.EncodeToString(b)
				continue
			}
			if err := hexIDs(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := hexIDs(x); err != nil {
				return err
			}
		}
	}
	return nil
}
