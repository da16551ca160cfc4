package kube

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func request(t *testing.T, ctx context.Context, method, contentType, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://10.0.0.1:6443/api/v1/namespaces/x/configmaps/y", r)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

func TestPolicyFor(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, method, contentType, body string
		want                            retryPolicy
	}{
		{"get (lists and watches too)", http.MethodGet, "", "", retryAny},
		{"head", http.MethodHead, "", "", retryAny},
		{"put replaces", http.MethodPut, "application/json", `{"kind":"ConfigMap"}`, retryAny},
		{"server-side apply", http.MethodPatch, string(types.ApplyPatchType), "kind: ConfigMap", retryAny},
		{"server-side apply, CBOR", http.MethodPatch, string(types.ApplyCBORPatchType), "x", retryAny},
		{"strategic merge patch", http.MethodPatch, string(types.StrategicMergePatchType), `{"data":{"a":"b"}}`, retryAny},
		{"merge patch", http.MethodPatch, string(types.MergePatchType), `{"data":{"a":"b"}}`, retryAny},
		{"JSON patch may append twice", http.MethodPatch, string(types.JSONPatchType), `[{"op":"add","path":"/x/-","value":1}]`, retryUnsent},
		{"create may create twice (generateName)", http.MethodPost, "application/json", `{"metadata":{"generateName":"x-"}}`, retryUnsent},
		{"delete with a uid precondition", http.MethodDelete, "application/json", `{"kind":"DeleteOptions","preconditions":{"uid":"1234"}}`, retryAny},
		{"delete with a resourceVersion precondition", http.MethodDelete, "application/json", `{"preconditions":{"resourceVersion":"7"}}`, retryAny},
		{"delete with empty preconditions", http.MethodDelete, "application/json", `{"preconditions":{}}`, retryUnsent},
		{"delete without preconditions", http.MethodDelete, "application/json", `{"propagationPolicy":"Background"}`, retryUnsent},
		{"delete without a body", http.MethodDelete, "", "", retryUnsent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := policyFor(request(t, ctx, tc.method, tc.contentType, tc.body)); got != tc.want {
				t.Errorf("policy %d, want %d", got, tc.want)
			}
		})
	}
}

func opErr(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError("connect", errno)}
}

func TestRetryable(t *testing.T) {
	refused := opErr("dial", syscall.ECONNREFUSED)
	reset := opErr("read", syscall.ECONNRESET)
	for _, tc := range []struct {
		name      string
		err       error
		any, once bool // retried under retryAny, under retryUnsent
	}{
		{"connection refused: never sent", refused, true, true},
		{"dial timeout: never sent", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}, true, true},
		{"reset under a request", reset, true, false},
		{"EOF under a request", io.EOF, true, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, true, false},
		{"broken pipe", opErr("write", syscall.EPIPE), true, false},
		{"http2 connection lost", errors.New("http2: client connection lost"), true, false},
		{"GOAWAY", errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=1"), true, false},
		{"a certificate problem", errors.New("tls: failed to verify certificate: x509: certificate has expired"), false, false},
		{"the context ended", context.DeadlineExceeded, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryable(retryAny, tc.err); got != tc.any {
				t.Errorf("idempotent request: retried %v, want %v", got, tc.any)
			}
			if got := retryable(retryUnsent, tc.err); got != tc.once {
				t.Errorf("other request: retried %v, want %v", got, tc.once)
			}
		})
	}
}

