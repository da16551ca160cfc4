package cli

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/version"
)

// TestVersionOptions: version's options built alone print the build's
// version under the plugin's name, as text or JSON.
func TestVersionOptions(t *testing.T) {
	info := version.Info{Version: "v1.2.3", Commit: "abc", Date: "2026-01-02", Platform: "linux/amd64", GoVersion: "go1.25"}
	for _, tc := range []struct {
		output string
		want   string
	}{
		{"text", "helm khook v1.2.3\ncommit: abc\ndate: 2026-01-02\nplatform: linux/amd64\ngo: go1.25\n"},
		{"json", ""},
	} {
		t.Run(tc.output, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			f := NewVersionFlags()
			if err := f.Output.Set(tc.output); err != nil {
				t.Fatal(err)
			}
			o, err := f.ToOptions("helm khook", streams)
			if err != nil {
				t.Fatal(err)
			}
			o.Info = info
			if err := o.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.output == "text" {
				if out.String() != tc.want {
					t.Errorf("got %q, want %q", out.String(), tc.want)
				}
				return
			}
			var got version.Info
			if err := json.Unmarshal(out.Bytes(), &got); err != nil || got != info {
				t.Errorf("JSON %s: %+v, %v", out.String(), got, err)
			}
		})
	}
}
