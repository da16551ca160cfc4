package kube

import (
	"bytes"
	"context"
	"testing"

	"k8s.io/client-go/rest"
)

// TestRoutedWarnings: a request whose context routes its warnings hands
// them to the step; any other to the clients' writer, once each.
func TestRoutedWarnings(t *testing.T) {
	var out bytes.Buffer
	h := routedWarnings{fallback: rest.NewWarningWriter(&out, rest.WarningWriterOptions{Deduplicate: true})}
	var step []string
	ctx := WithWarnings(context.Background(), func(s string) { step = append(step, s) })
	h.HandleWarningHeaderWithContext(ctx, 299, "", "unknown field \"dta\"")
	h.HandleWarningHeaderWithContext(ctx, 199, "", "not a warning code")
	h.HandleWarningHeaderWithContext(context.Background(), 299, "", "v1beta1 is deprecated")
	h.HandleWarningHeaderWithContext(context.Background(), 299, "", "v1beta1 is deprecated")
	if len(step) != 1 || step[0] != `unknown field "dta"` {
		t.Errorf("the step's: %q", step)
	}
	if out.String() != "Warning: v1beta1 is deprecated\n" {
		t.Errorf("the run's: %q", out.String())
	}
}
