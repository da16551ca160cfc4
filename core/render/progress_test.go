package render

import (
	"bytes"
	"fmt"
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

// clock is a fake time source the tests advance by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time                { return c.t }
func (c *clock) add(d time.Duration) time.Time { c.t = c.t.Add(d); return c.t }

func newClock() *clock { return &clock{t: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)} }

// checkFrame fails when the terminal shows a step other than once, a line
// wrapped, or the block scrolled anything into the scrollback.
func checkFrame(t *testing.T, v *vt, names []string, what string) {
	t.Helper()
	if v.wrapped > 0 {
		t.Fatalf("%s: a line wrapped:\n%s", what, v)
	}
	if len(v.rows) > v.height && what != "close" {
		t.Fatalf("%s: the block outgrew the %d rows of the terminal:\n%s", what, v.height, v)
	}
	seen := map[string]int{}
	for _, l := range v.lines() {
		if f := strings.Fields(l); len(f) > 1 {
			seen[f[1]]++
		}
	}
	for _, n := range names {
		if seen[n] > 1 {
			t.Fatalf("%s: step %s shown %d times:\n%s", what, n, seen[n], v)
		}
	}
}

// TestLiveProgressMoreStepsThanRows: 30 steps on a 10-row terminal. The
// block keeps to 9 lines (running and failed steps first, then the latest,
// and a line counting the rest), is redrawn in place every time, and ends
// with every step printed once.
func TestLiveProgressMoreStepsThanRows(t *testing.T) {
	c := newClock()
	v := newVT(t, 72, 10)
	var steps []StepInfo
	var names []string
	for i := range 30 {
		n := fmt.Sprintf("step-%02d", i)
		steps = append(steps, StepInfo{n, "apply"})
		names = append(names, n)
	}
	p := newProgress(v, steps, ProgressOptions{Live: true, Width: 72, Height: 10}, c.now, false)
	for i, n := range names {
		p.Emit(event.Event{Kind: event.StepStarted, Step: n, Attempt: 1, Time: c.add(100 * time.Millisecond)})
		checkFrame(t, v, names, "start "+n)
		switch {
		case i >= 27: // the last three keep running
		case i%7 == 3:
			p.Emit(event.Event{Kind: event.StepFailed, Step: n, Message: "boom\nline two", Elapsed: time.Second})
		default:
			p.Emit(event.Event{Kind: event.StepSucceeded, Step: n, Message: "applied 1 object", Elapsed: 200 * time.Millisecond})
		}
		checkFrame(t, v, names, "end "+n)
		if got := len(v.lines()); got > 9 {
			t.Fatalf("after %s: %d lines on a 10-row terminal:\n%s", n, got, v)
		}
	}
	screen := v.String()
	for _, want := range []string{"step-03  apply    failed", "step-24  apply    failed", "step-26  apply    ok", "step-29  apply    running", "… 22 more steps not shown: 22 ok"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the block lacks %q:\n%s", want, screen)
		}
	}
	p.Close()
	checkFrame(t, v, names, "close")
	out := v.String()
	for _, n := range names {
		if strings.Count(out, " "+n+" ") != 1 {
			t.Errorf("after Close, %s shows %d times:\n%s", n, strings.Count(out, " "+n+" "), out)
		}
	}
	golden(t, "progress-rows.txt", []byte(out))
}

