package delete

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/objects"
	"khook.io/core/redact"
	"khook.io/core/spec"
	"khook.io/core/step"
)

type fakeReleases struct {
	got    []any
	exists bool
	err    error
}

func (f *fakeReleases) Uninstall(_ context.Context, _ *step.Request, release, namespace string, ignoreNotFound bool) (step.Outcome, error) {
	f.got = []any{release, namespace, ignoreNotFound}
	return step.Outcome{Message: "uninstalled " + release}, f.err
}

func (f *fakeReleases) ReleaseExists(context.Context, *step.Request, string, string) (bool, error) {
	return f.exists, nil
}

func releaseReq(d *Delete) *step.Request {
	st := &spec.Step{Name: "rm"}
	st.SetAction(Type, d)
	return &step.Request{Step: st, Redactor: redact.New()}
}

func TestReleaseForm(t *testing.T) {
	_, err := step.RunStep(context.Background(), New(Options{}), releaseReq(&Delete{Release: "x"}))
	if !errors.Is(err, ErrNoReleaseDeleter) {
		t.Fatalf("err %v", err)
	}

	f := &fakeReleases{}
	out, err := step.RunStep(context.Background(), New(Options{Releases: f}), releaseReq(&Delete{Release: "nginx"}))
	if err != nil || out.Message != "uninstalled nginx" {
		t.Fatalf("%v %q", err, out.Message)
	}
	if f.got[0] != "nginx" || f.got[1] != "default" || f.got[2] != true {
		t.Errorf("defaults: got %v, want nginx default true", f.got)
	}
	no := false
	req := releaseReq(&Delete{Release: "nginx", IgnoreNotFound: &no})
	req.DefaultNamespace = "from-flag"
	if _, err := step.RunStep(context.Background(), New(Options{Releases: f}), req); err != nil {
		t.Fatal(err)
	}
	if f.got[1] != "from-flag" || f.got[2] != false {
		t.Errorf("got %v", f.got)
	}
	if _, err := step.RunStep(context.Background(), New(Options{Releases: f}), releaseReq(&Delete{Release: "nginx", Namespace: "ingress"})); err != nil || f.got[1] != "ingress" {
		t.Errorf("namespace: %v %v", err, f.got)
	}

	// errors from the engine pass through the redactor
	red := redact.New()
	red.Add("tok3n-value")
	f.err = errors.New("uninstall failed: tok3n-value")
	req = releaseReq(&Delete{Release: "nginx"})
	req.Redactor = red
	if _, err := step.RunStep(context.Background(), New(Options{Releases: f}), req); err == nil || strings.Contains(err.Error(), "tok3n-value") {
		t.Errorf("err %v", err)
	}
}

func TestReleasePlan(t *testing.T) {
	p, err := step.PlanStep(context.Background(), New(Options{Releases: &fakeReleases{exists: true}}), releaseReq(&Delete{Release: "nginx", Namespace: "ingress"}))
	if err != nil || p.Action.Word != "delete" || p.Details[0] != "uninstall release nginx in namespace ingress" {
		t.Errorf("%+v %v", p, err)
	}
	p, _ = step.PlanStep(context.Background(), New(Options{Releases: &fakeReleases{}}), releaseReq(&Delete{Release: "nginx"}))
	if p.Action.Word != "no-op" || p.Reason != "release nginx not found in namespace default" {
		t.Errorf("%+v", p)
	}
	p, _ = step.PlanStep(context.Background(), New(Options{}), releaseReq(&Delete{Release: "nginx"}))
	if p.Action.Word != "unknown" {
		t.Errorf("%+v", p)
	}
}

func TestSelectionString(t *testing.T) {
	ns := &meta.RESTMapping{Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Scope: meta.RESTScopeNamespace}
	for _, tc := range []struct {
		s    selection
		want string
	}{
		{selection{ref: spec.ResourceRef{Type: "pod", Name: "x"}, mapping: ns, namespace: "a"}, "pod/x in namespace a"},
		{selection{ref: spec.ResourceRef{Type: "po"}, mapping: ns, all: true, label: "app=x", field: "status.phase=Failed"}, "pods matching selector app=x and field selector status.phase=Failed in all namespaces"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if got := objects.RefFor(ns, "a", "x").String(); got != "Pod/x in a" {
		t.Errorf("describe %q", got)
	}
}
