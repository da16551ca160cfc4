package render

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"khook.io/core/redact"
	"khook.io/core/run"
	"khook.io/core/testing/junitxsd"
)

// plantedSecret is a secret value with characters XML escapes: once
// escaped (&amp;, &lt;) the redacting writer could no longer see it.
const plantedSecret = `s3cr&t<pa"ss>`

func fleetRuns() []ClusterRun {
	start := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	return []ClusterRun{
		{Context: "prod-eu", Status: run.RunOK, Started: start, Duration: 5200 * time.Millisecond, Result: &run.Result{Status: run.RunOK, Steps: []run.StepResult{
			{Name: "ns", Type: "apply", Status: run.StatusOK, Attempts: 1, Duration: 700 * time.Millisecond, Message: "applied 1 object"},
			{Name: "argocd", Type: "helm", Status: run.StatusSkipped, SkipReason: `when: vars.ENV == "prod" is false`},
		}}},
		{Context: "prod-us", Status: run.RunFailed, Started: start, Duration: 35 * time.Second, Result: &run.Result{Status: run.RunFailed, Steps: []run.StepResult{
			{Name: "ns", Type: "apply", Status: run.StatusOK, Attempts: 1, Duration: time.Second, Finished: start.Add(time.Second)},
			{Name: "argocd", Type: "helm", Status: run.StatusFailed, Attempts: 2, Duration: 30 * time.Second, Finished: start.Add(31 * time.Second),
				Error: "helm upgrade failed: token " + plantedSecret + " refused\nlast lines:\n  \x1b[31mboom\x1b[0m"},
			{Name: "late", Type: "job", Status: run.StatusFailed, Attempts: 1, Duration: 40 * time.Second, Finished: start.Add(41 * time.Second), Error: "job failed"},
		}}},
		{Context: "arn:aws:eks:eu-west-1:123:cluster/x", Status: run.RunFailed, Started: start, Duration: 100 * time.Millisecond,
			Err: "cannot reach the cluster at https://10.0.0.3:6443: connection refused", Result: NotRun([]StepInfo{{"ns", "apply"}, {"argocd", "helm"}}, "not run: cannot reach the cluster")},
		{Context: "staging", Status: run.RunInterrupted, Started: start, Duration: 2 * time.Second, Result: &run.Result{Status: run.RunInterrupted, Steps: []run.StepResult{
			{Name: "ns", Type: "apply", Status: run.StatusInterrupted, Attempts: 1, Duration: 2 * time.Second, Error: "interrupted"},
			{Name: "argocd", Type: "helm", Status: run.StatusSkipped, SkipReason: "not run: the run was interrupted"},
		}}},
	}
}

