// Package junitxsd checks JUnit XML reports against the JUnit schema
// Jenkins reads (testdata/junit-10.xsd, from Jenkins' xunit plugin; see
// testdata/README.md) with libxml2's XML Schema validator, the one
// xmllint uses, through github.com/terminalstatic/go-xsd-validate (cgo).
// Only tests use it: nothing of it ships in the plugins. Without cgo (the
// release builds), Validate returns ErrUnavailable and tests skip.
package junitxsd

import (
	_ "embed"
	"errors"
)

//go:embed testdata/junit-10.xsd
var schema []byte

// Schema is the JUnit schema the reports are checked against.
func Schema() []byte { return schema }

// ErrUnavailable: this build has no validator (it needs cgo and libxml2).
var ErrUnavailable = errors.New("junitxsd: the XML Schema validator needs cgo and libxml2")
