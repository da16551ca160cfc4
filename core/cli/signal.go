package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// SignalError is why a command's context was cancelled: the first SIGINT
// or SIGTERM.
type SignalError struct{ Signal os.Signal }

func (e *SignalError) Error() string { return "received " + signalName(e.Signal) }

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// NotifyContext is how an entrypoint's main starts, before anything slow:
// the first SIGINT or SIGTERM cancels the returned context (its cause a
// *SignalError): the command stops what it does, reports and exits. A
// second one writes a line to errOut and calls exit with 128 plus the
// signal's number at once (130 for SIGINT, as shells report it), whatever
// the command is doing. stop releases the signals.
func NotifyContext(parent context.Context, errOut io.Writer, exit func(code int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			cancel(&SignalError{Signal: sig})
		case <-done:
			return
		}
		select {
		case sig := <-sigs:
			fmt.Fprintf(errOut, "Error: received %s again: exiting at once\n", signalName(sig))
			exit(exitCodeFor(sig))
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel(context.Canceled)
		})
	}
}

// exitCodeFor is a shell's exit status of a process killed by sig.
func exitCodeFor(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + int(syscall.SIGINT)
}
