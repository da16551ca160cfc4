package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"khook.io/core/diagnose"
	"khook.io/core/event"
	"khook.io/core/redact"
	"khook.io/core/run"
)

// stuckRun is a run whose apply step waits for a Deployment whose Pods
// crash: progress says what it waits for, then, after a few seconds
// without progress, why (the cause core/diagnose finds, as the waiter
// words it), and the step fails with the cause and the container's last
// log lines; the step after it is skipped.
func stuckRun(c *clock) ([]StepInfo, []event.Event, *run.Result) {
	cause := &diagnose.Cause{Object: "Pod shop/web-6c88c8976c-j7dq9", Reason: "CrashLoopBackOff",
		Text: "container app: CrashLoopBackOff: last exit code 3 (Error)", Pods: 2, Of: 2, Warning: true,
		Logs: diagnose.FormatLogs([]byte("starting\nfatal: cannot connect to postgres://db:5432: connection refused\n"))}
	waiting := "waiting for condition Available on Deployment shop/web: status False (MinimumReplicasUnavailable)"
	failure := "waitFor condition=Available: timed out " + waiting + "; cause: " + cause.Detail()
	steps := []StepInfo{{"namespace", "apply"}, {"web", "apply"}, {"smoke", "wait"}}
	start := c.t
	events := []event.Event{
		{Kind: event.StepStarted, Step: "namespace", Attempt: 1, Time: start},
		{Kind: event.StepSucceeded, Step: "namespace", Message: "applied 1 object: 1 created", Elapsed: 80 * time.Millisecond},
		{Kind: event.StepStarted, Step: "web", Attempt: 1, Time: start.Add(90 * time.Millisecond)},
		{Kind: event.StepProgress, Step: "web", Message: "Deployment/web created"},
		{Kind: event.StepProgress, Step: "web", Message: "waiting for condition=Available on 1 object"},
		{Kind: event.StepProgress, Step: "web", Message: waiting},
		{Kind: event.StepProgress, Step: "web", Message: "stuck: " + cause.Brief()},
		{Kind: event.StepFailed, Step: "web", Message: failure, Elapsed: 30 * time.Second},
		{Kind: event.StepSkipped, Step: "smoke", Message: "needs web, which failed"},
	}
	// the clock each event is seen at: the cause 5 s after the last change
	at := []time.Duration{0, 80 * time.Millisecond, 90 * time.Millisecond, 100 * time.Millisecond, 101 * time.Millisecond, 180 * time.Millisecond,
		5180 * time.Millisecond, 30090 * time.Millisecond, 30091 * time.Millisecond}
	for i := range events {
		events[i].Time = start.Add(at[i])
	}
	res := &run.Result{Status: run.RunFailed, Duration: 30100 * time.Millisecond, Steps: []run.StepResult{
		{Name: "namespace", Type: "apply", Status: run.StatusOK, Attempts: 1, Duration: 80 * time.Millisecond, Message: "applied 1 object: 1 created"},
		{Name: "web", Type: "apply", Status: run.StatusFailed, Attempts: 1, Duration: 30 * time.Second, Error: failure},
		{Name: "smoke", Type: "wait", Status: run.StatusSkipped, SkipReason: "needs web, which failed"},
	}}
	return steps, events, res
}

// TestStuckStepGolden: the progress of a stuck step, piped (one line per
// change: the cause once) and on a terminal (the step's live line shows
// the cause while it is stuck), and the summary of its failure.
func TestStuckStepGolden(t *testing.T) {
	c := newClock()
	steps, events, res := stuckRun(c)
	base := c.t

	var piped bytes.Buffer
	p := newProgress(&piped, steps, ProgressOptions{Verb: "apply"}, c.now, false)
	for _, e := range events {
		c.t = e.Time
		p.Emit(e)
	}
	p.Close()
	if n := strings.Count(piped.String(), "stuck: "); n != 1 {
		t.Errorf("piped progress shows the cause %d times:\n%s", n, piped.String())
	}
	golden(t, "stuck-piped.txt", piped.Bytes())

	c.t = base
	v := newVT(t, 100, 24)
	live := newProgress(v, steps, ProgressOptions{Live: true, Width: 100, Height: 24}, c.now, false)
	for _, e := range events {
		c.t = e.Time
		live.Emit(e)
		checkFrame(t, v, []string{"namespace", "web", "smoke"}, string(e.Kind))
		if e.Kind == event.StepProgress && strings.HasPrefix(e.Message, "stuck: ") {
			c.t = c.t.Add(1500 * time.Millisecond) // a redraw later
			live.mu.Lock()
			live.redraw()
			live.mu.Unlock()
			screen := v.String()
			if !strings.Contains(screen, "stuck: container app: CrashLoopBackOff: last exit") {
				t.Errorf("the live line does not show the cause:\n%s", screen)
			}
			golden(t, "stuck-live.txt", []byte(screen))
		}
	}
	live.Close()
	golden(t, "stuck-live-final.txt", []byte(v.String()))

	var summary bytes.Buffer
	if err := Summary(&summary, "shop", "apply", res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(summary.String(), "; cause: 2 of 2 pods (Pod shop/web-6c88c8976c-j7dq9 and 1 more): container app: CrashLoopBackOff: last exit code 3 (Error)") {
		t.Errorf("the summary table lacks the cause:\n%s", summary.String())
	}
	golden(t, "stuck-summary.txt", summary.Bytes())

	// -o json and -o junit carry the same error, the cause and the log
	// lines included
	js, err := json.MarshalIndent(Report("shop", "apply", res), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "stuck-report.json", append(js, '\n'))
	var junit bytes.Buffer
	if err := JUnit(&junit, "shop", "apply", []ClusterRun{{Context: "prod", Status: run.RunFailed, Result: res, Started: base, Duration: res.Duration}},
		res.Duration, redact.New()); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{string(js), junit.String()} {
		if !strings.Contains(out, "cause: 2 of 2 pods (Pod shop/web-6c88c8976c-j7dq9 and 1 more): container app: CrashLoopBackOff") || !strings.Contains(out, "connection refused") {
			t.Errorf("the report lacks the cause or the log lines:\n%s", out)
		}
	}
	golden(t, "stuck-junit.xml", junit.Bytes())
}
