package kube

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

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
	return (p == retryAny || p == retryCreate || p == retryConditional) && mayHaveLanded(err)
}

// mayHaveLanded reports whether err is a request that may have reached
// the server and lost its answer: its connection broke under it, or the
// write gate abandoned it at its deadline (FenceExpiredError).
func mayHaveLanded(err error) bool {
	var expired *FenceExpiredError
	return connectionLost(err) || errors.As(err, &expired)
}

type (
	noRetryKey     struct{}
	noDialRetryKey struct{}
	reachedKey     struct{}
)

// WithoutRetries marks ctx so that its requests are not retried: the
// list and watch calls of a reflector, which retries them itself (and
// must see each failure to say that the API server is unreachable), and
// the run lock's renewals, which it repeats itself.
func WithoutRetries(ctx context.Context) context.Context {
	return context.WithValue(ctx, noRetryKey{}, true)
}

// withoutDialRetries marks ctx so that its requests are retried only
// after an answer was lost, never when the connection could not be made:
// the up-front check, which reports an unreachable server at once but
// rides out a lost answer.
func withoutDialRetries(ctx context.Context) context.Context {
	return context.WithValue(ctx, noDialRetryKey{}, true)
}

// withReached marks ctx so that flag is set once a request of ctx gets
// past authentication (a credential plugin) to the network.
func withReached(ctx context.Context, flag *atomic.Bool) context.Context {
	return context.WithValue(ctx, reachedKey{}, flag)
}

// retryTransport retries requests that failed at the connection level,
// with exponential backoff, while the request's context lives (at most
// RetryWindow when it has no deadline), and resolves the writes whose
// answer was lost by the resend rule (resend.go). It sits below
// authentication (client-go's WrapTransport), so a retry reuses the
// credentials, and above the write gate, so each attempt passes it.
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
	noDial := ctx.Value(noDialRetryKey{}) != nil
	w := classify(req)
	resp, err := t.attempt(req, w.policy)
	if err == nil {
		return resp, nil
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return resp, err // cannot be sent again
	}
	// broke: an attempt may have reached the server and lost its answer,
	// so a refusal of a later one may be its own work (recognise)
	broke := !unsent(err)
	if broke && w.policy == retryRead {
		return t.resolveDelete(req, w, err)
	}
	if !retryable(w.policy, err) || (noDial && !broke) {
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
		resp, err = t.attempt(retry, w.policy)
		if err == nil {
			if broke && resp.StatusCode >= 400 {
				if own := t.recognise(req, w, resp); own != nil {
					_ = resp.Body.Close()
					return own, nil
				}
			}
			return resp, nil
		}
		broke = broke || !unsent(err)
		if broke && w.policy == retryRead {
			return t.resolveDelete(req, w, err)
		}
		if !retryable(w.policy, err) || (noDial && !broke) {
			return resp, err
		}
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
