package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

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
)

// policyFor classifies a request. Reads (GET, HEAD: lists and watches
// too), replacements (PUT), apply and merge patches (server-side apply,
// strategic merge, JSON merge: they set fields to values) and deletes with
// preconditions (the uid or resourceVersion pins the object, so a second
// delete cannot hit a newcomer of the same name) are idempotent. A create
// (POST: with generateName a second one would make a second object), a
// JSON patch (add to a list appends twice) and a delete without
// preconditions are retried only when they were never sent.
func policyFor(req *http.Request) retryPolicy {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut:
		return retryAny
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
	return p == retryAny && connectionLost(err)
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
	resp, err := t.next.RoundTrip(req)
	if err == nil || ctx.Value(noRetryKey{}) != nil {
		return resp, err
	}
	policy := policyFor(req)
	if !retryable(policy, err) || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return resp, err
	}
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
		resp, err = t.next.RoundTrip(retry)
		if err == nil || !retryable(policy, err) {
			return resp, err
		}
	}
	return resp, err
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
