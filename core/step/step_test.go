package step

import (
	"strings"
	"testing"

	"khook.io/core/redact"
)

func TestRedacted(t *testing.T) {
	const secret = "s3cr3t-value"
	r := redact.New()
	r.Add(secret)

	p := Prediction{Action: "create", Reason: "token " + secret, Details: []string{"a " + secret, "plain"}}
	got := p.Redacted(r)
	if strings.Contains(got.Reason+strings.Join(got.Details, ""), secret) || got.Details[1] != "plain" || got.Action != "create" {
		t.Errorf("Prediction.Redacted: %+v", got)
	}
	if p.Details[0] != "a "+secret {
		t.Errorf("Prediction.Redacted changed its receiver's details: %q", p.Details[0])
	}

	d := Diff{
		Skip:    "skip " + secret,
		Notes:   []string{"note " + secret},
		Changes: true,
		Objects: []ObjectDiff{{Name: "ConfigMap " + secret, Unavailable: "ns " + secret, Note: "n " + secret}},
	}
	gd := d.Redacted(r)
	o := gd.Objects[0]
	for _, s := range []string{gd.Skip, gd.Notes[0], o.Name, o.Unavailable, o.Note} {
		if strings.Contains(s, secret) || !strings.Contains(s, "***") {
			t.Errorf("Diff.Redacted left %q", s)
		}
	}
	if !gd.Changes || d.Objects[0].Name != "ConfigMap "+secret {
		t.Errorf("Diff.Redacted: changes %v, receiver's object %q", gd.Changes, d.Objects[0].Name)
	}
	if (Diff{}).Redacted(r).Objects != nil || (Prediction{}).Redacted(r).Details != nil {
		t.Error("Redacted turned nil slices into empty ones")
	}
}
