package waiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"khook.io/core/diagnose"
	"khook.io/core/kube"
)

func TestConnectionReportsEachChange(t *testing.T) {
	notified := 0
	c := &connection{notify: func() { notified++ }}
	refused := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	c.succeeded()
	c.failed(refused)
	c.failed(refused) // still down: no news
	if down, since, last := c.state(); !down || since.IsZero() || last != refused || notified != 1 {
		t.Fatalf("after failures: down %v since %v last %v, %d notifications", down, since, last, notified)
	}
	c.succeeded()
	c.succeeded()
	if down, _, _ := c.state(); down || notified != 2 {
		t.Fatalf("after successes: down %v, %d notifications", down, notified)
	}
}

func TestUnreachableInProgressAndTimeout(t *testing.T) {
	cl := &kube.Clients{Server: "https://127.0.0.1:6443"}
	refused := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	since := time.Now().Add(-3 * time.Second)
	if got, want := connectionLine(cl, "condition Ready", true, since, refused),
		"API server https://127.0.0.1:6443 unreachable (dial tcp 127.0.0.1:6443: connect: connection refused): still waiting for condition Ready, retrying every second"; got != want {
		t.Errorf("down: %q\nwant %q", got, want)
	}
	if got := connectionLine(cl, "condition Ready", false, since, refused); !strings.HasPrefix(got, "API server https://127.0.0.1:6443 reachable again after 3") {
		t.Errorf("up: %q", got)
	}
	conn := &connection{notify: func() {}}
	conn.failed(refused)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	last := evaluation{pending: []notReady{{name: "Pod ns/a", current: "status False"}}, total: 1}
	err := expired(ctx, nil, nil, last, true, conn, Options{What: "condition Ready"}, nil)
	if want := "timed out waiting for condition Ready on Pod ns/a: status False (the API server has been unreachable for the last 0s: dial tcp 127.0.0.1:6443: connect: connection refused)"; err.Error() != want {
		t.Errorf("timeout: %q\nwant %q", err, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("the timeout does not wrap context.DeadlineExceeded")
	}
	// what a diagnosis found before the outage is the cause at the timeout
	found := &diagnose.Cause{Object: "Pod ns/a", Reason: "Unschedulable", Text: "0/1 nodes are available", Warning: true}
	err = expired(ctx, nil, nil, last, true, conn, Options{What: "condition Ready"}, found)
	if c := CauseOf(err); c != found || !strings.Contains(err.Error(), "; cause: Pod ns/a") {
		t.Errorf("timeout while unreachable, after a diagnosis: %q (cause %+v), want the cause found before", err, c)
	}
}

func TestStoreKeepsTheLastStateOfTheGone(t *testing.T) {
	cm := func(name, state string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "ns"}, "data": map[string]any{"state": state}}}
		return u
	}
	state := func(u *unstructured.Unstructured) string {
		if u == nil {
			return "<nil>"
		}
		s, _, _ := unstructured.NestedString(u.Object, "data", "state")
		return s
	}
	s := newNotifyingStore(func() {})
	s.gone = map[string]*unstructured.Unstructured{}
	_ = s.Replace([]any{cm("a", "running"), cm("b", "running"), cm("c", "running")}, "1")
	_ = s.Update(cm("a", "failed"))
	_ = s.Delete(cm("a", "failed")) // the delete event carries the final state
	if got := state(s.lastOf("ns/a")); got != "failed" {
		t.Errorf("deleted: last state %q, want failed", got)
	}
	// a relist that no longer finds b (the watch broke while it was
	// deleted): the state last seen
	_ = s.Replace([]any{cm("c", "done")}, "2")
	if got := state(s.lastOf("ns/b")); got != "running" {
		t.Errorf("gone at a relist: last state %q, want running", got)
	}
	if got := state(s.lastOf("ns/c")); got != "<nil>" {
		t.Errorf("still there: last state %q, want none", got)
	}
	// re-created: it exists again, no last state
	_ = s.Add(cm("a", "running"))
	if got := state(s.lastOf("ns/a")); got != "<nil>" {
		t.Errorf("re-created: last state %q, want none", got)
	}
	// a store that keeps none
	plain := newNotifyingStore(func() {})
	_ = plain.Add(cm("a", "x"))
	_ = plain.Delete(cm("a", "x"))
	if plain.lastOf("ns/a") != nil {
		t.Error("a store without gone kept a deleted object")
	}
}
