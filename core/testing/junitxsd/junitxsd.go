// Package junitxsd checks JUnit XML reports against the JUnit schema
// Jenkins reads (testdata/junit-10.xsd, from Jenkins' xunit plugin; see
// testdata/README.md) with libxml2's XML Schema validator, the one
// xmllint uses, through github.com/terminalstatic/go-xsd-validate (cgo).
// Only tests use it: nothing of it ships in the plugins. It is built with
// the build tag libxml2, which the Makefile sets when pkg-config finds
// libxml2's development files (Debian: libxml2-dev; `make test-deps`
// installs them), so a machine without them still builds and vets
// everything; without the tag (plain go test) or without cgo (the release
// builds) Validate returns ErrUnavailable. Tests ask Available: a build
// without the tag skips the check, saying so; one with the tag but no
// validator fails.
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
var ErrUnavailable = errors.New("junitxsd: the XML Schema validator needs cgo and libxml2 (build tag libxml2; Debian: apt-get install libxml2-dev)")
