package junitxsd

import (
	"errors"
	"testing"
)

// Available tells a test whether this build validates: false in a build
// without the tag libxml2 (plain go test: the test then skips or logs,
// saying so). A build with the tag (make test sets it: TESTTAGS) that has
// no validator, as with CGO_ENABLED=0, fails t: under make test the schema
// check runs or the test fails, never skips.
func Available(t testing.TB) bool {
	t.Helper()
	if !errors.Is(Validate(nil), ErrUnavailable) {
		return true
	}
	if tagged {
		t.Fatalf("built with the tag libxml2, but %v (cgo is off: CGO_ENABLED=0, or no C compiler)", ErrUnavailable)
	}
	return false
}
