package render

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"khook.io/core/redact"
	"khook.io/core/state"
	"khook.io/core/timeline"
)

// fixedRecord is the state record of a bootstrap run: a CNI retried once,
// two steps after it side by side, a GitOps controller after both, a
// check that failed, a step the record resumed and one a when: excluded.
// The names and the failed check's error quote a secret.
func fixedRecord() (*state.Record, []timeline.Def) {
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	started := func(ms int64) *time.Time { t := at(ms); return &t }
	fin := at(14 * 60_000)
	rec := &state.Record{Version: 1, Spec: "platform", Command: "apply", RunStatus: "failed", StartedAt: t0, FinishedAt: &fin,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		Steps: map[string]*state.StepRecord{
			"namespaces": {Type: "apply", Status: state.StepOK, Attempts: 1, DurationMs: 900, FinishedAt: at(-86_400_000)},
			"cilium": {Type: "helm", Status: state.StepOK, Attempts: 2, DurationMs: 330_000, FinishedAt: at(330_500), StartedAt: started(500),
				Timeline: []state.AttemptTimes{{Start: 0, End: 120_000, Waits: [][2]int64{{8_000, 120_000}}}, {Start: 130_000, End: 330_000, Waits: [][2]int64{{140_000, 325_000}}}}},
			"cert-manager": {Type: "helm", Status: state.StepOK, Attempts: 1, DurationMs: 200_000, FinishedAt: at(530_600), StartedAt: started(330_600),
				Timeline: []state.AttemptTimes{{Start: 0, End: 200_000, Waits: [][2]int64{{20_000, 150_000}, {160_000, 198_000}}}}},
			"ingress-nginx": {Type: "helm", Status: state.StepOK, Attempts: 1, DurationMs: 150_000, FinishedAt: at(480_600), StartedAt: started(330_600),
				Timeline: []state.AttemptTimes{{Start: 0, End: 150_000, Waits: [][2]int64{{10_000, 149_000}}}}},
			"argocd": {Type: "helm", Status: state.StepOK, Attempts: 1, DurationMs: 309_000, FinishedAt: at(839_700), StartedAt: started(530_700),
				Timeline: []state.AttemptTimes{{Start: 0, End: 309_000, Waits: [][2]int64{{30_000, 300_000}}}}},
			"dns-check": {Type: "wait", Status: state.StepFailed, Attempts: 1, DurationMs: 60_000, FinishedAt: at(540_700), StartedAt: started(480_700),
				Error:    "timed out after 1m0s; cause: Pod kube-system/coredns-x: token=hunter2-planted",
				Timeline: []state.AttemptTimes{{Start: 0, End: 60_000, Waits: [][2]int64{{0, 60_000}}}}},
			"monitoring": {Type: "helm", Status: state.StepSkipped, Attempts: 0, FinishedAt: at(600), Detail: "when: vars.MONITORING == \"true\" is false"},
		}}
	defs := []timeline.Def{
		{Name: "namespaces", Type: "apply"},
		{Name: "cilium", Type: "helm", Needs: []string{"namespaces"}},
		{Name: "cert-manager", Type: "helm", Needs: []string{"cilium"}},
		{Name: "ingress-nginx", Type: "helm", Needs: []string{"cilium"}},
		{Name: "dns-check", Type: "wait", Needs: []string{"ingress-nginx"}},
		{Name: "argocd", Type: "helm", Needs: []string{"cert-manager", "ingress-nginx"}},
		{Name: "monitoring", Type: "helm", Needs: []string{"cilium"}},
		{Name: "backups", Type: "job", Needs: []string{"argocd"}},
	}
	return rec, defs
}

// TestTimelineGolden: the timeline picture of a fixed record, SVG and
// HTML (the same picture in a page), against testdata/timeline.svg
// (-update rewrites it).
func TestTimelineGolden(t *testing.T) {
	rec, defs := fixedRecord()
	r := timeline.FromRecord(rec, defs)
	if got, want := r.CriticalPath(), []string{"cilium", "cert-manager", "argocd"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("critical path %v, want %v", got, want)
	}
	red := redact.New()
	red.Add("hunter2-planted")
	var svg, page bytes.Buffer
	if err := TimelineSVG(&svg, r, red); err != nil {
		t.Fatal(err)
	}
	if err := TimelineHTML(&page, r, red); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "timeline.svg")
	if *update {
		if err := os.WriteFile(golden, svg.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if svg.String() != string(want) {
		t.Errorf("timeline SVG differs from %s (go test -run TestTimelineGolden -update)\n%s", golden, svg.String())
	}
	body := strings.TrimPrefix(svg.String(), `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	if !strings.HasPrefix(page.String(), "<!DOCTYPE html>") || !strings.Contains(page.String(), body) {
		t.Errorf("the HTML page does not hold the same picture:\n%s", page.String())
	}
	// self-contained: nothing fetched from anywhere (the SVG namespace is
	// a name, not a place), no script; the secret masked
	offline := strings.ReplaceAll(page.String(), `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, s := range []string{"hunter2", "http://", "https://", "<script", "url("} {
		if strings.Contains(offline, s) {
			t.Errorf("the page holds %q", s)
		}
	}
	bars := timelineBars(t, svg.String())
	perStep := map[string]int{}
	for _, b := range bars {
		perStep[b.step]++
	}
	for step, n := range map[string]int{"namespaces": 1, "cilium": 2, "cert-manager": 1, "ingress-nginx": 1, "dns-check": 1, "argocd": 1, "monitoring": 1} {
		if perStep[step] != n {
			t.Errorf("%s: %d bars, want %d", step, perStep[step], n)
		}
	}
	if perStep["backups"] != 0 {
		t.Errorf("a step that never ran has a bar")
	}
}
