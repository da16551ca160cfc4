package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one process of the cluster.
type proc struct {
	Name      string
	PID       int
	StartTime uint64 // see procStartTime: guards against a reused PID

	// Set only in the process that started it.
	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd.Wait returned
	waitErr error         // cmd.Wait's result, once done is closed
}

// alive tells whether the process is still running.
func (p *proc) alive() bool {
	if p.done != nil {
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	}
	st, ok := procStartTime(p.PID)
	return ok && st == p.StartTime
}

// signal sends sig to the process if it is still the one recorded.
func (p *proc) signal(sig syscall.Signal) error {
	if p.done != nil {
		if !p.alive() {
			return nil
		}
		if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("signal %s (pid %d): %w", p.Name, p.PID, err)
		}
		return nil
	}
	return signalPID(p.PID, p.StartTime, sig)
}

// wait blocks until the process is gone or ctx ends.
func (p *proc) wait(ctx context.Context) error {
	if p.done != nil {
		select {
		case <-p.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// Not our child: poll /proc (a zombie counts as gone).
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for p.alive() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// startProc starts bin with args, its output appended to logPath. launch
// runs the fork (see launcher); nil runs it directly.
func startProc(name, bin string, args, env []string, logPath string, detached bool, launch func(func() error) error) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer logf.Close() // the child has its own descriptor
	fmt.Fprintf(logf, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr(detached)
	if launch == nil {
		err = cmd.Start()
	} else {
		err = launch(cmd.Start)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{Name: name, PID: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	p.StartTime, _ = procStartTime(p.PID)
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stopProcs stops every process: SIGTERM, then SIGKILL to those still
// running after grace, and waits until all are gone. etcd goes last: a
// kube-apiserver whose etcd is gone hangs in its graceful shutdown until
// killed.
func stopProcs(procs []*proc, grace time.Duration) error {
	var first, last []*proc
	for _, p := range procs {
		if p.Name == compEtcd {
			last = append(last, p)
		} else {
			first = append(first, p)
		}
	}
	return errors.Join(stopWave(first, grace), stopWave(last, grace))
}

// stopWave stops procs together.
func stopWave(procs []*proc, grace time.Duration) error {
	var errs []error
	for _, p := range procs {
		if err := p.signal(syscall.SIGTERM); err != nil {
			errs = append(errs, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, p := range procs {
		if p.wait(ctx) == nil {
			continue
		}
		if err := p.signal(syscall.SIGKILL); err != nil {
			errs = append(errs, err)
		}
	}
	kctx, kcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer kcancel()
	for _, p := range procs {
		if err := p.wait(kctx); err != nil {
			errs = append(errs, fmt.Errorf("%s (pid %d) still running after SIGKILL: %w", p.Name, p.PID, err))
		}
	}
	return errors.Join(errs...)
}

// appendPID records p in the PID file of dir.
func appendPID(dir string, p *proc) error {
	f, err := os.OpenFile(filepath.Join(dir, filePIDs), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open pid file: %w", err)
	}
	_, err = fmt.Fprintf(f, "%s %d %d\n", p.Name, p.PID, p.StartTime)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// readPIDs reads the PID file of dir; a missing file is no processes.
func readPIDs(dir string) ([]*proc, error) {
	data, err := os.ReadFile(filepath.Join(dir, filePIDs))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pid file: %w", err)
	}
	return parsePIDs(data)
}

// runningPIDs are the processes of dir's PID file that are still running.
func runningPIDs(dir string) ([]*proc, error) {
	procs, err := readPIDs(dir)
	if err != nil {
		return nil, err
	}
	var running []*proc
	for _, p := range procs {
		if p.alive() {
			running = append(running, p)
		}
	}
	return running, nil
}

func parsePIDs(data []byte) ([]*proc, error) {
	var out []*proc
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("pid file line %d: want \"<name> <pid> <start time>\", got %q", n, line)
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("pid file line %d: bad pid %q", n, f[1])
		}
		st, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("pid file line %d: bad start time %q", n, f[2])
		}
		out = append(out, &proc{Name: f[0], PID: pid, StartTime: st})
	}
	return out, nil
}

// logTail returns the last n lines of a log file, for error messages.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// componentEnv is the environment of every component: a minimal one, so
// nothing from the caller leaks in (etcd reads any ETCD_* variable as a flag;
// kwok reads ~/.kwok/kwok.yaml, hence HOME in the cluster directory).
func componentEnv(dir string) []string {
	env := []string{"HOME=" + dir, "TMPDIR=" + os.TempDir()}
	if path, ok := os.LookupEnv("PATH"); ok {
		env = append(env, "PATH="+path)
	}
	return env
}
