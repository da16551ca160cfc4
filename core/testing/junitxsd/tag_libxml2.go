//go:build libxml2

package junitxsd

// tagged: this build asked for the validator (make test's TESTTAGS).
const tagged = true
