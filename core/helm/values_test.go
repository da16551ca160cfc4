package helm

import (
	"bytes"
	"reflect"
	"testing"
	"text/template"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v4/pkg/strvals"
)

// TestValuesAsSet: integers of values: are what helm install --set makes
// of the same text (helm's own strvals), at any depth; a JSON round trip,
// what helm does to -f files, would make them floats (decision 220).
func TestValuesAsSet(t *testing.T) {
	for _, c := range []struct{ spec, set string }{
		{"tag: 20240101", "tag=20240101"},
		{"replicas: 3", "replicas=3"},
		{"nested: {n: 1234567, deeper: {m: 9007199254740993}}", "nested.n=1234567,nested.deeper.m=9007199254740993"},
		{"list: [20240101, 2]", "list={20240101,2}"},
		{"flag: true\nname: web\nnone: null", "flag=true,name=web,none=null"},
	} {
		var in map[string]any
		if err := yaml.Unmarshal([]byte(c.spec), &in); err != nil {
			t.Fatal(err)
		}
		got, err := normalizeValues(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := strvals.Parse(c.set)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("values: %s = %#v; --set %s = %#v", c.spec, got, c.set, want)
		}
	}
	// what a template prints of them: --set's, not -f's
	in := map[string]any{"tag": 20240101}
	got, _ := normalizeValues(in)
	file, _ := parseValues([]byte("tag: 20240101"))
	print := func(v map[string]any) string {
		var b bytes.Buffer
		if err := template.Must(template.New("").Parse("{{ .tag }}")).Execute(&b, v); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if p, f := print(got), print(file); p != "20240101" || f != "2.0240101e+07" {
		t.Errorf("printed: values %q, a values file %q", p, f)
	}
	// a float stays the float YAML wrote (--set would keep the text)
	got, _ = normalizeValues(map[string]any{"ratio": 1.0, "keys": map[any]any{1: uint8(2)}})
	if !reflect.DeepEqual(got, map[string]any{"ratio": 1.0, "keys": map[string]any{"1": int64(2)}}) {
		t.Errorf("float and typed ints: %#v", got)
	}
}
