//go:build integration

package tfacc

import (
	"os"
	"testing"

	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
