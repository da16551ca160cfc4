package provider

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

// TestCallerSpan: the provider's run joins the trace of the call that
// reached it: the W3C trace context of its gRPC metadata.
func TestCallerSpan(t *testing.T) {
	if sc := callerSpan(context.Background()); sc.IsValid() {
		t.Fatalf("a call without a trace context: %v", sc)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
	sc := callerSpan(ctx)
	if !sc.IsValid() || sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" || !sc.IsRemote() {
		t.Fatalf("callerSpan: %+v", sc)
	}
}
