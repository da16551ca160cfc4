//go:build integration

package tfacc

import (
	"os"
	"testing"

	"khook.io/core/internal/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
