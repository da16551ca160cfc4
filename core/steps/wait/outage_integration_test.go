//go:build integration

package wait_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/kube"
	"khook.io/core/steps/wait"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

// outage is how long the API server is down: long enough for client-go's
// default backoff (0.8 s doubling to 30 s, with up to 100% jitter) to
// leave a watch 10-25 s from its next try.
const outage = 20 * time.Second

// progress is one progress line of a wait and when it was written.
type progress struct {
	line string
	at   time.Time
}

// runningWait is a wait step running in the background.
type runningWait struct {
	t     *testing.T
	lines chan progress
	done  chan error
}

// startWait runs a wait for configmap/<name> to hold data.ready=yes.
func startWait(t *testing.T, c *kube.Clients, ns, name string) *runningWait {
	t.Helper()
	req := request(t, c, "name: "+name+"\nwait:\n  for: jsonpath={.data.ready}=yes\n  on: configmap/"+name+"\n  namespace: "+ns, 5*time.Minute)
	w := &runningWait{t: t, lines: make(chan progress, 64), done: make(chan error, 1)}
	req.Log = func(format string, args ...any) {
		p := progress{fmt.Sprintf(format, args...), time.Now()}
		t.Logf("%s progress [%s]: %s", name, p.at.Format("15:04:05.000"), p.line)
		select {
		case w.lines <- p:
		default:
		}
	}
	go func() {
		out, err := steptest.Run(wait.New(), req)
		if err == nil {
			t.Logf("%s outcome: %s", name, out.Message)
		}
		w.done <- err
	}()
	return w
}

// expect consumes progress until a line holds want and returns when it
// was written; the bound only keeps a broken wait from hanging the test.
func (w *runningWait) expect(want string, within time.Duration) time.Time {
	w.t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case p := <-w.lines:
			if strings.Contains(p.line, want) {
				return p.at
			}
		case err := <-w.done:
			w.t.Fatalf("the wait ended before progress said %q: %v", want, err)
		case <-timer.C:
			w.t.Fatalf("progress never said %q", want)
		}
	}
}

// stillWaiting fails the test if the wait has ended.
func (w *runningWait) stillWaiting() {
	w.t.Helper()
	select {
	case err := <-w.done:
		w.t.Fatalf("the wait ended before the condition held: %v", err)
	default:
	}
}

// TestWaitRecoversFromAPIOutage stops the API server mid-wait for 20 s and
// starts it again: progress says the server is unreachable, then that it
// is reachable again, and the wait sees the condition the test sets once
// the server is back. A wait that starts while the server is down says so
// too. It reports how long the wait took to watch again after the server
// started, and to return after the condition held.
//
// The test runs its own cluster: the outage would break every other test
// of a shared one.
func TestWaitRecoversFromAPIOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("go test -short (make test does not set it): this test starts a cluster of its own")
	}
	startCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := testcluster.Start(startCtx, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			cl.Keep()
		}
		if err := cl.Stop(); err != nil {
			t.Errorf("stop the cluster: %v", err)
		}
	})
	c := steptest.Clients(t, cl.RESTConfig(t))
	ns := cl.NewNamespace(t, "wait-outage")
	down := false
	t.Cleanup(func() { // before the namespace's cleanup, which needs the server
		if down {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := cl.StartAPIServer(ctx); err != nil {
				t.Errorf("restart the API server: %v", err)
			}
		}
	})
	ctx := context.Background()
	cms := c.Typed.CoreV1().ConfigMaps(ns)
	for _, name := range []string{"flag", "late"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"ready": "no"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stop := func() time.Time {
		t.Helper()
		down = true
		if err := cl.StopAPIServer(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	start := func() (started, ready time.Time) {
		t.Helper()
		started = time.Now()
		if err := cl.StartAPIServer(startCtx); err != nil {
			t.Fatal(err)
		}
		down = false
		return started, time.Now()
	}
	set := func(name string) time.Time {
		t.Helper()
		patch := []byte(`{"data":{"ready":"yes"}}`)
		if _, err := cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	finished := func(w *runningWait) time.Time {
		t.Helper()
		if err := <-w.done; err != nil {
			t.Fatalf("wait: %v", err)
		}
		return time.Now()
	}

	// an outage in the middle of a wait
	w := startWait(t, c, ns, "flag")
	w.expect(`value "no"`, time.Minute) // listed: now watching
	stopped := stop()
	w.expect("unreachable", time.Minute)
	time.Sleep(outage - time.Since(stopped)) // hold the outage, whatever the wait does meanwhile
	started, ready := start()
	back := w.expect("reachable again", 2*time.Minute)
	w.stillWaiting()
	held := set("flag")
	returned := finished(w)
	t.Logf("outage %.1fs; the API server took %.2fs from its start to /readyz; the wait watched again %.2fs after the start (%+.2fs from /readyz) and returned %.3fs after the condition held",
		started.Sub(stopped).Seconds(), ready.Sub(started).Seconds(), back.Sub(started).Seconds(), back.Sub(ready).Seconds(), returned.Sub(held).Seconds())

	// a wait that starts while the server is down (discovery is cached)
	stop()
	w = startWait(t, c, ns, "late")
	w.expect("unreachable", time.Minute)
	started, ready = start()
	back = w.expect("reachable again", 2*time.Minute)
	w.stillWaiting()
	held = set("late")
	returned = finished(w)
	t.Logf("started while down: the wait watched %.2fs after the server's start (%+.2fs from /readyz) and returned %.3fs after the condition held",
		back.Sub(started).Seconds(), back.Sub(ready).Seconds(), returned.Sub(held).Seconds())
}
