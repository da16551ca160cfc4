package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"
)

// Retries of requests that failed at the connection level (an API server
// restarting, a load balancer dropping connections). client-go retries
// only GETs, only after a reset connection, and at most ten times; a
// restarting server refuses connections for seconds.
const (
	retryInitialDelay = 100 * time.Millisecond
	retryMaxDelay     = 2 * time.Second
	// RetryWindow bounds the retries of a request whose context has no
	// deadline (a step's requests stop at the step's deadline instead).
	RetryWindow = 30 * time.Second
)

// retryPolicy is what may be retried of one request.
type retryPolicy int

const (
	// retryUnsent: only failures that prove the request never reached the
	// server (the connection could not be made).
	retryUnsent retryPolicy = iota
	// retryAny: any connection-level failure, the request being
	// idempotent: sending it twice has the effect of sending it once.
	retryAny
	// retryCreate: a create of a named object (a POST to a collection
	// whose body names the object, without generateName): sent again
	// after any connection-level failure, since a second create of one
	// name cannot make a second object. When the first one landed after
	// all, the second is answered AlreadyExists, which is checked: the
	// object as it exists holding what was sent is this create's own
	// (see sameAsSent).
	retryCreate
)

// policyFor classifies a request. Reads (GET, HEAD: lists and watches
// too), replacements (PUT), apply and merge patches (server-side apply,
// strategic merge, JSON merge: they set fields to values) and deletes with
// preconditions (the uid or resourceVersion pins the object, so a second
// delete cannot hit a newcomer of the same name) are idempotent, and so,
// in effect, is a create of a named object (retryCreate). A create with
// generateName (a second one makes a second object), a JSON patch (add to
// a list appends twice) and a delete without preconditions are retried
// only when they were never sent.
func policyFor(req *http.Request) retryPolicy {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut:
		return retryAny
	case http.MethodPost:
		if _, ok := namedCreate(req); ok {
			return retryCreate
		}
	case http.MethodPatch:
		switch req.Header.Get("Content-Type") {
		case string(types.ApplyPatchType), string(types.ApplyCBORPatchType),
			string(types.StrategicMergePatchType), string(types.MergePatchType):
			return retryAny
		}
	case http.MethodDelete:
		if hasPreconditions(req) {
			return retryAny
		}
	}
	return retryUnsent
}

// namedCreate returns the name of the object a POST creates when it is a
// create of a named object: a JSON body with metadata.name and no
// generateName, sent to a collection (/api/v1/[namespaces/NS/]RESOURCE,
// /apis/GROUP/VERSION/[namespaces/NS/]RESOURCE; not a subresource such as
// pods/NAME/eviction).
func namedCreate(req *http.Request) (string, bool) {
	if !collectionPath(req.URL.Path) || req.GetBody == nil || !isJSON(req.Header.Get("Content-Type")) {
		return "", false
	}
	body, err := req.GetBody()
	if err != nil {
		return "", false
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, maxCompared))
	if err != nil || len(data) == maxCompared {
		return "", false
	}
	var obj struct {
		Metadata struct {
			Name         string `json:"name"`
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &obj) != nil || obj.Metadata.Name == "" || obj.Metadata.GenerateName != "" {
		return "", false
	}
	return obj.Metadata.Name, true
}

// maxCompared bounds the bodies a resent create reads and compares (the
// API server's own limit on a request is 3 MiB).
const maxCompared = 4 << 20

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// collectionPath reports whether path names a collection of resources.
func collectionPath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return false
	}
	return len(parts) == 1 || (len(parts) == 3 && parts[0] == "namespaces")
}

// hasPreconditions reports whether a DELETE's body (DeleteOptions) sets
// preconditions.
func hasPreconditions(req *http.Request) bool {
	if req.GetBody == nil {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, 64<<10))
	if err != nil || !bytes.Contains(data, []byte(`"preconditions"`)) {
		return false
	}
	var opts struct {
		Preconditions *struct {
			UID             *string `json:"uid"`
			ResourceVersion *string `json:"resourceVersion"`
		} `json:"preconditions"`
	}
	if json.Unmarshal(data, &opts) != nil || opts.Preconditions == nil {
		return false
	}
	p := opts.Preconditions
	return (p.UID != nil && *p.UID != "") || (p.ResourceVersion != nil && *p.ResourceVersion != "")
}

