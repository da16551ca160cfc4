//go:build !libxml2

package junitxsd

// tagged: this build did not ask for the validator (plain go test).
const tagged = false
