package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"khook.io/core/event"
	"khook.io/core/redact"
	"khook.io/core/run"
)

func fleetInfos(n, steps int) []ClusterInfo {
	var out []ClusterInfo
	for i := range n {
		c := ClusterInfo{Context: fmt.Sprintf("ctx-%02d", i)}
		for j := range steps {
			c.Steps = append(c.Steps, StepInfo{Name: fmt.Sprintf("step-%d", j), Type: "apply"})
		}
		out = append(out, c)
	}
	return out
}

// playFleet runs a fleet's events through f: cluster 0 succeeds, cluster 1
// fails on its second step, cluster 2 cannot be reached, the others run.
func playFleet(f *FleetProgress, c *clock, n, steps int, check func(what string)) {
	for i := range n {
		cp := f.Cluster(i)
		cp.Connecting()
		check(fmt.Sprintf("cluster %d connecting", i))
		if i == 2 {
			cp.Finished(run.RunFailed, "cannot reach the cluster at https://10.0.0.3:6443: connection refused")
			check("cluster 2 unreachable")
			continue
		}
		cp.Emit(event.Event{Kind: event.RunStarted, Time: c.add(time.Millisecond)})
		for j := range steps {
			name := fmt.Sprintf("step-%d", j)
			cp.Emit(event.Event{Kind: event.StepStarted, Step: name, Attempt: 1, Time: c.add(100 * time.Millisecond)})
			check(fmt.Sprintf("cluster %d %s started", i, name))
			if i == 1 && j == 1 {
				cp.Emit(event.Event{Kind: event.StepFailed, Step: name, Message: "boom token-planted-xyz", Elapsed: time.Second})
				cp.Finished(run.RunFailed, "")
				break
			}
			if i > 2 && j == steps-1 {
				break // still running
			}
			cp.Emit(event.Event{Kind: event.StepSucceeded, Step: name, Message: "applied 1 object", Elapsed: 200 * time.Millisecond})
		}
		if i == 0 {
			cp.Finished(run.RunOK, "")
		}
		check(fmt.Sprintf("cluster %d done", i))
	}
}

// TestFleetProgressLive: the live block of a fleet keeps to the terminal
// in each of its three forms (a block per cluster; a share of the rows
// each; a line per cluster), never wraps a line, never shows a cluster
// twice, and is redrawn in place.
func TestFleetProgressLive(t *testing.T) {
	for _, tc := range []struct {
		name             string
		clusters, steps  int
		height           int
		wantStepLines    bool
		wantHiddenCounts string
	}{
		{"a block per cluster", 3, 3, 24, true, ""},
		{"a share of the rows each", 4, 6, 16, true, "more step"},
		{"a line per cluster, when a share would be too small", 4, 6, 11, false, ""},
		{"a line per cluster", 12, 3, 7, false, "more cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			v := newVT(t, 80, tc.height)
			red := redact.New()
			red.Add("token-planted-xyz")
			f := newFleetProgress(v, fleetInfos(tc.clusters, tc.steps), ProgressOptions{Live: true, Width: 80, Height: tc.height, Redactor: red, Verb: "apply"}, c.now, false)
			sawHidden := false
			check := func(what string) {
				t.Helper()
				if v.wrapped > 0 {
					t.Fatalf("%s: a line wrapped:\n%s", what, v)
				}
				if len(v.rows) > v.height {
					t.Fatalf("%s: the block outgrew the %d rows:\n%s", what, v.height, v)
				}
				seen := map[string]int{}
				for _, l := range v.lines() {
					if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "ctx-") {
						seen[f[1]]++
					}
				}
				for ctx, n := range seen {
					if n > 1 {
						t.Fatalf("%s: %s shown %d times:\n%s", what, ctx, n, v)
					}
				}
				if tc.wantHiddenCounts != "" && strings.Contains(v.String(), tc.wantHiddenCounts) {
					sawHidden = true
				}
				if strings.Contains(v.String(), "token-planted-xyz") {
					t.Fatalf("%s: the secret is shown:\n%s", what, v)
				}
			}
			playFleet(f, c, tc.clusters, tc.steps, check)
			if tc.wantHiddenCounts != "" && !sawHidden {
				t.Errorf("no frame said %q", tc.wantHiddenCounts)
			}
			screen := v.String()
			if strings.Contains(screen, "step-0") != tc.wantStepLines {
				t.Errorf("step lines shown: %v, want %v:\n%s", !tc.wantStepLines, tc.wantStepLines, screen)
			}
			for _, want := range []string{"✗ ctx-02", "failed", "cannot reach the cluster"} {
				if tc.clusters*(tc.steps+1) <= tc.height-1 && !strings.Contains(screen, want) {
					t.Errorf("the frame lacks %q:\n%s", want, screen)
				}
			}
			f.Close()
			final := v.String()
			for i := range tc.clusters {
				if !strings.Contains(final, fmt.Sprintf("ctx-%02d", i)) {
					t.Errorf("the last frame lacks ctx-%02d:\n%s", i, final)
				}
			}
			if !strings.Contains(final, "✓ ctx-00") || (tc.clusters > 3 && !strings.Contains(final, "› ctx-03")) {
				t.Errorf("the last frame:\n%s", final)
			}
		})
	}
}

// TestFleetProgressPiped: piped, one line per change, each prefixed with
// the cluster's context, secrets masked.
func TestFleetProgressPiped(t *testing.T) {
	c := newClock()
	var b bytes.Buffer
	red := redact.New()
	red.Add("token-planted-xyz")
	f := newFleetProgress(&b, fleetInfos(3, 2), ProgressOptions{Redactor: red, Verb: "apply"}, c.now, false)
	playFleet(f, c, 3, 2, func(string) {})
	f.Close()
	out := b.String()
	for _, want := range []string{
		"ctx-00 [    0ms] connecting",
		"ctx-00 [    1ms] apply started",
		"ctx-00 [  101ms] step-0 started",
		"ctx-00 [  101ms] step-0 ok 200ms: applied 1 object",
		"ctx-00 [  201ms] apply ok after 201ms: 2 ok",
		"ctx-01 [  402ms] step-1 failed after 1.0s: boom ***",
		"ctx-01 [  402ms] apply failed after 201ms: 1 failed, 1 ok",
		"ctx-02 [  402ms] apply failed after 0ms: no step ran: cannot reach the cluster at https://10.0.0.3:6443: connection refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("piped output lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "ctx-0") {
			t.Errorf("a line without its context: %q", l)
		}
	}
	if strings.Contains(out, "token-planted-xyz") || strings.Contains(out, "\x1b[") {
		t.Errorf("piped output:\n%s", out)
	}
}

func TestPrefixLines(t *testing.T) {
	var b bytes.Buffer
	p := PrefixLines(&b, "prod-eu: ")
	for _, s := range []string{"Warning: a\nWarn", "ing: b\n", "Warning: c\nWarning: d\n"} {
		if n, err := p.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	want := "prod-eu: Warning: a\nprod-eu: Warning: b\nprod-eu: Warning: c\nprod-eu: Warning: d\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
