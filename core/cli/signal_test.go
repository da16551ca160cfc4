package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signalChildEnv makes the test binary act as a command that ignores its
// context once cancelled (as a call that cannot be interrupted would).
const signalChildEnv = "KHOOK_TEST_SIGNAL_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(signalChildEnv) == "1" {
		signalChild()
		return
	}
	os.Exit(m.Run())
}

func signalChild() {
	ctx, stop := NotifyContext(context.Background(), os.Stderr, os.Exit)
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	var se *SignalError
	if errors.As(context.Cause(ctx), &se) {
		fmt.Println("cancelled: " + se.Error())
	} else {
		fmt.Println("cancelled: no signal cause")
	}
	select {} // hung: only the second signal ends it
}

// TestNotifyContext: the first SIGINT or SIGTERM cancels the context with
// the signal as its cause; a second one exits at once with 128 plus the
// signal's number, even while the command ignores its context.
func TestNotifyContext(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("signals are sent to processes on unix only")
	}
	for _, tc := range []struct {
		first, second syscall.Signal
		cause         string
		code          int
	}{
		{syscall.SIGINT, syscall.SIGINT, "received SIGINT", 130},
		{syscall.SIGTERM, syscall.SIGTERM, "received SIGTERM", 143},
		{syscall.SIGTERM, syscall.SIGINT, "received SIGTERM", 130},
	} {
		t.Run(fmt.Sprintf("%v then %v", tc.first, tc.second), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), signalChildEnv+"=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			lines := make(chan string)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
				_, _ = io.Copy(io.Discard, out)
				close(lines)
			}()
			expect := func(want string) {
				t.Helper()
				select {
				case got := <-lines:
					if got != want {
						t.Fatalf("child said %q, want %q", got, want)
					}
				case <-time.After(time.Minute):
					t.Fatalf("child never said %q", want)
				}
			}
			expect("ready")
			if err := cmd.Process.Signal(tc.first); err != nil {
				t.Fatal(err)
			}
			expect("cancelled: " + tc.cause)
			if err := cmd.Process.Signal(tc.second); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the second signal did not end the process")
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit %v, want code %d", err, tc.code)
			}
			if !strings.Contains(stderr.String(), "again: exiting at once") {
				t.Errorf("stderr: %q", stderr.String())
			}
		})
	}
}

func TestNotifyContextStop(t *testing.T) {
	ctx, stop := NotifyContext(context.Background(), io.Discard, func(int) { t.Error("exit called") })
	stop()
	stop() // idempotent
	if ctx.Err() == nil {
		t.Error("stop must cancel the context")
	}
}
