package main

import (
	"testing"

	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/cli"
)

// TestRateLimits: helm's --qps and --burst-limit reach khook's clients when
// set; helm's defaults, which helm hands every plugin in HELM_QPS and
// HELM_BURST_LIMIT, leave khook's own limits.
func TestRateLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		args  []string
		qps   float32
		burst int
	}{
		{"helm's defaults, as helm exports them", map[string]string{"HELM_QPS": "0.00", "HELM_BURST_LIMIT": "100"}, nil, 0, 0},
		{"environment", map[string]string{"HELM_QPS": "5", "HELM_BURST_LIMIT": "7"}, nil, 5, 7},
		{"flags", nil, []string{"--qps", "3", "--burst-limit", "9"}, 3, 9},
		{"flags win over the environment", map[string]string{"HELM_QPS": "5", "HELM_BURST_LIMIT": "7"}, []string{"--qps", "2"}, 2, 7},
		{"no client-side throttling", nil, []string{"--qps=-1"}, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HELM_QPS", "")
			t.Setenv("HELM_BURST_LIMIT", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c := helmConnection{settings: cli.New()}
			fs := pflag.NewFlagSet("helm", pflag.ContinueOnError)
			c.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			qps, burst := c.RateLimits()
			if qps != tc.qps || burst != tc.burst {
				t.Errorf("RateLimits() = %v, %d; want %v, %d", qps, burst, tc.qps, tc.burst)
			}
		})
	}
}
