//go:build integration

package helm

import (
	"context"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	rcommon "helm.sh/helm/v4/pkg/release/common"
)

func ptr(s string) *string { return &s }

// gone is a run that took over the expired lock of run "dead".
var gone = Run{ID: "me", Abandoned: func(id string) bool { return id == "dead" }}

// TestRunLabelOnRevisions: every revision an install or upgrade makes
// names its run and its own revision; an upgrade without a run id drops
// the labels helm would carry over from the last revision.
func TestRunLabelOnRevisions(t *testing.T) {
	c := newCluster(t, "helm-run-label")
	r := c.release("lab", "one")
	r.Run = Run{ID: "run-a"}
	c.apply(r)
	r.Run, r.Values = Run{ID: "run-b"}, map[string]any{"color": "two"}
	c.apply(r)
	r.Run, r.Values = Run{}, map[string]any{"color": "three"}
	c.apply(r)
	for rev, want := range map[int]map[string]string{
		1: {RunLabel: "run-a", RunRevisionLabel: "1"},
		2: {RunLabel: "run-b", RunRevisionLabel: "2"},
		3: {},
	} {
		if got := c.labels("lab", rev); !reflect.DeepEqual(got, want) {
			t.Errorf("revision %d: labels %v, want %v", rev, got, want)
		}
	}
}

// TestPendingNotAbandonedIsLeftAlone: a revision another writer left
// pending moments ago, with no run known to be gone, is refused by apply,
// plan, diff and uninstall in helm's words, naming its status, revision,
// age and writer; nothing is changed.
func TestPendingNotAbandonedIsLeftAlone(t *testing.T) {
	c := newCluster(t, "helm-pending-fresh")
	tests := []struct {
		name   string
		status rcommon.Status
		labels map[string]*string
		writer string
		op     string
	}{
		{name: "inst", status: rcommon.StatusPendingInstall, writer: "not khook (no khook.io/run label): helm or another tool", op: "install/upgrade/rollback"},
		{name: "live", status: rcommon.StatusPendingInstall, labels: map[string]*string{RunLabel: ptr("live"), RunRevisionLabel: ptr("1")}, writer: "khook run live", op: "install/upgrade/rollback"},
		{name: "carried", status: rcommon.StatusPendingUpgrade, labels: map[string]*string{RunLabel: ptr("dead"), RunRevisionLabel: ptr("0")},
			writer: "not khook (its khook.io/run label was carried over from revision 0): helm or another tool", op: "install/upgrade/rollback"},
		{name: "un", status: rcommon.StatusUninstalling, writer: "not khook (no khook.io/run label): helm or another tool", op: "uninstall"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *c
			c.t = t
			c.apply(c.release(tt.name, "one"))
			c.pend(tt.name, tt.status, 0, tt.labels)
			before := c.revisions(tt.name)
			want := regexp.MustCompile(`^release ` + tt.name + ` \(` + c.ns + `\): another operation \(` + regexp.QuoteMeta(tt.op) + `\) is in progress: revision 1 has been ` +
				string(tt.status) + ` for \d+s, last writer: ` + regexp.QuoteMeta(tt.writer) + `; khook takes over`)
			r := c.release(tt.name, "two")
			r.Run = gone
			if err := c.applyErr(r); !want.MatchString(err.Error()) || !errors.As(err, new(*PendingError)) {
				t.Errorf("apply: %v", err)
			}
			_, err := c.client.Uninstall(context.Background(), tt.name, c.ns, UninstallOptions{Timeout: time.Minute, Run: gone})
			if err == nil || !want.MatchString(err.Error()) {
				t.Errorf("uninstall: %v", err)
			}
			p := c.plan(r)
			if p.Action != PlanUnknown || !strings.HasSuffix(p.Reason, ": apply will fail unless that operation ends first") ||
				!strings.Contains(p.Reason, "last writer: "+tt.writer) {
				t.Errorf("plan: %+v", p)
			}
			d, err := c.client.Diff(context.Background(), r)
			if err != nil || d.Action != PlanUnknown || !strings.Contains(d.Reason, "last writer: "+tt.writer) {
				t.Errorf("diff: %+v, %v", d, err)
			}
			if got := c.revisions(tt.name); !reflect.DeepEqual(got, before) {
				t.Errorf("revisions %v, were %v", got, before)
			}
			if got := c.color(tt.name); got != "one" {
				t.Errorf("color = %q", got)
			}
		})
	}
}

// TestPendingOfAbandonedRun: a revision whose own label names a run known
// to be gone is recovered at once, however fresh.
func TestPendingOfAbandonedRun(t *testing.T) {
	c := newCluster(t, "helm-pending-gone")
	r := c.release("gone", "one")
	r.Run = Run{ID: "dead"}
	c.apply(r)
	c.apply(func() Release { r.Values = map[string]any{"color": "two"}; return r }())
	c.pend("gone", rcommon.StatusPendingUpgrade, 0, nil) // revision 2, labelled by run dead
	r.Run, r.Values = gone, map[string]any{"color": "three"}
	const left = "revision 2 was left pending-upgrade by khook run dead, which is gone (its run lock expired)"
	if p := c.plan(r); p.Action != PlanUpgrade || p.Reason != left+": apply will mark it failed, roll back to revision 1, then upgrade" {
		t.Errorf("plan: %+v", p)
	}
	res := c.apply(r)
	if res.Action != Upgraded || res.Recovered != left+": marked it failed and rolled back to revision 1" {
		t.Errorf("result: %+v", res)
	}
	if got := c.revisions("gone"); !reflect.DeepEqual(got, []string{"1:superseded", "2:failed", "3:superseded", "4:deployed"}) {
		t.Errorf("revisions = %v", got)
	}
	if got := c.labels("gone", 4); !reflect.DeepEqual(got, map[string]string{RunLabel: "me", RunRevisionLabel: "4"}) {
		t.Errorf("labels of revision 4: %v", got)
	}
	if got := c.color("gone"); got != "three" {
		t.Errorf("color = %q", got)
	}
}

// TestUninstallPending: an uninstall (destroy, delete.release) takes over
// an uninstalling release only when it is abandoned: older than the
// timeout, or left by a run known to be gone.
func TestUninstallPending(t *testing.T) {
	c := newCluster(t, "helm-uninstall-pending")
	tests := []struct {
		name   string
		age    time.Duration
		labels map[string]*string
	}{
		{name: "old", age: time.Hour},
		{name: "dead", labels: map[string]*string{RunLabel: ptr("dead"), RunRevisionLabel: ptr("1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *c
			c.t = t
			c.apply(c.release(tt.name, "one"))
			c.pend(tt.name, rcommon.StatusUninstalling, tt.age, tt.labels)
			res, err := c.client.Uninstall(context.Background(), tt.name, c.ns, UninstallOptions{Timeout: time.Minute, Run: gone})
			if err != nil || res.Previous == nil || res.Previous.Status != "uninstalling" || res.Deleted == 0 {
				t.Fatalf("uninstall: %+v, %v", res, err)
			}
			if got := c.revisions(tt.name); len(got) != 0 {
				t.Errorf("revisions = %v", got)
			}
		})
	}
}
