// Package specgen generates large, valid specs for benchmarks: every step
// type, variables with defaults and pipelines, needs chains, and
// optionally a distinct when: on every step.
package specgen

import (
	"fmt"
	"strings"
)

// Spec generates an n-step spec that uses every step type, variables
// with defaults and pipelines, and needs chains; with when, every step has
// its own when: expression (all of one form, differing in a name).
func Spec(n int, when bool) string {
	if !when {
		return SpecWhen(n, nil)
	}
	return SpecWhen(n, func(i int) string {
		return fmt.Sprintf("vars.get(\"ENABLE_STEP_%d\", \"true\") == \"true\" && vars.ENV != \"off\"", i)
	})
}

// SpecWhen is Spec with when(i) as step i's when: (none when when is nil
// or returns "").
func SpecWhen(n int, when func(i int) string) string {
	var b strings.Builder
	b.WriteString("apiVersion: khook.io/v1\nkind: Khook\nmetadata:\n  name: big\ndefaults:\n  timeout: 5m\n  retries: 1\nsteps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - name: step-%d\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    needs: [step-%d]\n", i-1-(i%7)%i)
		}
		if when != nil {
			if w := when(i); w != "" {
				fmt.Fprintf(&b, "    when: %s\n", w)
			}
		}
		switch i % 7 {
		case 0:
			fmt.Fprintf(&b, `    helm:
      chart: app-%d
      repo: https://charts.example.com/${CHANNEL:-stable}
      version: 1.%d.0
      namespace: ns-%d
      createNamespace: true
      values:
        replicaCount: ${REPLICAS:-2}
        image: { repository: example/app, tag: "${TAG:-1.0}" }
        name: ${APP_%d:-app|lower|trunc 63}
`, i, i, i%20, i)
		case 1:
			fmt.Fprintf(&b, `    apply:
      namespace: ns-%d
      waitFor: condition=Available
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: cm-%d
            data:
              env: ${ENV:-dev}
`, i%20, i)
		case 2:
			fmt.Fprintf(&b, "    delete:\n      resource: daemonset/legacy-%d\n      namespace: kube-system\n", i)
		case 3:
			fmt.Fprintf(&b, "    patch:\n      target: deployment/app-%d\n      namespace: ns-%d\n      patch:\n        spec:\n          replicas: ${REPLICAS:-2}\n", i, i%20)
		case 4:
			fmt.Fprintf(&b, "    wait:\n      for: jsonpath={.status.readyReplicas}=2\n      on: deployment/app-%d\n      namespace: ns-%d\n", i, i%20)
		case 5:
			fmt.Fprintf(&b, "    rollout:\n      restart: deployment/app-%d\n      namespace: ns-%d\n", i, i%20)
		case 6:
			fmt.Fprintf(&b, "    job:\n      image: busybox:1.36\n      namespace: ns-%d\n      command: [sh, -c]\n      args: [\"echo ${ENV:-dev|upper} %d\"]\n", i%20, i)
		}
	}
	return b.String()
}
