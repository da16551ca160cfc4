package spec

import (
	"strings"
	"testing"
)

func TestParseWaitFor(t *testing.T) {
	tests := []struct {
		in      string
		want    WaitFor
		wantErr string
	}{
		{"delete", WaitFor{Kind: ForDelete}, ""},
		{"condition=Ready", WaitFor{Kind: ForCondition, Name: "Ready", Value: "True"}, ""},
		{"condition=Available=False", WaitFor{Kind: ForCondition, Name: "Available", Value: "False"}, ""},
		{"jsonpath={.status.phase}=Running", WaitFor{Kind: ForJSONPath, Path: "{.status.phase}", Value: "Running"}, ""},
		{"jsonpath=.status.phase=Running", WaitFor{Kind: ForJSONPath, Path: "{.status.phase}", Value: "Running"}, ""},
		{"jsonpath=status.phase", WaitFor{Kind: ForJSONPath, Path: "{.status.phase}"}, ""},
		{"jsonpath={.status.readyReplicas}='2'", WaitFor{Kind: ForJSONPath, Path: "{.status.readyReplicas}", Value: "2"}, ""},
		{`jsonpath={.status.conditions[?(@.type=="Ready")].status}=True`, WaitFor{Kind: ForJSONPath, Path: `{.status.conditions[?(@.type=="Ready")].status}`, Value: "True"}, ""},
		{`jsonpath={.metadata.annotations.a\.b}`, WaitFor{Kind: ForJSONPath, Path: `{.metadata.annotations.a\.b}`}, ""},
		{"create", WaitFor{}, "want condition="},
		{"jsonpath={.a}={.b}=c", WaitFor{}, "unexpected"},
		{"jsonpath={.a[}", WaitFor{}, "invalid jsonpath"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseWaitFor(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseChart(t *testing.T) {
	tests := []struct {
		in   string
		want ChartRef
	}{
		{"cilium", ChartRef{Source: ChartFromRepo, Name: "cilium"}},
		{"cilium:1.18.4", ChartRef{Source: ChartFromRepo, Name: "cilium", InlineVersion: "1.18.4"}},
		{"oci://ghcr.io/org/charts/app", ChartRef{Source: ChartFromOCI, Name: "ghcr.io/org/charts/app"}},
		{"oci://localhost:5000/app:1.2.3", ChartRef{Source: ChartFromOCI, Name: "localhost:5000/app", InlineVersion: "1.2.3"}},
		{"oci://ghcr.io/app@sha256:abcd", ChartRef{Source: ChartFromOCI, Name: "ghcr.io/app", Digest: "sha256:abcd"}},
		{"oci://ghcr.io/app:1.0@sha256:abcd", ChartRef{Source: ChartFromOCI, Name: "ghcr.io/app", InlineVersion: "1.0", Digest: "sha256:abcd"}},
		{"oci://AWS:p%40ss@123.dkr.ecr.us-east-1.amazonaws.com/charts/app:1.2.3", ChartRef{Source: ChartFromOCI, Name: "123.dkr.ecr.us-east-1.amazonaws.com/charts/app", InlineVersion: "1.2.3", Username: "AWS", Password: "p@ss", HasUserinfo: true}},
		{"./charts/app", ChartRef{Source: ChartFromLocal, Name: "./charts/app"}},
		{"../app-1.0.0.tgz", ChartRef{Source: ChartFromLocal, Name: "../app-1.0.0.tgz", Packaged: true}},
		{"/abs/app", ChartRef{Source: ChartFromLocal, Name: "/abs/app"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseChart(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if _, err := ParseChart("oci://u:secret@host"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("an invalid oci reference must fail without echoing its password: %v", err)
	}
}

func TestParseRolloutTarget(t *testing.T) {
	for in, want := range map[string]string{
		"deploy/x": "Deployment", "ds/x": "DaemonSet", "sts/x": "StatefulSet", "Deployment/x": "Deployment",
		"deployment/x": "Deployment", "DEPLOYMENTS/x": "Deployment", "statefulsets.apps/x": "StatefulSet",
		"deployments.v1.apps/x": "Deployment", "Deployment.v1.apps/x": "Deployment", "DaemonSet.apps/x": "DaemonSet",
		"deploy.apps/x": "Deployment", "ds.v1.apps/x": "DaemonSet", "daemonset.v1.apps/x": "DaemonSet",
	} {
		kind, ref, err := ParseRolloutTarget(in)
		if err != nil || kind != want || ref.Name != "x" {
			t.Errorf("%s: %s %+v %v", in, kind, ref, err)
		}
	}
	for _, in := range []string{"cronjob/x", "pods/x", "DEPLOY/x", "deployment.v1/x", "deployments.extensions/x",
		"deployments.v1.apps.example.com/x", "Deployment.example.com/x", "deploy", "deployments..apps/x"} {
		if kind, _, err := ParseRolloutTarget(in); err == nil {
			t.Errorf("%s: accepted as %s", in, kind)
		}
	}
}