// TestJUnitIsValidAgainstTheSchema: the report of a fleet run, with a
// failed, an interrupted, a skipped step and an unreachable cluster, is
// valid against Jenkins' JUnit schema, counts right, and carries no secret
// even where XML escaping would have hidden it from the redacting writer.
func TestJUnitIsValidAgainstTheSchema(t *testing.T) {
	red := redact.New()
	red.Add(plantedSecret)
	var b bytes.Buffer
	runs := fleetRuns()
	for i := range runs {
		runs[i].TraceID = "0af7651916cd43dd8448eb211c80319c" // a traced run's
	}
	if err := JUnit(&b, "platform", "apply", runs, 41*time.Second, red); err != nil {
		t.Fatal(err)
	}
	out := b.Bytes()
	if !junitxsd.Available(t) {
		t.Log("built without the tag libxml2 (plain go test): the schema is not checked")
	} else if err := junitxsd.Validate(out); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, leak := range []string{plantedSecret, "s3cr&amp;t", "&lt;pa", "s3cr"} {
		if bytes.Contains(out, []byte(leak)) {
			t.Errorf("the report holds the secret (%q):\n%s", leak, out)
		}
	}
	var doc junitSuites
	if err := xml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Tests != 10 || doc.Failures != 2 || doc.Errors != 2 || len(doc.Suites) != 4 {
		t.Errorf("testsuites: tests %d failures %d errors %d suites %d", doc.Tests, doc.Failures, doc.Errors, len(doc.Suites))
	}
	for _, s := range doc.Suites {
		if p := s.Properties.Properties; p[len(p)-1] != (junitProperty{Name: "khook.traceId", Value: "0af7651916cd43dd8448eb211c80319c"}) {
			t.Errorf("suite %s: properties %v, want the trace id last", s.Name, p)
		}
	}
	us := doc.Suites[1]
	if us.Name != "prod-us" || us.Tests != 3 || us.Failures != 2 || us.Time != "35.000" {
		t.Errorf("prod-us suite: %+v", us)
	}
	f := us.Cases[1].Failure
	if f == nil || us.Cases[1].Name != "argocd" || us.Cases[1].Classname != "prod-us" || f.Message != "helm upgrade failed: token *** refused" || !strings.Contains(f.Text, "last lines:") {
		t.Errorf("the failed step: %+v %+v", us.Cases[1], f)
	}
	eu := doc.Suites[0]
	if s := eu.Cases[1].Skipped; s == nil || s.Message != `when: vars.ENV == "prod" is false` || eu.Skipped != 1 {
		t.Errorf("the skipped step: %+v", eu.Cases[1])
	}
	down := doc.Suites[2]
	if len(down.Cases) != 3 || down.Cases[0].Name != "(cluster)" || down.Cases[0].Error == nil || down.Errors != 1 || down.Skipped != 2 ||
		!strings.Contains(down.Cases[0].Error.Message, "cannot reach the cluster") {
		t.Errorf("the unreachable cluster: %+v", down)
	}
	if c := doc.Suites[3].Cases[0]; c.Error == nil || c.Error.Type != "interrupted" {
		t.Errorf("the interrupted step: %+v", c)
	}
}

// TestJUnitSchemaCatchesABrokenReport: the check above can fail: a report
// whose suite lacks its required counts is refused.
func TestJUnitSchemaCatchesABrokenReport(t *testing.T) {
	var b bytes.Buffer
	if err := JUnit(&b, "platform", "apply", fleetRuns()[:1], time.Second, redact.New()); err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(b.String(), ` failures="0" errors="0" skipped=`, ` errors="0" skipped=`, 1)
	if !junitxsd.Available(t) {
		t.Skip("built without the tag libxml2 (plain go test; make test sets it): no validator")
	}
	if err := junitxsd.Validate([]byte(broken)); err == nil {
		t.Fatalf("a testsuite without failures= passed:\n%s", broken)
	}
}

func TestFleetSummary(t *testing.T) {
	var b bytes.Buffer
	if err := FleetSummary(&b, "platform", "apply", fleetRuns(), 41*time.Second); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"CONTEXT                              STATUS       OK  FAILED  SKIPPED  INTERRUPTED  DURATION  FIRST ERROR",
		"prod-eu                              ok           1   0       1        0            5.2s      -",
		"prod-us                              failed       1   2       0        0            35.0s     argocd: helm upgrade failed: token " + plantedSecret + " refused",
		"arn:aws:eks:eu-west-1:123:cluster/x  failed       0   0       2        0            100ms     cannot reach the cluster at https://10.0.0.3:6443: connection refused",
		"apply platform on 4 clusters was interrupted in 41.0s: 1 ok, 2 failed (prod-us, arn:aws:eks:eu-west-1:123:cluster/x), 1 interrupted (staging).",
		"prod-us: argocd failed:\nhelm upgrade failed",
		"prod-us: late failed:\njob failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	r := NewFleetReport("platform", "apply", fleetRuns(), 41*time.Second)
	if r.Status != run.RunInterrupted || len(r.Clusters) != 4 || r.Clusters[1].Failed != 2 || r.Clusters[1].Error != "argocd: helm upgrade failed: token "+plantedSecret+" refused\nlast lines:\n  \x1b[31mboom\x1b[0m" ||
		len(r.Clusters[2].Steps) != 2 || r.Clusters[2].Error == "" {
		t.Errorf("report: %+v", r)
	}
}
