package kubeyaml

import (
	"fmt"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// benchStream is a large manifest bundle: 300 Deployments and a CRD with
// a deep schema, about 1.5 MB, separated by "---" and "--- # comment".
func benchStream() []byte {
	var b strings.Builder
	b.WriteString("# a bundle\n")
	for i := range 300 {
		sep := "---\n"
		if i%2 == 1 {
			sep = "--- # deployment " + fmt.Sprint(i) + "\n"
		}
		fmt.Fprintf(&b, `%sapiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%[2]d
  labels: {app: web-%[2]d, tier: frontend}
  annotations:
    description: |
      A deployment with a block scalar.
      ---
      ... not a separator, not an end marker
spec:
  replicas: 3
  selector:
    matchLabels: {app: web-%[2]d}
  template:
    metadata:
      labels: {app: web-%[2]d}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          args: ["--port", "8080", "--verbose"]
          ports: [{containerPort: 8080, name: http}]
          env:
            - {name: A, value: "1"}
            - {name: B, value: "yes"}
          resources:
            limits: {cpu: 500m, memory: 128Mi}
            requests: {cpu: 100m, memory: 64Mi}
`, sep, i)
	}
	b.WriteString("---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "          field%d:\n            type: string\n            description: field number %d of the widget\n", i, i)
	}
	return []byte(b.String())
}

func BenchmarkDecode(b *testing.B) {
	data := benchStream()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		objs, err := Decode(data)
		if err != nil || len(objs) != 301 {
			b.Fatal(len(objs), err)
		}
	}
}

// BenchmarkKubectl is kubectl's reader on the same stream, each document
// decoded as Decode decodes it: the baseline.
func BenchmarkKubectl(b *testing.B) {
	data := benchStream()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		docs, err := kubectlRead(data)
		if err != nil || len(docs) != 301 {
			b.Fatal(len(docs), err)
		}
		for _, d := range docs {
			var v any
			if err := utiljson.Unmarshal(d, &v); err != nil {
				b.Fatal(err)
			}
		}
	}
}
