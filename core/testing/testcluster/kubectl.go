package testcluster

import (
	"path/filepath"
	"testing"
)

// Kubectl returns the kubectl built with the test cluster's binaries
// (.cache/testbin/bin/kubectl, or $KHOOK_TESTBIN's), for tests that
// compare khook with kubectl on the same input: khook itself never runs
// kubectl.
func Kubectl(t testing.TB) string {
	t.Helper()
	dir, err := findBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "kubectl")
}
