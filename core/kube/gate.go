package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"sync"
	"time"
)

// Fence decides whether a run may write to the cluster now: the run lock
// of its state record (core/lock) is one.
type Fence interface {
	// WriteUntil returns, when the run may write now, the time by which a
	// write sent now must have landed (the zero time: no bound): past it
	// the write could land after the run's right to write has lapsed
	// (another run may have taken the lock). While it is not known that
	// the run may write (the API server has not confirmed the run's lock
	// lately: an outage), it waits until it is, or until ctx ends (ctx's
	// error). Any other error is final: the run may write no more (it
	// lost its lock).
	WriteUntil(ctx context.Context) (time.Time, error)
}

// WriteGate holds the writes of a run's clients (every client built from
// Clients.Config: helm's too) to the run's Fence: a mutating request
// (POST, PUT, PATCH, DELETE) waits while the fence does, is sent with the
// fence's deadline (abandoned, as a lost answer, when it has not landed
// by then), and is refused, never sent, once the fence says the run may
// write no more. Reads are never held, nor are requests that write
// nothing (dry runs, access reviews). It sits below the connection
// retries, so a retried write asks again before each attempt. Without a
// fence (no state record) it lets everything through.
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

// FenceExpiredError is a write the gate abandoned at the fence's deadline,
// before its answer came: it may have reached the server. The connection
// retries treat it as a lost answer (the resend rule).
type FenceExpiredError struct {
	Method, URL string
	Deadline    time.Time
}

func (e *FenceExpiredError) Error() string {
	return fmt.Sprintf("%s %s abandoned: no answer by %s, the deadline of the run lock's last confirmation", e.Method, e.URL, e.Deadline.Format(time.RFC3339Nano))
}

// Unwrap: it is a deadline exceeded.
func (e *FenceExpiredError) Unwrap() error { return context.DeadlineExceeded }

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

// errFenceDeadline is the cause of a fenced write's context at its
// deadline.
var errFenceDeadline = errors.New("the run lock's confirmation lapsed")

func (t *gateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f := t.gate.current()
	if f == nil || !writes(req) || req.Context().Value(unfencedKey{}) != nil {
		return t.next.RoundTrip(req)
	}
	u := *req.URL
	u.RawQuery = ""
	until, err := f.WriteUntil(req.Context())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &FencedError{Method: req.Method, URL: u.String(), Err: err}
	}
	if until.IsZero() {
		return t.next.RoundTrip(req)
	}
	parent := req.Context()
	ctx, cancel := context.WithDeadlineCause(parent, until, errFenceDeadline)
	expired := func(err error) error {
		// the fence's own deadline came first (had the caller's context
		// ended first, the cause would be the caller's): abandoned at the
		// lock's deadline, whatever the caller's context did after
		if err != nil && errors.Is(context.Cause(ctx), errFenceDeadline) {
			return &FenceExpiredError{Method: req.Method, URL: u.String(), Deadline: until}
		}
		return err
	}
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, expired(err)
	}
	resp.Body = &deadlineBody{ReadCloser: resp.Body, cancel: cancel, expired: expired}
	return resp, nil
}

// deadlineBody is the answer of a fenced write: its context ends when it
// is closed; a read cut by the deadline is the gate's abandonment.
type deadlineBody struct {
	io.ReadCloser
	cancel  context.CancelFunc
	expired func(error) error
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = b.expired(err)
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
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
	return req.Method != http.MethodPost || !isReview(path.Base(req.URL.Path))
}
