package diff

import (
	"strings"
	"testing"

	"khook.io/core/redact"
)

// TestLearn: what the cluster holds where khook writes a secret is
// learned, so a rotated secret's old value is masked in any text, also
// one that shows another field or another object; nothing else is.
func TestLearn(t *testing.T) {
	for _, tc := range []struct {
		name            string
		desired, live   map[string]any
		masked, visible []string
	}{
		{
			name:    "a field khook writes whole",
			desired: map[string]any{"data": map[string]any{"token": rotNew, "plain": "kept"}},
			live:    map[string]any{"data": map[string]any{"token": rotOld, "plain": "kept"}},
			masked:  forms(rotOld)[:2], visible: []string{"kept"},
		},
		{
			name:    "a config file holding the secret teaches the secret, not the file",
			desired: map[string]any{"data": map[string]any{"cfg": "user: admin\npassword: " + rotNew + "\nport: 5432\n"}},
			live:    map[string]any{"data": map[string]any{"cfg": "user: admin\npassword: " + rotOld + "\nport: 5432\n"}},
			masked:  []string{rotOld}, visible: []string{"user: admin", "port: 5432"},
		},
		{
			name: "a list item found by name, and the last-applied copy",
			desired: map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "app", "env": []any{map[string]any{"name": "TOKEN", "value": rotNew}, map[string]any{"name": "MODE", "value": "prod"}}},
			}}},
			live: map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{"containers":[{"name":"app","env":[{"name":"MODE","value":"prod"},{"name":"TOKEN","value":"From-Annotation-Old"}]}]}}`}},
				"spec": map[string]any{"containers": []any{
					map[string]any{"name": "app", "env": []any{map[string]any{"name": "MODE", "value": "prod"}, map[string]any{"name": "TOKEN", "value": rotOld}}},
				}},
			},
			masked: []string{rotOld, "From-Annotation-Old"}, visible: []string{"prod"},
		},
		{
			name:    "a number written from a secret",
			desired: map[string]any{"spec": map[string]any{"port": rotNew}},
			live:    map[string]any{"spec": map[string]any{"port": int64(31337)}},
			masked:  []string{"31337"},
		},
		{
			name:    "a value too short to mask is not learned",
			desired: map[string]any{"data": map[string]any{"token": rotNew, "other": "xy"}},
			live:    map[string]any{"data": map[string]any{"token": "ab", "other": "xy"}},
			visible: []string{"ab", "xy"},
		},
		{
			name:    "fields khook writes no secret to teach nothing",
			desired: map[string]any{"data": map[string]any{"plain": "new-plain-value"}},
			live:    map[string]any{"data": map[string]any{"plain": "old-plain-value"}},
			visible: []string{"old-plain-value"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			red := rotatedRedactor()
			Learn(red, tc.desired, tc.live)
			for _, s := range tc.masked {
				if got := red.String("shown: " + s + "."); strings.Contains(got, s) {
					t.Errorf("%q is not masked: %s", s, got)
				}
			}
			for _, s := range tc.visible {
				if got := red.String("shown: " + s + "."); !strings.Contains(got, s) {
					t.Errorf("%q is masked: %s", s, got)
				}
			}
		})
	}
	// nil objects and redactors are no-ops
	Learn(nil, map[string]any{}, map[string]any{})
	Learn(redact.New(), nil, map[string]any{"a": "b"})
}
