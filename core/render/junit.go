package render

import (
	"encoding/xml"
	"io"
	"strconv"
	"time"

	"khook.io/core/redact"
	"khook.io/core/run"
)

// JUnit writes a run as a JUnit XML report, the format Jenkins, GitLab and
// most CI systems read (valid against the JUnit schema of Jenkins' xunit
// plugin, junit-10.xsd): one <testsuite> per cluster, named after its
// context, and in it one <testcase> per step (classname: the context). A
// failed step carries a <failure> (message: the error's first line; text:
// the whole error), an interrupted one an <error type="interrupted">, a
// skipped one a <skipped> with its reason. A cluster's own error (it could
// not be reached, its state record could not be written) is one more
// test case, "(cluster)", with an <error>; its steps that never ran are
// skipped, "not run: " and that error. Every text is redacted with red
// before it is XML-escaped (an escaped secret would escape the redacting
// writer too).
func JUnit(w io.Writer, name, command string, runs []ClusterRun, d time.Duration, red *redact.Redactor) error {
	suites := junitSuites{Name: "khook " + command + " " + red.String(name), Time: seconds(d)}
	for _, c := range runs {
		c.Context = red.String(c.Context)
		s := junitSuite{Name: c.Context, Time: seconds(c.Duration), Properties: &junitProperties{Properties: []junitProperty{
			{Name: "khook.spec", Value: red.String(name)},
			{Name: "khook.command", Value: command},
			{Name: "khook.context", Value: c.Context},
			{Name: "khook.status", Value: c.Status},
		}}}
		if c.TraceID != "" {
			s.Properties.Properties = append(s.Properties.Properties, junitProperty{Name: "khook.traceId", Value: c.TraceID})
		}
		if !c.Started.IsZero() {
			s.Timestamp = c.Started.UTC().Format("2006-01-02T15:04:05Z")
		}
		if c.Err != "" {
			msg := red.String(c.Err)
			s.Cases = append(s.Cases, junitCase{Name: "(cluster)", Classname: c.Context, Time: seconds(0),
				Error: &junitResult{Type: "cluster", Message: firstLine(msg), Text: msg}})
		}
		if c.Result != nil {
			for _, st := range c.Result.Steps {
				s.Cases = append(s.Cases, stepCase(c.Context, st, red))
			}
		}
		for _, tc := range s.Cases {
			s.Tests++
			switch {
			case tc.Failure != nil:
				s.Failures++
			case tc.Error != nil:
				s.Errors++
			case tc.Skipped != nil:
				s.Skipped++
			}
		}
		suites.Tests += s.Tests
		suites.Failures += s.Failures
		suites.Errors += s.Errors
		suites.Suites = append(suites.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(suites); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// NotRun is the result of steps that never ran on a cluster: every one
// skipped with reason.
func NotRun(steps []StepInfo, reason string) *run.Result {
	res := &run.Result{Status: run.RunFailed}
	for _, s := range steps {
		res.Steps = append(res.Steps, run.StepResult{Name: s.Name, Type: s.Type, Status: run.StatusSkipped, SkipReason: reason})
	}
	return res
}

func stepCase(context string, st run.StepResult, red *redact.Redactor) junitCase {
	tc := junitCase{Name: st.Name, Classname: context, Time: seconds(st.Duration)}
	switch st.Status {
	case run.StatusFailed:
		msg := red.String(st.Error)
		tc.Failure = &junitResult{Type: st.Type + " step failed", Message: firstLine(msg), Text: msg}
	case run.StatusInterrupted:
		msg := red.String(st.Error)
		tc.Error = &junitResult{Type: "interrupted", Message: firstLine(msg), Text: msg}
	case run.StatusSkipped:
		tc.Skipped = &junitResult{Message: red.String(st.SkipReason)}
	}
	return tc
}

// seconds is a duration as JUnit writes it: seconds, three decimals (the
// schema's SUREFIRE_TIME: no exponent, no sign).
func seconds(d time.Duration) string {
	return strconv.FormatFloat(max(d, 0).Seconds(), 'f', 3, 64)
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Errors     int              `xml:"errors,attr"`
	Skipped    int              `xml:"skipped,attr"`
	Time       string           `xml:"time,attr"`
	Timestamp  string           `xml:"timestamp,attr,omitempty"`
	Properties *junitProperties `xml:"properties"`
	Cases      []junitCase      `xml:"testcase"`
}

type junitProperties struct {
	Properties []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string       `xml:"name,attr"`
	Classname string       `xml:"classname,attr"`
	Time      string       `xml:"time,attr"`
	Failure   *junitResult `xml:"failure"`
	Error     *junitResult `xml:"error"`
	Skipped   *junitResult `xml:"skipped"`
}

type junitResult struct {
	Type    string `xml:"type,attr,omitempty"`
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}
