package testcluster

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "1234 (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	st, ok := parseStat([]byte(line))
	if !ok || st != 987654 {
		t.Errorf("parseStat = %d, %v; want 987654, true", st, ok)
	}
	if _, ok := parseStat([]byte(strings.Replace(line, ") S ", ") Z ", 1))); ok {
		t.Error("a zombie counts as running")
	}
	if _, ok := parseStat([]byte("garbage")); ok {
		t.Error("garbage parsed")
	}
	if st, ok := procStartTime(os.Getpid()); !ok || st == 0 {
		t.Errorf("procStartTime(self) = %d, %v", st, ok)
	}
}

func sleepBinary(t *testing.T) string {
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("no sleep binary (coreutils) on PATH: %v", err)
	}
	return path
}

func TestStartAndStopProcess(t *testing.T) {
	sleep := sleepBinary(t)
	l := newLauncher()
	defer l.close()
	log := t.TempDir() + "/sleep.log"
	p, err := startProc("sleep", sleep, []string{"60"}, nil, log, false, l.run)
	if err != nil {
		t.Fatal(err)
	}
	if !p.alive() || p.StartTime == 0 {
		t.Fatalf("process not running: %+v", p)
	}
	// The PID file round-trips, and a loaded process is stoppable by PID.
	dir := t.TempDir()
	if err := appendPID(dir, p); err != nil {
		t.Fatal(err)
	}
	loaded, err := readPIDs(dir)
	if err != nil || len(loaded) != 1 || !loaded[0].alive() {
		t.Fatalf("readPIDs: %v %+v", err, loaded)
	}
	// A recorded PID whose start time differs (a reused PID) is left alone.
	other := &proc{Name: "other", PID: p.PID, StartTime: p.StartTime + 1}
	if other.alive() {
		t.Fatal("a PID with another start time counts as alive")
	}
	if err := stopProcs([]*proc{other}, time.Second); err != nil || !p.alive() {
		t.Fatalf("stopping a reused PID touched the process: %v", err)
	}
	began := time.Now()
	if err := stopProcs(loaded, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if d := time.Since(began); d > 3*time.Second {
		t.Errorf("SIGTERM stop took %v", d)
	}
	if !strings.Contains(logTail(log, 1), "sleep 60") {
		t.Errorf("log header missing: %q", logTail(log, 1))
	}
}

// TestParentDeathKillsChildren runs this test binary as a helper that starts
// `sleep` through a launcher and prints its PID, then SIGKILLs the helper:
// the parent-death signal must take the sleep with it.
func TestParentDeathKillsChildren(t *testing.T) {
	if os.Getenv("KHOOK_TESTCLUSTER_HELPER") == "1" {
		l := newLauncher()
		p, err := startProc("sleep", sleepBinary(t), []string{"60"}, nil, os.DevNull, false, l.run)
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(strconv.Itoa(p.PID) + " " + strconv.FormatUint(p.StartTime, 10) + "\n")
		// Keep other goroutines and threads busy so that the runtime would be
		// free to retire the forking thread if it were not locked.
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	sleepBinary(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestParentDeathKillsChildren$")
	cmd.Env = append(os.Environ(), "KHOOK_TESTCLUSTER_HELPER=1")
	// Built with the integration tag, the helper runs TestMain (Main) too:
	// let it attach to this binary's cluster rather than start its own.
	current.Lock()
	if current.c != nil {
		cmd.Env = append(cmd.Env, EnvCluster+"="+current.c.Dir)
	}
	current.Unlock()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("helper: %v", err)
	}
	f := strings.Fields(line)
	pid, _ := strconv.Atoi(f[0])
	st, _ := strconv.ParseUint(f[1], 10, 64)
	child := &proc{Name: "sleep", PID: pid, StartTime: st}
	if !child.alive() {
		t.Fatal("child not running")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for child.alive() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("child survived its parent's SIGKILL")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
