package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"sigs.k8s.io/yaml"

	"khook.io/core/fetch"
	"khook.io/core/redact"
)

// ValuesSource is one valuesFrom entry: a local file (relative to
// Env.BaseDir) or an HTTP(S) URL.
type ValuesSource struct {
	File string
	URL  string
}

func (v ValuesSource) String() string {
	if v.File != "" {
		return v.File
	}
	return redact.StripURLUserinfo(v.URL)
}

// Values reads the valuesFrom sources in order and merges them, then
// inline on top, the way `helm -f a.yaml -f b.yaml` merges its files: maps
// merge key by key, at any depth; anything else (a scalar, a list, null)
// in a later source replaces what earlier ones said. The chart's own
// defaults are merged under the result by Helm.
func (c *Client) Values(ctx context.Context, from []ValuesSource, inline map[string]any) (map[string]any, error) {
	vals, err := c.values(ctx, from, inline)
	return vals, c.env.Redactor.Error(err)
}

func (c *Client) values(ctx context.Context, from []ValuesSource, inline map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for i, src := range from {
		var data []byte
		var err error
		switch {
		case src.File != "":
			p := src.File
			if !filepath.IsAbs(p) && c.env.BaseDir != "" {
				p = filepath.Join(c.env.BaseDir, p)
			}
			data, err = os.ReadFile(p)
		case src.URL != "":
			data, err = fetch.Get(ctx, c.env.httpClient(), src.URL)
		default:
			err = fmt.Errorf("neither file nor url")
		}
		if err != nil {
			return nil, fmt.Errorf("valuesFrom[%d] %s: %w", i, src, err)
		}
		m, err := parseValues(data)
		if err != nil {
			return nil, fmt.Errorf("valuesFrom[%d] %s: %w", i, src, err)
		}
		out = MergeValues(out, m)
	}
	if len(inline) > 0 {
		m, err := normalizeValues(inline)
		if err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
		out = MergeValues(out, m)
	}
	return out, nil
}

// parseValues reads a values document the way Helm reads -f files. An
// empty document is an empty map.
func parseValues(data []byte) (map[string]any, error) {
	m := map[string]any{}
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not a YAML mapping: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// normalizeValues turns values decoded from the spec into the shape Helm
// gives values files (string keys, JSON numbers), so that both merge
// alike and compare equal to what a release stores.
func normalizeValues(in map[string]any) (map[string]any, error) {
	data, err := json.Marshal(stringKeys(in))
	if err != nil {
		return nil, err
	}
	return parseValues(data)
}

// stringKeys converts map[any]any (YAML mappings with non-string keys) to
// map[string]any, at any depth.
func stringKeys(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = stringKeys(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = stringKeys(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = stringKeys(e)
		}
		return out
	}
	return v
}

// MergeValues merges override into base like Helm merges -f files (and
// returns the result; neither argument is changed): where both hold a map
// under a key, the maps merge recursively; otherwise override's value wins.
func MergeValues(base, override map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(override))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range override {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = MergeValues(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// sameValues reports whether two sets of values are equal once both are in
// the form a release stores (JSON).
func sameValues(a, b map[string]any) bool {
	na, err1 := jsonRoundTrip(a)
	nb, err2 := jsonRoundTrip(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(na, nb)
}

func jsonRoundTrip(m map[string]any) (any, error) {
	if len(m) == 0 {
		return map[string]any{}, nil
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(data, &out)
	return out, err
}
