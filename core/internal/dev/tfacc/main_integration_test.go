//go:build integration

package tfacc

import (
	"os"
	"testing"

	"khook.io/core/internal/dev/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
