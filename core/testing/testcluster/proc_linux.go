package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// sysProcAttr returns how a component is started.
//
// In-process (tests): each child gets a process group of its own (a Ctrl-C
// in the terminal reaches the test binary, which stops the children in
// order) and SIGKILL as parent-death signal, so a test binary that dies in
// any way (panic, timeout, SIGKILL) takes its cluster with it. The kernel
// sends the signal when the *thread* that forked the child exits, hence the
// launcher below.
//
// Detached (`khook-testcluster up`): a new session, no parent-death signal,
// so the cluster outlives the command and its terminal; `down` stops it by
// PID.
func sysProcAttr(detached bool) *syscall.SysProcAttr {
	if detached {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// launcher forks children from one OS thread locked for the whole life of
// the cluster. Go may otherwise fork from any thread and later retire it,
// which would deliver the parent-death signal to a healthy cluster.
type launcher struct {
	reqs chan launchReq
}

type launchReq struct {
	start func() error
	errc  chan error
}

func newLauncher() *launcher {
	l := &launcher{reqs: make(chan launchReq)}
	go func() {
		// Never unlocked on purpose: when this goroutine returns (after
		// close, once every child is gone) its thread exits with it.
		runtime.LockOSThread()
		for r := range l.reqs {
			r.errc <- r.start()
		}
	}()
	return l
}

// run calls start (an exec.Cmd's Start) on the launcher's thread.
func (l *launcher) run(start func() error) error {
	errc := make(chan error, 1)
	l.reqs <- launchReq{start: start, errc: errc}
	return <-errc
}

// close ends the launcher goroutine and its thread: call it only after every
// child it started has exited.
func (l *launcher) close() { close(l.reqs) }

// procStartTime returns the start time of pid (field 22 of /proc/<pid>/stat,
// in clock ticks since boot) and whether the process is running: a zombie or
// a missing PID is not. The start time tells a reused PID apart from the
// process recorded in a PID file.
func procStartTime(pid int) (uint64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStat(data)
}

// parseStat reads the state and start time from the content of
// /proc/<pid>/stat. The command name (field 2) is in parentheses and may
// itself contain spaces and parentheses, so fields are counted from the last
// ')'.
func parseStat(data []byte) (uint64, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 {
		return 0, false
	}
	if s := f[0][0]; s == 'Z' || s == 'X' || s == 'x' {
		return 0, false
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, false
	}
	return st, true
}

// signalPID sends sig to pid, unless pid is no longer the process that
// started at startTime.
func signalPID(pid int, startTime uint64, sig syscall.Signal) error {
	if st, ok := procStartTime(pid); !ok || st != startTime {
		return nil
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	return nil
}

func platformSupported() error { return nil }
