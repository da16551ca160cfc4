package render

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"khook.io/core/event"
	"khook.io/core/run"
)

func TestPipedProgressOneLinePerChange(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, []StepInfo{{"namespace", "apply"}, {"web", "apply"}}, ProgressOptions{Verb: "apply"})
	now := time.Now()
	for _, e := range []event.Event{
		{Kind: event.StepStarted, Step: "namespace", Attempt: 1, Time: now},
		{Kind: event.StepSucceeded, Step: "namespace", Message: "applied 1 object", Elapsed: 120 * time.Millisecond},
		{Kind: event.StepStarted, Step: "web", Attempt: 1, Time: now},
		{Kind: event.StepProgress, Step: "web", Message: "waiting for 2 pods"},
		{Kind: event.StepRetrying, Step: "web", Attempt: 1, Delay: time.Second, Message: "boom\nmore"},
		{Kind: event.StepStarted, Step: "web", Attempt: 2, Time: now},
		{Kind: event.StepFailed, Step: "web", Message: "boom again", Elapsed: 3 * time.Second},
		{Kind: event.StepSkipped, Step: "unknown-step", Message: "ignored"},
	} {
		p.Emit(e)
	}
	p.Close()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{"namespace started", "namespace ok 120ms: applied 1 object", "web       started", "web       … waiting for 2 pods",
		"web       attempt 1 failed, retrying in 1s: boom", "web       started attempt 2", "web       failed after 3.0s: boom again"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines:\n%s", len(lines), b.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d = %q, want suffix %q", i, lines[i], w)
		}
	}
	if strings.Contains(b.String(), "\x1b[") {
		t.Error("piped output must carry no escape sequences")
	}
}

func TestLiveProgressRedrawsInPlace(t *testing.T) {
	for _, color := range []bool{false, true} {
		var b bytes.Buffer
		p := NewProgress(&b, []StepInfo{{"a", "wait"}, {"b", "job"}}, ProgressOptions{Live: true, Color: color, Width: 60})
		p.Emit(event.Event{Kind: event.StepStarted, Step: "a", Attempt: 2, Time: time.Now()})
		p.Emit(event.Event{Kind: event.StepSkipped, Step: "b", Message: "when: x is false"})
		p.Close()
		out := b.String()
		if !strings.Contains(out, "\x1b[2A") {
			t.Fatal("a later frame must move the cursor back over the 2 step lines")
		}
		frames := strings.Split(out, "\x1b[2A")
		last := frames[len(frames)-1]
		if !strings.Contains(last, "(attempt 2)") || !strings.Contains(last, "skipped") || !strings.Contains(last, "when: x is false") {
			t.Fatalf("last frame:\n%q", last)
		}
		if hasColor := strings.Contains(out, "\x1b[32m") || strings.Contains(out, "\x1b[33m"); hasColor != color {
			t.Fatalf("color=%v but output %q", color, out)
		}
		for _, l := range strings.Split(last, "\n") {
			if plain := stripANSI(l); len([]rune(plain)) > 60 {
				t.Fatalf("line wider than the terminal: %q", plain)
			}
		}
	}
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && !(s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 'a' && s[i] <= 'z') {
				i++
			}
			continue
		}
		if s[i] != '\r' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func TestSummarySaysWhatWasLeftUndone(t *testing.T) {
	res := &run.Result{Status: run.RunFailed, Duration: 7 * time.Second, Steps: []run.StepResult{
		{Name: "ns", Type: "apply", Status: run.StatusOK, Attempts: 1, Duration: time.Second, Message: "applied 1 object"},
		{Name: "hello", Type: "job", Status: run.StatusFailed, Attempts: 2, Duration: 5 * time.Second, Error: "Job default/hello failed: BackoffLimitExceeded\nlast log lines:\n  boom"},
		{Name: "ready", Type: "wait", Status: run.StatusSkipped, SkipReason: "needs hello, which failed"},
	}}
	var b bytes.Buffer
	if err := Summary(&b, "quickstart", "apply", res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"STEP   TYPE   STATUS   ATTEMPTS  DURATION  DETAIL", "hello  job    failed   2         5.0s      Job default/hello failed: BackoffLimitExceeded",
		"ready  wait   skipped  0         -         needs hello, which failed", "apply quickstart failed (1 step failed: hello) in 7.0s: 1 ok, 1 failed, 1 skipped.", "hello failed:\nJob default/hello failed: BackoffLimitExceeded\nlast log lines:\n  boom"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
