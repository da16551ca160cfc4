//go:build integration

package helm

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	rcommon "helm.sh/helm/v4/pkg/release/common"

	"khook.io/core/redact"
	"khook.io/core/step"
	"khook.io/core/testing/testcluster"
)

// TestLostAnswersOfHelmsWrites: helm's storage driver creates, updates and
// deletes the release's Secrets with the typed clientset (protobuf); the
// answers the lossy link cuts after the API server acted are resolved by
// the resend rule, so the install, the upgrade and the uninstall succeed
// as if nothing was lost.
func TestLostAnswersOfHelmsWrites(t *testing.T) {
	tc := testcluster.Get(t)
	link := tc.NewLossyLink(t, testcluster.LossyOptions{Seed: 236})
	c := newCluster(t, "helm-lost")
	c.clients = clientsFor(t, link.RESTConfig(t))
	c.client = NewClient(Env{Kube: c.clients, Redactor: redact.New(), Log: func(f string, a ...any) { t.Logf("progress: "+f, a...) }})
	release := func(method, suffix string) func(*http.Request) bool {
		return func(r *http.Request) bool {
			return r.Method == method && strings.Contains(r.URL.Path, "/secrets") && strings.HasSuffix(r.URL.Path, suffix)
		}
	}
	link.CutNext(release(http.MethodPost, "/secrets"))                   // the release record's create
	link.CutNext(release(http.MethodPut, "/sh.helm.release.v1.lost.v1")) // deployed
	if res := c.apply(c.release("lost", "one")); res.Action != Installed || res.Revision != 1 {
		t.Fatalf("install: %+v", res)
	}
	link.CutNext(release(http.MethodPost, "/secrets"))                   // revision 2
	link.CutNext(release(http.MethodPut, "/sh.helm.release.v1.lost.v1")) // superseded
	if res := c.apply(c.release("lost", "two")); res.Action != Upgraded || res.Revision != 2 {
		t.Fatalf("upgrade: %+v", res)
	}
	if got := c.revisions("lost"); !reflect.DeepEqual(got, []string{"1:superseded", "2:deployed"}) {
		t.Errorf("revisions %v", got)
	}
	if n := link.Counts().CutWrites; n != 4 {
		t.Errorf("%d answers of helm's writes cut, want 4", n)
	}
	link.CutNext(release(http.MethodDelete, ".v2")) // the uninstall's purge: a delete without preconditions
	if _, err := c.client.Uninstall(t.Context(), "lost", c.ns, UninstallOptions{Timeout: time.Minute}); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if n := link.Counts().CutWrites; n != 5 {
		t.Errorf("%d answers of helm's writes cut, want 5", n)
	}
}

// TestPendingOfThisRunAndOfAnEndedOne: a release left pending by this run
// (an earlier attempt of its step), or by a run that held the run lock
// this run holds now, is taken over at once, and the outcome says so; one
// this run left while another of its operations is on the release is not.
func TestPendingOfThisRunAndOfAnEndedOne(t *testing.T) {
	c := newCluster(t, "helm-pending-own")
	ops := &step.Operations{}
	me := Run{ID: "me", Lock: "l0ck", Enter: ops.Enter}
	for _, tt := range []struct {
		name, writer, left string
		busy               bool
	}{
		{"own", "me", "revision 1 was left pending-install by this run, whose operation on it ended", false},
		{"ended", "old", "revision 1 was left pending-install by khook run old, which has ended (this run holds the run lock it held)", false},
		{"busy", "me", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := *c
			c.t = t
			r := c.release(tt.name, "one")
			r.Run = Run{ID: tt.writer, Lock: "l0ck"}
			c.apply(r)
			c.pend(tt.name, rcommon.StatusPendingInstall, 0, nil)
			r.Run = me
			if tt.busy {
				_, leave := ops.Enter(c.ns + "/" + tt.name) // another step of this run is on it
				defer leave()
				if err := c.applyErr(r); err == nil || !strings.Contains(err.Error(), "another operation (install/upgrade/rollback) is in progress") {
					t.Fatalf("apply while another operation of the run is on the release: %v", err)
				}
				return
			}
			res := c.apply(r)
			if res.Action != Installed || res.Recovered != tt.left+": uninstalled it and installed again" {
				t.Errorf("result: %+v", res)
			}
		})
	}
}