// TestLiveProgressWarningsAbove: lines written to the console while the
// block is live (an API deprecation warning, client-go log lines, one
// written in two pieces) appear once each, above the block, which stays
// whole.
func TestLiveProgressWarningsAbove(t *testing.T) {
	c := newClock()
	v := newVT(t, 120, 24)
	con := NewConsole(v)
	steps := []StepInfo{{"crds", "apply"}, {"cert-manager", "helm"}, {"issuer", "apply"}, {"ready", "wait"}}
	names := []string{"crds", "cert-manager", "issuer", "ready"}
	p := newProgress(con.Terminal(), steps, ProgressOptions{Live: true, Width: 120, Height: 24, Console: con}, c.now, false)
	p.Emit(event.Event{Kind: event.StepStarted, Step: "crds", Attempt: 1, Time: c.add(time.Millisecond)})
	fmt.Fprintln(con, "Warning: policy/v1beta1 PodSecurityPolicy is deprecated in v1.21+, unavailable in v1.25+")
	p.Emit(event.Event{Kind: event.StepSucceeded, Step: "crds", Elapsed: time.Second, Message: "applied 2 objects"})
	p.Emit(event.Event{Kind: event.StepStarted, Step: "cert-manager", Attempt: 1, Time: c.add(time.Millisecond)})
	p.Emit(event.Event{Kind: event.StepStarted, Step: "issuer", Attempt: 1, Time: c.add(time.Millisecond)})
	_, _ = con.Write([]byte(`I1122 round_trippers.go:632] "Response" verb="GET" url="https://127.0.0.1/api" status="200 OK"` + "\nI1122 round_trippers.go:632] \"Response\" verb=\"PATCH\""))
	p.Emit(event.Event{Kind: event.StepProgress, Step: "issuer", Message: "ClusterIssuer/letsencrypt configured"})
	_, _ = con.Write([]byte(` status="200 OK"` + "\n"))
	checkFrame(t, v, names, "live")
	// a warning wider than the terminal wraps, above the block
	long := "Warning: " + strings.Repeat("a very long deprecation notice, ", 8)
	fmt.Fprintln(con, long)
	if v.wrapped == 0 {
		t.Fatal("the long warning should wrap")
	}
	v.wrapped = 0
	checkFrame(t, v, names, "after a wrapped warning")
	p.Emit(event.Event{Kind: event.StepSucceeded, Step: "issuer", Elapsed: time.Second})
	p.Close()
	fmt.Fprintln(con, "Error: after the run")
	checkFrame(t, v, names, "close")
	lines := v.lines()
	want := []string{
		"Warning: policy/v1beta1 PodSecurityPolicy is deprecated in v1.21+, unavailable in v1.25+",
		`I1122 round_trippers.go:632] "Response" verb="GET" url="https://127.0.0.1/api" status="200 OK"`,
		`I1122 round_trippers.go:632] "Response" verb="PATCH" status="200 OK"`,
	}
	for i, w := range want {
		if i >= len(lines) || lines[i] != w {
			t.Fatalf("line %d should be %q:\n%s", i, w, v)
		}
	}
	nospace := func(s string) string { return strings.ReplaceAll(s, " ", "") }
	if !strings.Contains(nospace(strings.Join(lines, "")), nospace(long)) {
		t.Errorf("the long warning is not whole:\n%s", v)
	}
	if strings.Count(v.String(), "Warning:") != 2 || lines[len(lines)-1] != "Error: after the run" {
		t.Fatalf("terminal:\n%s", v)
	}
	golden(t, "progress-warnings.txt", []byte(v.String()))
}

// TestLiveProgressWideCharacters: messages in CJK and with emoji are cut
// to the terminal's width in cells, so no line wraps.
func TestLiveProgressWideCharacters(t *testing.T) {
	c := newClock()
	v := newVT(t, 75, 24)
	steps := []StepInfo{{"deploy", "apply"}, {"notify", "job"}, {"check", "wait"}}
	names := []string{"deploy", "notify", "check"}
	p := newProgress(v, steps, ProgressOptions{Live: true, Width: 75, Height: 24}, c.now, false)
	for _, e := range []event.Event{
		{Kind: event.StepStarted, Step: "deploy", Attempt: 1, Time: c.add(time.Millisecond)},
		{Kind: event.StepProgress, Step: "deploy", Message: "ConfigMap/設定ファイル を作成しました、次はデプロイメントです"},
		{Kind: event.StepStarted, Step: "notify", Attempt: 1, Time: c.add(time.Millisecond)},
		{Kind: event.StepProgress, Step: "notify", Message: "🚀🚀🚀 launching ❤️❤️❤️ 👩‍💻 with \x1b[31mcolor\x1b[0m\tand tabs\r"},
		{Kind: event.StepSucceeded, Step: "deploy", Elapsed: time.Second, Message: "已应用 3 个对象：1 个已创建，2 个未更改"},
		{Kind: event.StepFailed, Step: "notify", Elapsed: time.Second, Message: "ジョブが失敗しました 💥 (BackoffLimitExceeded)"},
		{Kind: event.StepSkipped, Step: "check", Message: "needs notify, which failed"},
	} {
		p.Emit(e)
		checkFrame(t, v, names, string(e.Kind)+" "+e.Step)
		for _, l := range v.lines() {
			if w := DisplayWidth(l); w > 74 {
				t.Fatalf("a line %d cells wide on a 75-cell terminal: %q", w, l)
			}
		}
		if e.Kind == event.StepProgress && e.Step == "notify" {
			golden(t, "progress-wide-live.txt", []byte(v.String()))
		}
	}
	p.Close()
	checkFrame(t, v, names, "close")
	golden(t, "progress-wide.txt", []byte(v.String()))
}

