package kube

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// hanging answers once its request's context ends (a write held by the
// network, or a server that stalls), with that context's error; or, when
// body is set, at once with a body that hangs the same way.
type hanging struct{ body bool }

type hangingBody struct{ ctx context.Context }

func (b hangingBody) Read([]byte) (int, error) { <-b.ctx.Done(); return 0, b.ctx.Err() }
func (b hangingBody) Close() error             { return nil }

func (h hanging) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.body {
		return &http.Response{StatusCode: 200, Body: hangingBody{req.Context()}, Request: req}, nil
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// deadlineFence lets writes through with a deadline d from now.
type deadlineFence time.Duration

func (d deadlineFence) WriteUntil(context.Context) (time.Time, error) {
	return time.Now().Add(time.Duration(d)), nil
}

// A write the gate lets through carries the fence's deadline: one that
// has no answer by then is abandoned as a lost answer (the connection
// retries may send it again), whether it hangs before its answer or in
// its body. A write whose own context ends is not the gate's doing.
func TestWriteGateDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		body bool
	}{{"no answer", false}, {"an answer whose body stalls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := &WriteGate{}
			g.Set(deadlineFence(50 * time.Millisecond))
			rt := g.wrap(hanging{body: tc.body})
			start := time.Now()
			resp, err := rt.RoundTrip(requestTo(t, context.Background(), http.MethodPost, "https://h/api/v1/namespaces/x/configmaps", "application/json", `{"metadata":{"name":"y"}}`))
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
			var expired *FenceExpiredError
			if !errors.As(err, &expired) || !mayHaveLanded(err) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want the write abandoned at the fence's deadline, got %v", err)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("abandoned after %s", time.Since(start))
			}
		})
	}
	t.Run("the write's own context", func(t *testing.T) {
		g := &WriteGate{}
		g.Set(deadlineFence(time.Hour))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := g.wrap(hanging{}).RoundTrip(requestTo(t, ctx, http.MethodDelete, "https://h/api/v1/namespaces/x/configmaps/y", "", ""))
		var expired *FenceExpiredError
		if errors.As(err, &expired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want the request's own deadline, got %v", err)
		}
	})
}

// A request bound to an owner that has ended stops Grace later, whatever
// its own context; one whose owner lives is left alone.
func TestBind(t *testing.T) {
	owner, end := context.WithCancelCause(context.Background())
	ctx, cancel := Bind(context.Background(), owner)
	defer cancel()
	select {
	case <-ctx.Done():
		t.Fatal("ended while its owner lives")
	case <-time.After(20 * time.Millisecond):
	}
	ended := time.Now()
	end(errors.New("received SIGINT"))
	select {
	case <-ctx.Done():
		if waited := time.Since(ended); waited < Grace-100*time.Millisecond {
			t.Errorf("ended %s after its owner, want %s", waited, Grace)
		}
		if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "received SIGINT") {
			t.Errorf("cause %v does not name the owner's", cause)
		}
	case <-time.After(time.Minute):
		t.Fatal("did not end after its owner")
	}
	// a write bound to an owner that ended waits at the gate no longer
	g := &WriteGate{}
	g.Set(fenceFunc(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }))
	rt := BindTo(owner)(g.wrap(&scripted{}))
	start := time.Now()
	_, err := rt.RoundTrip(requestTo(t, context.Background(), http.MethodPut, "https://h/api/v1/namespaces/x/secrets/y", "application/json", `{}`))
	var fenced *FencedError
	if !errors.As(err, &fenced) || time.Since(start) > time.Minute {
		t.Fatalf("want the write refused once its owner's grace ended, got %v after %s", err, time.Since(start))
	}
}
