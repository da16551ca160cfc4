//go:build integration

package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"khook.io/core/kube"
	"khook.io/core/testing/testcluster"
)

// TestFencedWriteHeldPastTheRenewDeadline: a write of a run that holds the
// lock carries the deadline of the lock's last confirmation (RenewDeadline
// after the renewal was sent). The lossy link holds the write back longer
// than that: the run abandons it at the deadline (and every resend of it
// likewise), and the write never lands, as observed on the API server by
// a watch that sees everything written in the namespace afterwards.
func TestFencedWriteHeldPastTheRenewDeadline(t *testing.T) {
	c := testcluster.Get(t)
	link := c.NewLossyLink(t, testcluster.LossyOptions{Seed: 203})
	clients, err := kube.NewForConfig(link.RESTConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	direct := client(t)
	ns := c.NewNamespace(t, "fence")
	ctx := context.Background()
	lk, err := Acquire(ctx, clients.Typed, Location{Namespace: ns, Name: "khook-state-f"}, holder("f1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lk.Release(ctx) }()
	clients.Writes.Set(lk)

	list, err := direct.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := direct.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	release := link.Hold(testcluster.WriteTo("/configmaps"), 2*RenewDeadline)
	wctx, cancel := context.WithTimeout(ctx, RenewDeadline+5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = clients.Typed.CoreV1().ConfigMaps(ns).Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fenced"}}, metav1.CreateOptions{})
	took := time.Since(start)
	var expired *kube.FenceExpiredError
	if err == nil {
		t.Fatal("a write held past the renew deadline succeeded")
	}
	t.Logf("the write ended after %s: %v", took.Round(time.Millisecond), err)
	if !errors.As(err, &expired) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("want the write abandoned at the lock's deadline, got %v", err)
	}
	// every attempt the link held, the run abandoned before it was
	// forwarded; the first at the lock's deadline, well before the
	// write's own (so it was sent again)
	deadline := time.Now().Add(time.Minute)
	for n := link.Counts(); n.Held == 0 || n.Dropped != n.Held; n = link.Counts() {
		if time.Now().After(deadline) {
			t.Fatalf("the held attempts were not all abandoned: %s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := link.Counts(); n.Held < 2 {
		t.Errorf("the write was held %d times: the first attempt was not abandoned at the lock's deadline (%s)", n.Held, RenewDeadline)
	}
	release()
	if _, err := direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			cm, _ := ev.Object.(*corev1.ConfigMap)
			if ev.Type == watch.Added && cm != nil && cm.Name == "marker" {
				return
			}
			if cm != nil && cm.Name == "fenced" {
				t.Fatalf("the abandoned write landed: %s %s", ev.Type, cm.Name)
			}
		case <-time.After(time.Minute):
			t.Fatal("the marker never came")
		}
	}
}
