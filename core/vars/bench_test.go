package vars

import (
	"bytes"
	"fmt"
	"testing"

	"khook.io/core/redact"
)

// benchDoc generates a 500-step spec of about 15k lines with two references
// per step (1000 in all), one in five of them with a pipeline.
func benchDoc() []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: khook.io/v1\nkind: Khook\nmetadata:\n  name: ${CLUSTER}-bootstrap\nsteps:\n")
	for i := range 500 {
		fmt.Fprintf(&b, "  - name: step-%d\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    needs: [step-%d]\n", i-1)
		}
		b.WriteString("    timeout: 5m\n    retries: 2\n    helm:\n")
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "      chart: app-%d:${VERSION}\n", i)
			b.WriteString("      namespace: ${NAMESPACE | lower | trunc 63}\n")
		case 1:
			fmt.Fprintf(&b, "      chart: oci://${REGISTRY:-ghcr.io/org}/charts/app-%d\n", i)
			b.WriteString("      namespace: ${NAMESPACE}\n")
		case 2:
			fmt.Fprintf(&b, "      chart: app-%d\n      repo: https://${REPO_HOST:-charts.example.com}/stable\n", i)
			b.WriteString("      namespace: ${NAMESPACE:-default}\n")
		case 3:
			fmt.Fprintf(&b, "      chart: app-%d:${VERSION}\n", i)
			b.WriteString("      namespace: ${TOKEN|b64enc}\n")
		case 4:
			fmt.Fprintf(&b, "      chart: app-%d:${VERSION}\n", i)
			b.WriteString("      namespace: ${CLUSTER}\n")
		}
		b.WriteString("      atomic: true\n      wait: true\n      createNamespace: true\n      values:\n")
		for j := range 10 {
			fmt.Fprintf(&b, "        key%02d:\n          enabled: true\n", j)
		}
	}
	return b.Bytes()
}

func BenchmarkSubstitute(b *testing.B) {
	src := benchDoc()
	red := redact.New()
	set, err := Resolve(Options{
		Set:     []string{"CLUSTER=prod-eu-1", "VERSION=1.18.4"},
		Environ: []string{"KHOOK_VAR_NAMESPACE=Kube-System", "KHOOK_SECRET_TOKEN=s3cr3t-t0ken"},
	}, red)
	if err != nil {
		b.Fatal(err)
	}
	res := Substitute(src, set, red)
	if len(res.Problems) > 0 {
		b.Fatal(res.Problems)
	}
	b.Logf("%d bytes, %d lines, %d references", len(src), bytes.Count(src, []byte{'\n'}), len(res.spans))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		Substitute(src, set, red)
	}
}

// BenchmarkSourcePos measures 1000 lookups on a substituted 500-step spec
// (the line indexes are built by the first lookup, before the timer).
func BenchmarkSourcePos(b *testing.B) {
	src := benchDoc()
	set, _ := Resolve(Options{Set: []string{"CLUSTER=c", "VERSION=1", "NAMESPACE=n", "TOKEN=t"}}, nil)
	res := Substitute(src, set, nil)
	res.SourcePos(1, 1)
	b.ReportAllocs()
	for b.Loop() {
		for l := 1; l < 15000; l += 15 {
			res.SourcePos(l, 9)
		}
	}
}
