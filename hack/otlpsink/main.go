// Command otlpsink is the OTLP receiver of the tests of khook's traces: the
// OpenTelemetry Collector's own OTLP receiver
// (go.opentelemetry.io/collector/receiver/otlpreceiver), gRPC and HTTP, on
// the loopback addresses given, writing every batch of spans it receives
// as one line of OTLP JSON (the collector's encoder, ptrace.JSONMarshaler)
// to a file. It prints "ready" on standard output once it listens and
// stops on SIGINT or SIGTERM.
//
// Tools module, NOT part of go.work (like hack/testbin/*): the collector's
// dependencies (a newer grpc and OpenTelemetry SDK than the product's)
// stay out of the product's module graph. Built by `make otlpsink` (or by
// the end-to-end test that needs it) with GOWORK=off.
//
//	otlpsink -grpc 127.0.0.1:4317 -http 127.0.0.1:4318 -out spans.jsonl
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

func main() {
	grpcAddr := flag.String("grpc", "127.0.0.1:4317", "OTLP/gRPC listen address (loopback)")
	httpAddr := flag.String("http", "127.0.0.1:4318", "OTLP/HTTP listen address (loopback)")
	out := flag.String("out", "", "file the received spans are appended to, one OTLP JSON request a line")
	flag.Parse()
	if err := run(*grpcAddr, *httpAddr, *out); err != nil {
		fmt.Fprintln(os.Stderr, "otlpsink:", err)
		os.Exit(1)
	}
}

func run(grpcAddr, httpAddr, out string) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	var mu sync.Mutex
	enc := &ptrace.JSONMarshaler{}
	traces, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		b, err := enc.MarshalTraces(td)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if _, err := f.Write(append(b, '\n')); err != nil {
			return err
		}
		return f.Sync()
	})
	if err != nil {
		return err
	}
	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = grpcAddr
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = httpAddr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rcv, err := factory.CreateTraces(ctx, receivertest.NewNopSettings(factory.Type()), cfg, traces)
	if err != nil {
		return err
	}
	if err := rcv.Start(ctx, componenttest.NewNopHost()); err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	return rcv.Shutdown(context.Background())
}
