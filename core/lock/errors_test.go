package lock

import (
	"testing"
	"time"
)

// A held lock's error names the wait as its caller's user knows it: the
// lock itself names no flag.
func TestHeldErrorSpelling(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	h := Holder{ID: "aaaa", Command: "apply", Acquired: now.Add(-time.Minute), Renewed: now}
	loc := Location{Namespace: "ns", Name: "khook-state-x"}
	for _, tc := range []struct {
		setting, give, want string
	}{
		{"", "", "; waited 5s for it (the lock-timeout setting). Wait for that run to end, or set the lock-timeout setting to wait for it; if it is known to be dead, the next run takes its lock over once it has seen it unchanged for 15s, or break it now with force-unlock aaaa"},
		{"--lock-timeout", "pass --lock-timeout DURATION", "; waited 5s for it (--lock-timeout). Wait for that run to end, or pass --lock-timeout DURATION to wait for it; if it is known to be dead, the next run takes its lock over once it has seen it unchanged for 15s, or break it now with force-unlock aaaa"},
	} {
		err := &HeldError{Location: loc, Holder: h, Now: now, Waited: 5 * time.Second, Setting: tc.setting, Give: tc.give}
		prefix := "state record " + loc.String() + " is locked by another run: " + h.Describe() + ", " + h.Since(now)
		if got := err.Error(); got != prefix+tc.want {
			t.Errorf("spelled %q:\n got %s\nwant %s", tc.setting, got, prefix+tc.want)
		}
	}
}
