package load

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestTriggeredByValidation: triggeredBy names steps among the step's
// needs, transitively; anything else is an error at its file:line.
func TestTriggeredByValidation(t *testing.T) {
	const steps = `  - name: config
    apply: {manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"}]}
  - name: mid
    needs: [config]
    wait: {for: delete, on: pods/x}
  - name: other
    wait: {for: delete, on: pods/y}
`
	tests := []struct {
		name     string
		restart  string // the restart step's needs and triggeredBy lines
		want     []string
		wantLine []int
	}{
		{"direct need", "    needs: [config]\n    triggeredBy: [config]\n", nil, nil},
		{"transitive need", "    needs: [mid]\n    triggeredBy: [config, mid]\n", nil, nil},
		{"not a need", "    needs: [mid]\n    triggeredBy: [other]\n",
			[]string{`steps[3].triggeredBy[0]: "other" is not among the needs of step "restart", directly or transitively`}, []int{15}},
		{"no needs", "    triggeredBy: [config]\n",
			[]string{"steps[3].triggeredBy: triggeredBy names steps among the step's needs, and it has none"}, []int{14}},
		{"unknown, itself, twice, empty", "    needs: [mid]\n    triggeredBy: [confg, restart, mid, mid, \"\"]\n",
			[]string{`steps[3].triggeredBy[0]: no step named "confg"`, `steps[3].triggeredBy[1]: a step cannot be triggered by itself`,
				`steps[3].triggeredBy[3]: "mid" is listed twice`, `steps[3].triggeredBy[4]: must not be empty`}, []int{15, 15, 15, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := envelope + steps + "  - name: restart\n" + tt.restart + "    rollout: {restart: deployment/web, namespace: default}\n"
			_, err := parseSpec(t, src)
			got := problems(t, err)
			if len(got) != len(tt.want) {
				t.Fatalf("problems:\n%s\nwant %d: %q", strings.Join(got, "\n"), len(tt.want), tt.want)
			}
			for k, w := range tt.want {
				if !strings.Contains(got[k], w) {
					t.Errorf("problem %d = %q, want it to contain %q", k, got[k], w)
				}
			}
			if err != nil {
				var lines []int
				for _, line := range strings.Split(err.Error(), "\n") {
					if strings.Contains(line, "triggeredBy") {
						var l, c int
						if i := strings.Index(line, "spec.yaml:"); i >= 0 {
							_, _ = sscan(line[i+len("spec.yaml:"):], &l, &c)
							lines = append(lines, l)
						}
					}
				}
				if !slices.Equal(lines, tt.wantLine) {
					t.Errorf("lines %v, want %v; error:\n%v", lines, tt.wantLine, err)
				}
			}
		})
	}
}

// sscan reads "LINE:COL" at the start of s.
func sscan(s string, l, c *int) (int, error) {
	return fmt.Sscanf(s, "%d:%d", l, c)
}
