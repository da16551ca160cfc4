package helm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// TestJudgePending: a pending revision is abandoned only when it is older
// than the timeout (by LastDeployed; Deleted for an uninstall) or when its
// own run label names a run known to be gone; a label carried over from
// another revision names nobody.
func TestJudgePending(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	gone := Run{ID: "me", Abandoned: func(id string) bool { return id == "dead" }}
	own := func(id string) map[string]string { return map[string]string{RunLabel: id, RunRevisionLabel: "3"} }
	carried := map[string]string{RunLabel: "dead", RunRevisionLabel: "2"}
	const timeout = 5 * time.Minute
	type want struct {
		abandoned, byRun bool
		writer           string
	}
	notKhook := "not khook (no khook.io/run label): helm or another tool"
	tests := []struct {
		status  rcommon.Status
		age     time.Duration // of LastDeployed
		deleted time.Duration // of Deleted, 0: unset
		labels  map[string]string
		run     Run
		timeout time.Duration
		want    want
	}{
		// fresh, by nobody khook knows: left alone
		{status: rcommon.StatusPendingInstall, age: time.Second, want: want{writer: notKhook}},
		{status: rcommon.StatusPendingUpgrade, age: time.Second, run: gone, want: want{writer: notKhook}},
		{status: rcommon.StatusPendingRollback, age: timeout, want: want{writer: notKhook}},
		{status: rcommon.StatusUninstalling, age: time.Second, want: want{writer: notKhook}},
		// older than the timeout: abandoned, whoever wrote it
		{status: rcommon.StatusPendingInstall, age: timeout + time.Second, want: want{abandoned: true, writer: notKhook}},
		{status: rcommon.StatusPendingUpgrade, age: time.Hour, labels: own("live"), want: want{abandoned: true, writer: "khook run live"}},
		{status: rcommon.StatusPendingRollback, age: 2 * time.Minute, timeout: time.Minute, want: want{abandoned: true, writer: notKhook}},
		// no timeout given: the spec's default, 5m
		{status: rcommon.StatusPendingUpgrade, age: 4 * time.Minute, timeout: -1, want: want{writer: notKhook}},
		{status: rcommon.StatusPendingUpgrade, age: 6 * time.Minute, timeout: -1, want: want{abandoned: true, writer: notKhook}},
		// an uninstall's time is when it began (Deleted), not the
		// revision's deploy
		{status: rcommon.StatusUninstalling, age: time.Hour, deleted: time.Second, want: want{writer: notKhook}},
		{status: rcommon.StatusUninstalling, age: time.Hour, deleted: time.Hour, want: want{abandoned: true, writer: notKhook}},
		{status: rcommon.StatusUninstalling, age: time.Hour, want: want{abandoned: true, writer: notKhook}},
		// the run that wrote it is gone: abandoned at once
		{status: rcommon.StatusPendingInstall, age: time.Second, labels: own("dead"), run: gone, want: want{abandoned: true, byRun: true, writer: "khook run dead"}},
		{status: rcommon.StatusUninstalling, age: time.Second, deleted: time.Second, labels: own("dead"), run: gone, want: want{abandoned: true, byRun: true, writer: "khook run dead"}},
		// this run's own, once no other operation of it is on the release
		{status: rcommon.StatusPendingInstall, age: time.Second, labels: own("me"), run: Run{ID: "me", sole: true}, want: want{abandoned: true, byRun: true, writer: "khook run me"}},
		{status: rcommon.StatusPendingInstall, age: time.Second, labels: own("me"), run: Run{ID: "me"}, want: want{writer: "khook run me"}},
		// a run that wrote it under the run lock this run holds now has
		// ended; a lock label carried over names nobody
		{status: rcommon.StatusPendingUpgrade, age: time.Second, labels: map[string]string{RunLabel: "old", RunRevisionLabel: "3", RunLockLabel: "l0ck"}, run: Run{ID: "me", Lock: "l0ck"}, want: want{abandoned: true, byRun: true, writer: "khook run old"}},
		{status: rcommon.StatusPendingUpgrade, age: time.Second, labels: map[string]string{RunLabel: "old", RunRevisionLabel: "3", RunLockLabel: "other"}, run: Run{ID: "me", Lock: "l0ck"}, want: want{writer: "khook run old"}},
		{status: rcommon.StatusPendingUpgrade, age: time.Second, labels: map[string]string{RunLabel: "old", RunRevisionLabel: "2", RunLockLabel: "l0ck"}, run: Run{ID: "me", Lock: "l0ck"},
			want: want{writer: "not khook (its khook.io/run label was carried over from revision 2): helm or another tool"}},
		// a live run, or a run this one knows nothing of
		{status: rcommon.StatusPendingInstall, age: time.Second, labels: own("live"), run: gone, want: want{writer: "khook run live"}},
		{status: rcommon.StatusPendingUpgrade, age: time.Second, labels: own("dead"), want: want{writer: "khook run dead"}},
		{status: rcommon.StatusPendingUpgrade, age: time.Second, labels: own("dead"), run: Run{ID: "me"}, want: want{writer: "khook run dead"}},
		// a label helm carried over from revision 2 names nobody
		{status: rcommon.StatusPendingUpgrade, age: time.Second, labels: carried, run: gone,
			want: want{writer: "not khook (its khook.io/run label was carried over from revision 2): helm or another tool"}},
		{status: rcommon.StatusPendingRollback, age: time.Hour, labels: carried, run: gone,
			want: want{abandoned: true, writer: "not khook (its khook.io/run label was carried over from revision 2): helm or another tool"}},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s/%s/%v/%v", tt.status, tt.age, tt.labels, tt.run.ID)
		t.Run(name, func(t *testing.T) {
			rel := &release.Release{Name: "r", Version: 3, Labels: tt.labels, Info: &release.Info{
				Status: tt.status, LastDeployed: now.Add(-tt.age)}}
			if tt.deleted != 0 {
				rel.Info.Deleted = now.Add(-tt.deleted)
			}
			to := timeout
			if tt.timeout != 0 {
				to = max(tt.timeout, 0)
			}
			p := judgePending(rel, now, to, tt.run)
			if p.abandoned() != tt.want.abandoned || p.byRun != tt.want.byRun || p.writer() != tt.want.writer {
				t.Errorf("abandoned %v (by run %v), writer %q; want %+v", p.abandoned(), p.byRun, p.writer(), tt.want)
			}
		})
	}
}

