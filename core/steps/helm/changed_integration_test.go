//go:build integration

package helm_test

import (
	"fmt"
	"testing"

	"khook.io/core/steps/delete"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/steptest"
)

// TestChanged: a helm step reports Changed when it installs or upgrades
// the release, not when the chart and values are deployed already nor
// when skipIf: installed holds; delete.release reports Changed when it
// uninstalls a release, not when the release is absent (decision 162).
func TestChanged(t *testing.T) {
	f := newFixture(t)
	ns := f.cluster.NewNamespace(t, "helm-changed")
	helmStep := func(extra string) *run {
		return f.request(fmt.Sprintf("name: app\nhelm:\n  chart: %s\n  release: app\n  namespace: %s\n%s", chartrepo.ChartDir("demo"), ns, extra), steptest.Options{})
	}
	del := delete.New(delete.Options{Releases: f.exec})
	deleteStep := f.request(fmt.Sprintf("name: rm\ndelete:\n  release: app\n  namespace: %s", ns), steptest.Options{})
	for _, tc := range []struct {
		name string
		do   func() (bool, string)
		want bool
	}{
		{"install", helmOutcome(f, helmStep("  values: {color: red}")), true},
		{"same chart and values", helmOutcome(f, helmStep("  values: {color: red}")), false},
		{"upgrade with other values", helmOutcome(f, helmStep("  values: {color: green}")), true},
		{"same again", helmOutcome(f, helmStep("  values: {color: green}")), false},
		{"skipIf installed", helmOutcome(f, helmStep("  skipIf: installed\n  values: {color: yellow}")), false},
		{"delete.release of the release", deleteOutcome(f, del, deleteStep), true},
		{"delete.release of an absent release", deleteOutcome(f, del, deleteStep), false},
		{"install again", helmOutcome(f, helmStep("  values: {color: red}")), true},
	} {
		changed, msg := tc.do()
		if changed != tc.want {
			t.Errorf("%s: Changed = %v, want %v (%q)", tc.name, changed, tc.want, msg)
		}
	}
}

func helmOutcome(f *fixture, r *run) func() (bool, string) {
	return func() (bool, string) {
		out := f.apply(r)
		return out.Changed, out.Message
	}
}

func deleteOutcome(f *fixture, del *delete.Executor, r *run) func() (bool, string) {
	return func() (bool, string) {
		f.t.Helper()
		ctx, cancel := f.ctx(r)
		defer cancel()
		out, err := del.Run(ctx, r.req)
		if err != nil {
			f.t.Fatalf("delete.release: %v", err)
		}
		return out.Changed, out.Message
	}
}
