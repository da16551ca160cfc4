//go:build !linux

package testcluster

import (
	"errors"
	"syscall"
)

// The test cluster relies on Linux: /proc, parent-death signals. These stubs
// only keep the package compiling elsewhere; Start refuses to run.

func sysProcAttr(bool) *syscall.SysProcAttr { return nil }

type launcher struct{}

func newLauncher() *launcher                     { return &launcher{} }
func (l *launcher) run(start func() error) error { return start() }
func (l *launcher) close()                       {}

func procStartTime(int) (uint64, bool) { return 0, false }

func signalPID(int, uint64, syscall.Signal) error { return nil }

func platformSupported() error { return errors.New("the test cluster runs on linux only") }