// TestPendingWords: the refusal names the revision, its status, its age
// and its writer in helm's words; the recovery says why it was judged
// abandoned.
func TestPendingWords(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rel := func(status rcommon.Status, age time.Duration, labels map[string]string) *release.Release {
		return &release.Release{Version: 2, Labels: labels, Info: &release.Info{Status: status, LastDeployed: now.Add(-age)}}
	}
	tests := []struct {
		rel  *release.Release
		run  Run
		want string
	}{
		{rel(rcommon.StatusPendingInstall, 12*time.Second+300*time.Millisecond, map[string]string{RunLabel: "a1", RunRevisionLabel: "2"}), Run{},
			"another operation (install/upgrade/rollback) is in progress: revision 2 has been pending-install for 12s, last writer: khook run a1; " +
				"khook takes over a pending release only when it is older than the step's timeout (5m0s) or the khook run that left it is known to be gone"},
		{rel(rcommon.StatusUninstalling, time.Minute, nil), Run{},
			"another operation (uninstall) is in progress: revision 2 has been uninstalling for 1m0s, last writer: not khook (no khook.io/run label): helm or another tool; " +
				"khook takes over a pending release only when it is older than the step's timeout (5m0s) or the khook run that left it is known to be gone"},
		{rel(rcommon.StatusPendingUpgrade, time.Hour, nil), Run{},
			"revision 2 was left pending-upgrade 1h0m0s ago, longer than the step's timeout (5m0s)"},
		{rel(rcommon.StatusPendingUpgrade, time.Second, map[string]string{RunLabel: "a1", RunRevisionLabel: "2"}), Run{Abandoned: func(string) bool { return true }},
			"revision 2 was left pending-upgrade by khook run a1, which is gone (its run lock expired)"},
		{rel(rcommon.StatusPendingInstall, time.Second, map[string]string{RunLabel: "a1", RunRevisionLabel: "2"}), Run{ID: "a1", sole: true},
			"revision 2 was left pending-install by this run, whose operation on it ended"},
		{rel(rcommon.StatusPendingInstall, time.Second, map[string]string{RunLabel: "a0", RunRevisionLabel: "2", RunLockLabel: "l0ck"}), Run{ID: "a1", Lock: "l0ck"},
			"revision 2 was left pending-install by khook run a0, which has ended (this run holds the run lock it held)"},
	}
	for _, tt := range tests {
		p := judgePending(tt.rel, now, 5*time.Minute, tt.run)
		got := p.left()
		if !p.abandoned() {
			var err error = p.err()
			var pe *PendingError
			if !errors.As(err, &pe) || pe.Revision != 2 {
				t.Errorf("not a *PendingError: %#v", err)
			}
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}

// TestRunLabels: an install or upgrade with a run id labels its revision;
// without one an upgrade drops the labels helm would carry over, and an
// id that is no label value is refused before anything is written.
func TestRunLabels(t *testing.T) {
	tests := []struct {
		id, lock string
		upgrade  bool
		want     string
		err      string
	}{
		{id: "run-1", want: "khook.io/run=run-1 khook.io/run-revision=4"},
		{id: "run-1", upgrade: true, want: "khook.io/run=run-1 khook.io/run-revision=4 khook.io/run-lock=null"},
		{id: "run-1", lock: "l0ck", want: "khook.io/run=run-1 khook.io/run-revision=4 khook.io/run-lock=l0ck"},
		{id: "run-1", lock: "l0ck", upgrade: true, want: "khook.io/run=run-1 khook.io/run-revision=4 khook.io/run-lock=l0ck"},
		{id: "", want: ""},
		{id: "", upgrade: true, want: "khook.io/run=null khook.io/run-revision=null khook.io/run-lock=null"},
		{id: "me@host", err: `run id "me@host" cannot label the release (khook.io/run): a valid label must be`},
		{id: strings.Repeat("x", 64), err: "must be no more than 63"},
	}
	for _, tt := range tests {
		got, err := runLabels(Run{ID: tt.id, Lock: tt.lock}, 4, tt.upgrade)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err = %v, want %q", tt.id, err, tt.err)
			}
			continue
		}
		var pairs []string
		for _, k := range []string{RunLabel, RunRevisionLabel, RunLockLabel} {
			if v, ok := got[k]; ok {
				pairs = append(pairs, k+"="+v)
			}
		}
		if err != nil || strings.Join(pairs, " ") != tt.want || len(got) != len(pairs) {
			t.Errorf("%q upgrade=%v: %v, %v; want %s", tt.id, tt.upgrade, got, err, tt.want)
		}
	}
}
