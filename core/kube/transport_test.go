package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
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
	url := "https://10.0.0.1:6443/api/v1/namespaces/x/configmaps/y"
	if method == http.MethodPost {
		url = "https://10.0.0.1:6443/api/v1/namespaces/x/configmaps?fieldManager=khook"
	}
	return requestTo(t, ctx, method, url, contentType, body)
}

func requestTo(t *testing.T, ctx context.Context, method, url, contentType, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
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
		{"put of a version is a compare-and-swap", http.MethodPut, "application/json", `{"kind":"ConfigMap","metadata":{"name":"y","resourceVersion":"7"}}`, retryConditional},
		{"merge patch of a version", http.MethodPatch, string(types.MergePatchType), `{"metadata":{"resourceVersion":"7"},"data":{"a":"b"}}`, retryConditional},
		{"JSON patch that pins the version", http.MethodPatch, string(types.JSONPatchType), `[{"op":"test","path":"/metadata/resourceVersion","value":"7"},{"op":"add","path":"/x/-","value":1}]`, retryConditional},
		{"server-side apply", http.MethodPatch, string(types.ApplyPatchType), "kind: ConfigMap", retryAny},
		{"server-side apply, CBOR", http.MethodPatch, string(types.ApplyCBORPatchType), "x", retryAny},
		{"strategic merge patch", http.MethodPatch, string(types.StrategicMergePatchType), `{"data":{"a":"b"}}`, retryAny},
		{"merge patch", http.MethodPatch, string(types.MergePatchType), `{"data":{"a":"b"}}`, retryAny},
		{"JSON patch may append twice", http.MethodPatch, string(types.JSONPatchType), `[{"op":"add","path":"/x/-","value":1}]`, retryUnsent},
		{"create with generateName may create twice", http.MethodPost, "application/json", `{"metadata":{"generateName":"x-"}}`, retryUnsent},
		{"delete with a uid precondition", http.MethodDelete, "application/json", `{"kind":"DeleteOptions","preconditions":{"uid":"1234"}}`, retryConditional},
		{"delete with a resourceVersion precondition", http.MethodDelete, "application/json", `{"preconditions":{"resourceVersion":"7"}}`, retryConditional},
		{"delete with empty preconditions is resolved by reading", http.MethodDelete, "application/json", `{"preconditions":{}}`, retryRead},
		{"delete without preconditions is resolved by reading", http.MethodDelete, "application/json", `{"propagationPolicy":"Background"}`, retryRead},
		{"delete without a body is resolved by reading", http.MethodDelete, "", "", retryRead},
		{"dry-run delete", http.MethodDelete, "application/json", `{"dryRun":["All"]}`, retryAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(request(t, ctx, tc.method, tc.contentType, tc.body)).policy; got != tc.want {
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
		{"a create of a named object whose connection broke is sent again", http.MethodPost, "application/json", []error{reset, refused}, 3, false},
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

func TestPolicyForCreates(t *testing.T) {
	ctx := context.Background()
	named := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y"}}`
	for _, tc := range []struct {
		name, url, contentType, body string
		want                         retryPolicy
	}{
		{"a named object in a namespace", "https://h/api/v1/namespaces/x/configmaps", "application/json", named, retryCreate},
		{"a named object of a group", "https://h/apis/apps/v1/namespaces/x/deployments?fieldManager=khook", "application/json", named, retryCreate},
		{"a cluster-scoped named object", "https://h/api/v1/namespaces", "application/json", `{"metadata":{"name":"x"}}`, retryCreate},
		{"behind a path prefix it is not recognised", "https://h/k8s/api/v1/namespaces", "application/json", `{"metadata":{"name":"x"}}`, retryUnsent},
		{"generateName", "https://h/api/v1/namespaces/x/configmaps", "application/json", `{"metadata":{"generateName":"y-"}}`, retryUnsent},
		{"generateName and a name", "https://h/api/v1/namespaces/x/configmaps", "application/json", `{"metadata":{"name":"y","generateName":"y-"}}`, retryUnsent},
		{"no name", "https://h/api/v1/namespaces/x/configmaps", "application/json", `{"metadata":{}}`, retryUnsent},
		{"a subresource (an eviction)", "https://h/api/v1/namespaces/x/pods/p/eviction", "application/json", named, retryUnsent},
		{"protobuf that is not", "https://h/api/v1/namespaces/x/configmaps", "application/vnd.kubernetes.protobuf", named, retryUnsent},
		{"an access review asks a question", "https://h/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "application/json", `{"spec":{}}`, retryAny},
		{"JSON with a charset", "https://h/api/v1/namespaces/x/configmaps", "application/json; charset=utf-8", named, retryCreate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(requestTo(t, ctx, http.MethodPost, tc.url, tc.contentType, tc.body)).policy; got != tc.want {
				t.Errorf("policy %d, want %d", got, tc.want)
			}
		})
	}
}

// How a create's connection breaks.
const (
	before = iota + 1 // before the server acted on it
	after             // after it acted, before its answer
	inBody            // while the answer's body arrives
)

// apiServer is a transport answering as an API server holding one object
// (the first create stores it), whose connections can break: breaks
// lists, per attempt, how the create's connection breaks (0: it does not).
type apiServer struct {
	mu       sync.Mutex
	object   []byte // the stored object, nil when none
	breaks   []int
	creates  int
	requests []string
}

// brokenBody is an answer's body whose connection breaks half-way.
type brokenBody struct{ r io.Reader }

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *brokenBody) Close() error { return nil }

func (a *apiServer) RoundTrip(req *http.Request) (*http.Response, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = append(a.requests, req.Method+" "+req.URL.Path)
	reply := func(code int, body string) *http.Response {
		return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}
	}
	switch req.Method {
	case http.MethodGet:
		if a.object == nil {
			return reply(404, `{"kind":"Status","reason":"NotFound","code":404}`), nil
		}
		return reply(200, string(a.object)), nil
	case http.MethodPost:
		body, _ := io.ReadAll(req.Body)
		a.creates++
		how := 0
		if len(a.breaks) > 0 {
			how, a.breaks = a.breaks[0], a.breaks[1:]
		}
		if how == before {
			return nil, opErr("read", syscall.ECONNRESET)
		}
		if a.object != nil {
			return reply(409, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"AlreadyExists","code":409}`), nil
		}
		// stored as the server would: defaults and server fields added
		var obj map[string]any
		_ = json.Unmarshal(body, &obj)
		md := obj["metadata"].(map[string]any)
		md["uid"], md["resourceVersion"], md["creationTimestamp"] = "u-1", "7", "2026-11-01T12:00:00Z"
		md["managedFields"] = []any{map[string]any{"manager": "khook"}}
		if sd, ok := obj["stringData"].(map[string]any); ok {
			data := map[string]any{}
			for k, v := range sd {
				data[k] = base64.StdEncoding.EncodeToString([]byte(v.(string)))
			}
			obj["data"] = data
			delete(obj, "stringData")
		}
		a.object, _ = json.Marshal(obj)
		switch how {
		case after:
			return nil, opErr("read", syscall.ECONNRESET)
		case inBody:
			r := reply(201, "")
			r.Body = &brokenBody{strings.NewReader(string(a.object[:len(a.object)/2]))}
			return r, nil
		}
		return reply(201, string(a.object)), nil
	}
	return reply(405, `{}`), nil
}

// A create whose connection broke after the server made the object is
// sent again; the server's AlreadyExists is checked against what exists,
// which holds what was sent: the create succeeded (201, the object). A
// create that finds someone else's object of that name still fails.
func TestResentCreate(t *testing.T) {
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y","namespace":"x","labels":{"a":"b"},"annotations":{},"creationTimestamp":null},"data":{"k":"v"}}`
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"y"},"stringData":{"password":"s3cr3t"},"type":"Opaque"}`
	for _, tc := range []struct {
		name     string
		existing string // what another writer made before, "" for none
		body     string
		breaks   []int
		code     int
		creates  int
	}{
		{"the first attempt landed", "", cm, []int{after}, 201, 2},
		{"the first attempt's answer broke half-way", "", cm, []int{inBody}, 201, 2},
		{"the first attempt never landed", "", cm, []int{before}, 201, 2},
		{"landed, then the server was down", "", cm, []int{after, before, before}, 201, 4},
		{"a Secret written with stringData landed", "", secret, []int{after}, 201, 2},
		{"another writer's object of that name", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y","namespace":"x"},"data":{"k":"other"}}`, cm, []int{before}, 409, 2},
		{"no broken connection: AlreadyExists is not checked", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y","namespace":"x","labels":{"a":"b"}},"data":{"k":"v"}}`, cm, nil, 409, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &apiServer{breaks: tc.breaks}
			if tc.existing != "" {
				srv.object = []byte(tc.existing)
			}
			var slept []time.Duration
			rt := newTestRetry(srv, &slept)
			resp, err := rt.RoundTrip(request(t, context.Background(), http.MethodPost, "application/json", tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, got)
			}
			if srv.creates != tc.creates {
				t.Errorf("%d creates sent, want %d (%v)", srv.creates, tc.creates, srv.requests)
			}
			if tc.code == 201 && !bytes.Equal(got, srv.object) {
				t.Errorf("the answer is not the object:\n%s\nwant\n%s", got, srv.object)
			}
			if tc.code == 409 && !strings.Contains(string(got), "AlreadyExists") {
				t.Errorf("the refusal's body was not kept: %s", got)
			}
		})
	}
}

