package junitxsd

import (
	"strings"
	"testing"
)

// TestValidatorRejects: the validator really reads the schema: a report
// missing a required attribute, with an element the schema lacks, or with
// a time that is not SUREFIRE_TIME is refused; a minimal one passes.
func TestValidatorRejects(t *testing.T) {
	valid := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="a" tests="1" failures="0" errors="0" time="1.500"><testcase name="x" time="1.500"/></testsuite></testsuites>`
	if !Available(t) {
		t.Skip("built without the tag libxml2 (plain go test; make test sets it): no validator")
	}
	if err := Validate([]byte(valid)); err != nil {
		t.Fatalf("a minimal report: %v", err)
	}
	for name, report := range map[string]string{
		"no tests attribute": strings.Replace(valid, ` tests="1"`, "", 1),
		"an unknown element": strings.Replace(valid, `<testcase name="x" time="1.500"/>`, `<testcase name="x"><oops/></testcase>`, 1),
		"a time with a sign": strings.Replace(valid, `errors="0" time="1.500"`, `errors="0" time="-1.5"`, 1),
		"a testcase unnamed": strings.Replace(valid, `<testcase name="x"`, `<testcase`, 1),
	} {
		if err := Validate([]byte(report)); err == nil {
			t.Errorf("%s: accepted\n%s", name, report)
		}
	}
}