func TestDisplayWidth(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"ascii", 5},
		{"日本語", 6},
		{"🚀", 2},
		{"e\u0301", 1}, // e and a combining acute accent
		{"❤️", 2},      // a heart with the emoji variation selector
		{"ｈｉ", 4},      // fullwidth Latin
		{"", 0},
	}
	for _, tt := range tests {
		if got := DisplayWidth(tt.s); got != tt.want {
			t.Errorf("DisplayWidth(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
	for _, tt := range []struct {
		s     string
		width int
		want  string
	}{
		{"日本語のテキスト", 7, "日本語…"},
		{"日本語のテキスト", 8, "日本語…"}, // the 4th wide character would straddle the limit
		{"short", 10, "short"},
		{"🚀🚀🚀", 4, "🚀…"},
	} {
		if got := CutWidth(tt.s, tt.width); got != tt.want || DisplayWidth(got) > tt.width {
			t.Errorf("CutWidth(%q, %d) = %q, want %q", tt.s, tt.width, got, tt.want)
		}
	}
	if got := Printable("a\x1b[31mb\tc\r\nd"); got != "a[31mb cd" {
		t.Errorf("Printable = %q", got)
	}
}

// TestInterruptedIsNotFailed: an interrupted step reads as such, live and
// piped, and in the summary.
func TestInterruptedIsNotFailed(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, []StepInfo{{"hello", "job"}}, ProgressOptions{Verb: "apply"})
	p.Emit(event.Event{Kind: event.StepStarted, Step: "hello", Attempt: 1, Time: time.Now()})
	p.Emit(event.Event{Kind: event.StepInterrupted, Step: "hello", Message: "interrupted: deleted Job default/hello, which was still running", Elapsed: 2 * time.Second})
	p.Close()
	if !strings.Contains(b.String(), "hello interrupted: deleted Job default/hello, which was still running (after 2.0s)") {
		t.Errorf("piped:\n%s", b.String())
	}
	res := &run.Result{Status: run.RunInterrupted, Duration: 3 * time.Second, Steps: []run.StepResult{
		{Name: "ns", Type: "apply", Status: run.StatusOK, Attempts: 1, Duration: time.Second, Message: "applied 1 object"},
		{Name: "hello", Type: "job", Status: run.StatusInterrupted, Attempts: 1, Duration: 2 * time.Second, Error: "interrupted: deleted Job default/hello, which was still running"},
		{Name: "ready", Type: "wait", Status: run.StatusSkipped, SkipReason: "needs hello, which was interrupted"},
	}}
	var sum bytes.Buffer
	if err := Summary(&sum, "quickstart", "apply", res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"hello  job    interrupted  1         2.0s      interrupted: deleted Job default/hello, which was still running",
		"ready  wait   skipped      0         -         needs hello, which was interrupted",
		"apply quickstart was interrupted (1 step cut short: hello) in 3.0s: 1 ok, 0 failed, 1 interrupted, 1 skipped.",
	} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	var js bytes.Buffer
	if err := JSON(&js, Report("quickstart", "apply", res)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"status": "interrupted"`) || strings.Count(js.String(), `"status": "interrupted"`) != 2 {
		t.Errorf("json:\n%s", js.String())
	}
}
