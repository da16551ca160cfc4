package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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
// gives values (string keys, maps and lists of any), keeping the spec's
// YAML types as `helm --set` keeps what it parses (helm's strvals): an
// integer stays an integer (int64), at any depth, where a JSON round trip
// (what Helm does to -f files) would make it a float64 that templates
// print as 2.0240101e+07; a float stays a float64, a string a string
// (decision 220).
func normalizeValues(in map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(in))
	for k, v := range in {
		n, err := normalizeValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = n
	}
	return out, nil
}

// normalizeValue is normalizeValues of one value: maps get string keys,
// integers of any Go type become int64 (an unsigned one too large for it
// a float64, as JSON would have it), floats float64; strings, booleans
// and null stay; anything else takes the JSON round trip Helm gives -f
// files.
func normalizeValue(v any) (any, error) {
	switch t := v.(type) {
	case nil, string, bool, int64, float64:
		return v, nil
	case map[string]any:
		return normalizeValues(t)
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = e
		}
		return normalizeValues(m)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			n, err := normalizeValue(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = n
		}
		return out, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), nil
		}
		return float64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
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
