//go:build !cgo || !libxml2

package junitxsd

// Validate returns ErrUnavailable: this build has no cgo.
func Validate([]byte) error { return ErrUnavailable }