// scripted is a transport that fails with errs in turn, then answers 200;
// it records each attempt's body.
type scripted struct {
	mu     sync.Mutex
	errs   []error
	bodies []string
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	var body string
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		_ = req.Body.Close()
		body = string(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, body)
	if n := len(s.bodies); n <= len(s.errs) {
		return nil, s.errs[n-1]
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

func (s *scripted) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

func newTestRetry(next http.RoundTripper, slept *[]time.Duration) *retryTransport {
	return &retryTransport{next: next, sleep: func(ctx context.Context, d time.Duration) bool {
		*slept = append(*slept, d)
		return ctx.Err() == nil
	}}
}

func TestRetryTransport(t *testing.T) {
	refused := opErr("dial", syscall.ECONNREFUSED)
	reset := opErr("read", syscall.ECONNRESET)
	ssa := string(types.ApplyPatchType)
	for _, tc := range []struct {
		name         string
		method, ct   string
		errs         []error
		wantAttempts int
		wantErr      bool
	}{
		{"a create is sent again while the server refuses connections", http.MethodPost, "application/json", []error{refused, refused, refused}, 4, false},
		{"a create whose connection broke is not sent again", http.MethodPost, "application/json", []error{reset}, 1, true},
		{"an apply whose connection broke is sent again", http.MethodPatch, ssa, []error{reset, io.EOF, refused}, 4, false},
		{"a get is sent again", http.MethodGet, "", []error{io.ErrUnexpectedEOF}, 2, false},
		{"a certificate problem is not retried", http.MethodGet, "", []error{errors.New("x509: certificate has expired")}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := &scripted{errs: tc.errs}
			var slept []time.Duration
			rt := newTestRetry(next, &slept)
			body := ""
			if tc.method != http.MethodGet {
				body = `{"kind":"ConfigMap","metadata":{"name":"y"}}`
			}
			resp, err := rt.RoundTrip(request(t, context.Background(), tc.method, tc.ct, body))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if resp != nil {
				_ = resp.Body.Close()
			}
			if next.attempts() != tc.wantAttempts {
				t.Fatalf("%d attempts, want %d", next.attempts(), tc.wantAttempts)
			}
			for i, b := range next.bodies {
				if b != body {
					t.Errorf("attempt %d sent body %q, want %q", i+1, b, body)
				}
			}
			// backoff grows, within [d/2, d]
			for i := 1; i < len(slept); i++ {
				if slept[i] < slept[i-1]/2 {
					t.Errorf("backoff shrank: %v", slept)
				}
			}
			for _, d := range slept {
				if d > retryMaxDelay || d < retryInitialDelay/2 {
					t.Errorf("delay %v out of [%v, %v]", d, retryInitialDelay/2, retryMaxDelay)
				}
			}
		})
	}
}

func TestRetryTransportStops(t *testing.T) {
	refused := opErr("dial", syscall.ECONNREFUSED)
	always := func() *scripted {
		errs := make([]error, 1000)
		for i := range errs {
			errs[i] = refused
		}
		return &scripted{errs: errs}
	}
	t.Run("at the context's end, with the connection error", func(t *testing.T) {
		next := always()
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		rt := &retryTransport{next: next, sleep: func(ctx context.Context, d time.Duration) bool {
			if n++; n == 3 {
				cancel()
			}
			return ctx.Err() == nil
		}}
		_, err := rt.RoundTrip(request(t, ctx, http.MethodGet, "", ""))
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("want the last connection error, got %v", err)
		}
		if next.attempts() != 3 {
			t.Errorf("%d attempts, want 3", next.attempts())
		}
	})
	t.Run("before a deadline the next wait would pass", func(t *testing.T) {
		next := always()
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(retryInitialDelay/4))
		defer cancel()
		var slept []time.Duration
		_, err := newTestRetry(next, &slept).RoundTrip(request(t, ctx, http.MethodGet, "", ""))
		if err == nil || next.attempts() != 1 || len(slept) != 0 {
			t.Errorf("err %v after %d attempts and waits %v: want 1 attempt, no wait", err, next.attempts(), slept)
		}
	})
	t.Run("never for the up-front check", func(t *testing.T) {
		next := always()
		var slept []time.Duration
		_, err := newTestRetry(next, &slept).RoundTrip(request(t, WithoutRetries(context.Background()), http.MethodGet, "", ""))
		if err == nil || next.attempts() != 1 {
			t.Errorf("err %v after %d attempts: want 1 attempt", err, next.attempts())
		}
	})
}

// blocking is a transport that hangs until released, as client-go's exec
// credential plugin does while the plugin runs.
type blocking struct{ release chan struct{} }

func (b *blocking) RoundTrip(req *http.Request) (*http.Response, error) {
	<-b.release
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("late"))}, nil
}

func TestOuterTransportAbandonsAHungPlugin(t *testing.T) {
	next := &blocking{release: make(chan struct{})}
	defer close(next.release)
	rt := &outerTransport{next: next, abandon: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := rt.RoundTrip(request(t, ctx, http.MethodGet, "", ""))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("want context.Canceled, got %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the request did not return when its context ended")
	}
}
