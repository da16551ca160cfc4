//go:build integration

package e2e

import (
	"testing"

	"khook.io/core/testing/testcluster"
)

func runTests(m *testing.M) int { return testcluster.Main(m) }
