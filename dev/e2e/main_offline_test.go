//go:build !integration

package e2e

import "testing"

func runTests(m *testing.M) int { return m.Run() }