// unsent reports whether err proves the request never left: the
// connection could not be made.
func unsent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
		return true
	}
	return utilnet.IsConnectionRefused(err)
}

// connectionLost reports whether err is a connection that broke under a
// request: the server may or may not have acted on it.
func connectionLost(err error) bool {
	return utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || errors.Is(err, syscall.EPIPE)
}

// retryable reports whether a request failed with err may be sent again
// under policy p.
func retryable(p retryPolicy, err error) bool {
	if unsent(err) {
		return true
	}
	return (p == retryAny || p == retryCreate) && connectionLost(err)
}

type (
	noRetryKey struct{}
	reachedKey struct{}
)

// WithoutRetries marks ctx so that its requests are not retried: the
// up-front check, which must answer at once, and the list and watch calls
// of a reflector, which retries them itself (and must see each failure to
// say that the API server is unreachable).
func WithoutRetries(ctx context.Context) context.Context {
	return context.WithValue(ctx, noRetryKey{}, true)
}

// withReached marks ctx so that flag is set once a request of ctx gets
// past authentication (a credential plugin) to the network.
func withReached(ctx context.Context, flag *atomic.Bool) context.Context {
	return context.WithValue(ctx, reachedKey{}, flag)
}

// retryTransport retries requests that failed at the connection level,
// with exponential backoff, while the request's context lives (at most
// RetryWindow when it has no deadline). It sits below authentication
// (client-go's WrapTransport), so a retry reuses the credentials.
type retryTransport struct {
	next http.RoundTripper
	// sleep waits d or until ctx ends (false); tests replace it.
	sleep func(ctx context.Context, d time.Duration) bool
}

func newRetryTransport(next http.RoundTripper) http.RoundTripper {
	return &retryTransport{next: next, sleep: sleepCtx}
}

func (t *retryTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if flag, ok := ctx.Value(reachedKey{}).(*atomic.Bool); ok {
		flag.Store(true)
	}
	if ctx.Value(noRetryKey{}) != nil {
		return t.next.RoundTrip(req)
	}
	policy := policyFor(req)
	resp, err := t.attempt(req, policy)
	if err == nil {
		return resp, nil
	}
	if !retryable(policy, err) || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return resp, err
	}
	// broke: an attempt may have reached the server (its connection broke
	// under it), so the create's AlreadyExists may be its own
	broke := !unsent(err)
	stop := time.Now().Add(RetryWindow)
	if d, ok := ctx.Deadline(); ok {
		stop = d
	}
	delay := retryInitialDelay
	for attempt := 2; ctx.Err() == nil; attempt++ {
		wait := delay/2 + rand.N(delay/2+1) // jitter: [delay/2, delay]
		if time.Now().Add(wait).After(stop) || !t.sleep(ctx, wait) {
			break
		}
		delay = min(2*delay, retryMaxDelay)
		retry := req.Clone(ctx)
		if req.GetBody != nil {
			body, berr := req.GetBody()
			if berr != nil {
				break
			}
			retry.Body = body
		}
		klog.Background().V(6).Info("Retrying request after a connection failure", "verb", req.Method, "url", req.URL.String(), "attempt", attempt, "err", err.Error())
		resp, err = t.attempt(retry, policy)
		if err == nil {
			if policy == retryCreate && broke && resp.StatusCode == http.StatusConflict {
				return t.ownCreate(req, resp)
			}
			return resp, nil
		}
		if !retryable(policy, err) {
			return resp, err
		}
		broke = broke || !unsent(err)
	}
	return resp, err
}