func TestSameAsSent(t *testing.T) {
	for _, tc := range []struct {
		name           string
		sent, existing string
		want           bool
	}{
		{"defaults added", `{"kind":"Service","spec":{"ports":[{"port":80}]}}`, `{"kind":"Service","spec":{"ports":[{"port":80,"protocol":"TCP"}],"type":"ClusterIP"}}`, true},
		{"empty values omitted", `{"metadata":{"labels":{},"annotations":null,"finalizers":[]},"spec":{"paused":false}}`, `{"metadata":{"name":"y"}}`, true},
		{"status dropped", `{"kind":"X","status":{"phase":"Done"}}`, `{"kind":"X"}`, true},
		{"a value differs", `{"data":{"k":"v"}}`, `{"data":{"k":"w"}}`, false},
		{"a field missing", `{"data":{"k":"v"}}`, `{"data":{}}`, false},
		{"a list longer", `{"spec":{"a":[1]}}`, `{"spec":{"a":[1,2]}}`, false},
		{"a number", `{"spec":{"replicas":3}}`, `{"spec":{"replicas":3}}`, true},
		{"a rewritten quantity is another's", `{"spec":{"cpu":"0.5"}}`, `{"spec":{"cpu":"500m"}}`, false},
		{"not JSON", `kind: X`, `{}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameAsSent(jsonMap(tc.sent), jsonMap(tc.existing)); got != tc.want {
				t.Errorf("sameAsSent = %v, want %v", got, tc.want)
			}
		})
	}
}

func jsonMap(s string) map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(s), &m)
	return m
}

// fenceFunc is a Fence without a deadline.
type fenceFunc func(ctx context.Context) error

func (f fenceFunc) WriteUntil(ctx context.Context) (time.Time, error) { return time.Time{}, f(ctx) }

func TestWriteGate(t *testing.T) {
	lost := errors.New("run lock lost")
	open := make(chan struct{})
	var fenceErr error
	var asked int
	g := &WriteGate{}
	next := &scripted{}
	rt := g.wrap(next)
	send := func(ctx context.Context, method, url string) error {
		resp, err := rt.RoundTrip(requestTo(t, ctx, method, url, "application/json", `{"metadata":{"name":"y"}}`))
		if resp != nil {
			_ = resp.Body.Close()
		}
		return err
	}
	cms := "https://h/api/v1/namespaces/x/configmaps"
	if err := send(context.Background(), http.MethodPost, cms); err != nil || next.attempts() != 1 {
		t.Fatalf("without a fence: %v after %d attempts", err, next.attempts())
	}
	g.Set(fenceFunc(func(ctx context.Context) error {
		asked++
		select {
		case <-open:
			return fenceErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	// reads, dry runs, reviews and the lock's own writes are not held
	for _, r := range []struct{ method, url string }{
		{http.MethodGet, cms + "/y"},
		{http.MethodGet, cms + "?watch=true"},
		{http.MethodPost, cms + "?dryRun=All"},
		{http.MethodPatch, cms + "/y?dryRun=All&fieldManager=khook"},
		{http.MethodPost, "https://h/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"},
	} {
		if err := send(context.Background(), r.method, r.url); err != nil {
			t.Errorf("%s %s: %v", r.method, r.url, err)
		}
	}
	if err := send(Unfenced(context.Background()), http.MethodPut, "https://h/apis/coordination.k8s.io/v1/namespaces/x/leases/y"); err != nil {
		t.Errorf("the lock's own write: %v", err)
	}
	if asked != 0 {
		t.Fatalf("the fence was asked %d times for requests that write nothing", asked)
	}
	// a write waits while the fence does, and goes once it says so
	sent := next.attempts()
	done := make(chan error, 1)
	go func() { done <- send(context.Background(), http.MethodDelete, cms+"/y") }()
	select {
	case err := <-done:
		t.Fatalf("the write did not wait for the fence: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(open)
	if err := <-done; err != nil || next.attempts() != sent+1 {
		t.Fatalf("the write after the fence opened: %v (%d attempts, want %d)", err, next.attempts(), sent+1)
	}
	// a fence that says never: refused, not sent
	fenceErr = lost
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		err := send(context.Background(), m, cms+"/y")
		var fenced *FencedError
		if !errors.As(err, &fenced) || !errors.Is(err, lost) {
			t.Errorf("%s after the lock was lost: %v, want it refused", m, err)
		}
	}
	if next.attempts() != sent+1 {
		t.Errorf("refused writes were sent: %d attempts, want %d", next.attempts(), sent+1)
	}
}

// bodyBreaking answers every request 200, the first answer's body breaking
// half-way.
type bodyBreaking struct {
	mu       sync.Mutex
	attempts int
}

func (b *bodyBreaking) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempts++
	body := io.NopCloser(strings.NewReader(`{"kind":"ConfigMap"}`))
	if b.attempts == 1 {
		body = &brokenBody{strings.NewReader(`{"kind":`)}
	}
	return &http.Response{StatusCode: 200, Body: body, Request: req}, nil
}

// An answer whose body breaks half-way is a broken connection: a read is
// sent again; a watch, read as it comes, is left to its reader.
func TestBrokenAnswerBody(t *testing.T) {
	for _, tc := range []struct {
		name     string
		url      string
		attempts int
		broken   bool
	}{
		{"a get is sent again", "https://h/api/v1/namespaces/x/configmaps/y", 2, false},
		{"a watch is a stream", "https://h/api/v1/namespaces/x/configmaps?watch=true", 1, true},
		{"a log is a stream", "https://h/api/v1/namespaces/x/pods/p/log", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := &bodyBreaking{}
			var slept []time.Duration
			resp, err := newTestRetry(next, &slept).RoundTrip(requestTo(t, context.Background(), http.MethodGet, tc.url, "", ""))
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if (err != nil) != tc.broken || next.attempts != tc.attempts {
				t.Errorf("read error %v after %d attempts, want broken %v after %d", err, next.attempts, tc.broken, tc.attempts)
			}
		})
	}
}
