package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Grace is how long the requests of something that has ended (a step past
// its deadline or interrupted, a run interrupted by Ctrl-C) may still
// take: a write a library sends after its caller's context ended (helm 4
// marks a release failed with context.Background()) is sent if it can be
// at once, and may wait at the write gate or in the connection retries
// for Grace at most; so may the last writes of an interrupted run (its
// record, the release of its lock). On a server that answers, that is
// ample; during an outage it bounds what Ctrl-C waits for.
const Grace = 1500 * time.Millisecond

// Bind returns ctx bound to owner: besides when ctx ends, it ends Grace
// after owner ends (Grace after the call when owner has ended already),
// with a cause that wraps owner's. cancel releases it.
func Bind(ctx, owner context.Context) (context.Context, context.CancelFunc) {
	bound, cancel := context.WithCancelCause(ctx)
	var mu sync.Mutex
	var timer *time.Timer
	stopped := false
	stop := context.AfterFunc(owner, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		timer = time.AfterFunc(Grace, func() {
			cancel(fmt.Errorf("stopped %s after what it was sent for ended (%w)", Grace, context.Cause(owner)))
		})
	})
	return bound, func() {
		stop()
		mu.Lock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}

// BindTo is a transport wrapper (rest.Config.Wrap) binding every request
// to owner (Bind): the clients a library builds for one operation (helm's,
// whose storage driver sends with context.Background()) then wait for
// nothing, at the write gate or in the retries, longer than Grace after
// the operation's context (the step's timeout, Ctrl-C, the Terraform
// provider's cancellation) ended.
func BindTo(owner context.Context) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return &boundTransport{next: next, owner: owner}
	}
}

type boundTransport struct {
	next  http.RoundTripper
	owner context.Context
}

func (t *boundTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := Bind(req.Context(), t.owner)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelingBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelingBody releases its request's context when it is closed.
type cancelingBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelingBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