// attempt sends req once. The answer to a request that may be sent again
// (policy), and is not a stream, is read whole before it is returned: a
// connection that breaks while the answer's body arrives (for a write:
// the server acted on it, its answer was lost) fails the attempt as a
// broken connection, which can be retried, instead of failing the caller's
// read of the body.
func (t *retryTransport) attempt(req *http.Request, policy retryPolicy) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || policy == retryUnsent || streams(req) {
		return resp, err
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// streams reports whether req's answer is a stream, read as it comes:
// a watch, a followed log, a proxied or upgraded connection (exec,
// attach, port-forward).
func streams(req *http.Request) bool {
	if req.Header.Get("Upgrade") != "" || req.Method == http.MethodHead || req.Method == http.MethodOptions {
		return true
	}
	q := req.URL.Query()
	if w := q.Get("watch"); w == "true" || w == "1" || q.Get("follow") == "true" {
		return true
	}
	p := req.URL.Path
	return strings.HasSuffix(p, "/log") || strings.Contains(p, "/proxy") || strings.HasSuffix(p, "/exec") ||
		strings.HasSuffix(p, "/attach") || strings.HasSuffix(p, "/portforward")
}

// ownCreate answers a resent create of a named object that the API server
// refused as AlreadyExists: the first attempt, whose connection broke, may
// have created it. When the object as it exists holds everything the
// create sent (sameAsSent), it is this create's own object and the answer
// is the object, as the first attempt's would have been (201 Created);
// otherwise, or when it cannot be read, the refusal stands.
func (t *retryTransport) ownCreate(req *http.Request, refused *http.Response) (*http.Response, error) {
	answer, err := io.ReadAll(io.LimitReader(refused.Body, maxCompared))
	_ = refused.Body.Close()
	refused.Body = io.NopCloser(bytes.NewReader(answer))
	if err != nil {
		return refused, nil
	}
	var status metav1.Status
	if json.Unmarshal(answer, &status) != nil || status.Reason != metav1.StatusReasonAlreadyExists {
		return refused, nil
	}
	name, _ := namedCreate(req)
	sent, err := req.GetBody()
	if err != nil {
		return refused, nil
	}
	sentData, err := io.ReadAll(io.LimitReader(sent, maxCompared))
	_ = sent.Close()
	if err != nil {
		return refused, nil
	}
	get := req.Clone(req.Context())
	get.Method, get.Body, get.GetBody, get.ContentLength = http.MethodGet, nil, nil, 0
	u := *req.URL
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + name
	u.RawPath, u.RawQuery = "", ""
	get.URL = &u
	get.Header = req.Header.Clone()
	get.Header.Del("Content-Type")
	get.Header.Del("Content-Length")
	get.Header.Set("Accept", "application/json")
	resp, err := t.next.RoundTrip(get)
	if err != nil {
		return refused, nil
	}
	existing, err := io.ReadAll(io.LimitReader(resp.Body, maxCompared))
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !sameAsSent(sentData, existing) {
		return refused, nil
	}
	klog.Background().V(6).Info("A resent create found the object its first attempt created", "url", req.URL.String(), "name", name)
	created := &http.Response{
		Status: "201 Created", StatusCode: http.StatusCreated,
		Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: resp.Header.Clone(), Body: io.NopCloser(bytes.NewReader(existing)),
		ContentLength: int64(len(existing)), Request: req,
	}
	created.Header.Del("Content-Length")
	return created, nil
}

// sameAsSent reports whether the object existing (as the API server
// returns it, JSON) holds everything a create sent: every field sent has
// the value sent, apart from what the server itself sets or drops on a
// create (status, empty values it omits; a Secret's stringData, which it
// moves to data). Defaults and fields the server adds do not matter; a
// value the server rewrote (a quantity written "0.5" stored as "500m")
// makes the create another's, which errs on the safe side: the create
// then fails with AlreadyExists, as it would without the resend.
func sameAsSent(sent, existing []byte) bool {
	var s, e map[string]any
	if json.Unmarshal(sent, &s) != nil || json.Unmarshal(existing, &e) != nil {
		return false
	}
	delete(s, "status")
	if sd, ok := s["stringData"].(map[string]any); ok && s["kind"] == "Secret" {
		data, _ := s["data"].(map[string]any)
		if data == nil {
			data = map[string]any{}
		}
		for k, v := range sd {
			str, ok := v.(string)
			if !ok {
				return false
			}
			data[k] = base64.StdEncoding.EncodeToString([]byte(str))
		}
		s["data"] = data
		delete(s, "stringData")
	}
	return contains(e, s)
}

// contains reports whether got holds want: maps key by key (keys of got
// that want lacks do not matter, and an empty or null value in want
// matches a missing key), lists element by element, scalars by value.
func contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got == nil && emptyValue(w)
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				if emptyValue(v) {
					continue
				}
				return false
			}
			if !contains(gv, v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return got == nil && len(w) == 0
		}
		if len(g) != len(w) {
			return false
		}
		for i := range w {
			if !contains(g[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	default:
		return got == want
	}
}

// emptyValue: what the API server may omit when it stores it (null, "",
// false, 0, [], and maps of nothing else).
func emptyValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case float64:
		return v == 0
	case map[string]any:
		for _, e := range v {
			if !emptyValue(e) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// outerTransport is the outermost layer of the clients' transport.
//
// With a credential plugin (exec or auth-provider), a request whose context
// ends returns at once even while the plugin still runs: client-go runs
// plugins without a context, so a hung plugin would otherwise hang the
// request, the step and Ctrl-C with it.
//
// At -v 6 and above, every request is logged at the process's log level,
// including those whose context carries a quiet logger (informers run
// with one): client-go's request logging follows the request context's
// logger.
type outerTransport struct {
	next    http.RoundTripper
	abandon bool
	logAll  bool
}

func (t *outerTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *outerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.logAll {
		req = req.WithContext(klog.NewContext(req.Context(), klog.Background()))
	}
	ctx := req.Context()
	if !t.abandon || ctx.Done() == nil {
		return t.next.RoundTrip(req)
	}
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := t.next.RoundTrip(req)
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		return r.resp, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.resp != nil {
				_ = r.resp.Body.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Fence decides whether a run may write to the cluster now: the run lock
// of its state record (core/lock) is one.
type Fence interface {
	// Fence returns nil when the run may write now. While that is not
	// known (the API server has not confirmed the run's lock lately: an
	// outage), it waits until it is, or until ctx ends (ctx's error). Any
	// other error is final: the run may write no more (it lost its lock).
	Fence(ctx context.Context) error
}

// WriteGate holds the writes of a run's clients (every client built from
// Clients.Config: helm's too) to the run's Fence: a mutating request
// (POST, PUT, PATCH, DELETE) waits while the fence does and is refused,
// never sent, once it says the run may write no more. Reads are never
// held, nor are requests that write nothing (dry runs, access reviews).
// It sits below the connection retries, so a retried write asks again
// before each attempt. Without a fence (no state record) it lets
// everything through.
type WriteGate struct {
	mu    sync.RWMutex
	fence Fence
}

// Set makes f the gate's fence; nil removes it.
func (g *WriteGate) Set(f Fence) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fence = f
}

func (g *WriteGate) current() Fence {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.fence
}

// FencedError is a write the gate refused: the run may write no more.
type FencedError struct {
	Method, URL string
	Err         error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("%s %s not sent: %v", e.Method, e.URL, e.Err)
}

func (e *FencedError) Unwrap() error { return e.Err }

type unfencedKey struct{}

// Unfenced marks ctx so that its writes pass the gate: the run lock's own
// requests, which are what confirms it.
func Unfenced(ctx context.Context) context.Context {
	return context.WithValue(ctx, unfencedKey{}, true)
}

// wrap puts the gate in front of next.
func (g *WriteGate) wrap(next http.RoundTripper) http.RoundTripper {
	return &gateTransport{next: next, gate: g}
}

type gateTransport struct {
	next http.RoundTripper
	gate *WriteGate
}

func (t *gateTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *gateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f := t.gate.current()
	if f == nil || !writes(req) || req.Context().Value(unfencedKey{}) != nil {
		return t.next.RoundTrip(req)
	}
	if err := f.Fence(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		u := *req.URL
		u.RawQuery = ""
		return nil, &FencedError{Method: req.Method, URL: u.String(), Err: err}
	}
	return t.next.RoundTrip(req)
}

// writes reports whether req may change something in the cluster: a POST,
// PUT, PATCH or DELETE that is not a dry run, nor a review that only asks
// the API server a question (access and token reviews).
func writes(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	if req.URL.Query().Has("dryRun") {
		return false
	}
	if req.Method == http.MethodPost {
		p := req.URL.Path
		for _, review := range []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews", "subjectaccessreviews", "localsubjectaccessreviews", "tokenreviews"} {
			if strings.HasSuffix(p, "/"+review) {
				return false
			}
		}
	}
	return true
}
