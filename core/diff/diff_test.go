package diff

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"khook.io/core/redact"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./diff -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./diff -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	if y == "" {
		return nil
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const (
	newToken = "tok-NEW-7f3a9c"
	oldToken = "tok-OLD-41bd22" // rotated away: never registered
)

func redactor() *redact.Redactor {
	red := redact.New()
	red.Add(newToken)
	return red
}

// The cases of TestPrepareGolden: an object's live and merged versions.
var prepareCases = []struct {
	name         string
	live, merged string
	// never must not appear anywhere in the output
	never []string
}{
	{
		name: "configmap-changed-managed-fields-hidden",
		live: `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: web
  resourceVersion: "41"
  managedFields:
  - manager: khook
    operation: Apply
    time: "2026-01-01T00:00:00Z"
data:
  a: "1"
  b: "2"
  c: same
`,
		merged: `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: web
  resourceVersion: "41"
  managedFields:
  - manager: khook
    operation: Apply
    time: "2026-02-02T00:00:00Z"
data:
  a: "1"
  b: "3"
  c: same
  d: added
`,
		never: []string{"managedFields", "manager"},
	},
	{
		name: "secret-values-masked",
		live: `apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: web
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Secret","metadata":{"name":"creds","namespace":"web"},"stringData":{"password":"hunter2","user":"admin"}}
data:
  password: aHVudGVyMg==
  user: YWRtaW4=
  removed: Z29uZQ==
type: Opaque
`,
		merged: `apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: web
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Secret","metadata":{"name":"creds","namespace":"web"},"stringData":{"password":"correct-horse","user":"admin"}}
data:
  password: Y29ycmVjdC1ob3JzZQ==
  user: YWRtaW4=
  added: bmV3
type: Opaque
`,
		never: []string{"hunter2", "aHVudGVyMg", "correct-horse", "Y29ycmVjdC1ob3JzZQ", "YWRtaW4", "admin", "Z29uZQ", "bmV3"},
	},
	{
		name: "secret-created-stringdata",
		merged: `apiVersion: v1
kind: Secret
metadata:
  name: fresh
stringData:
  token: plain-text-value
`,
		never: []string{"plain-text-value"},
	},
	{
		name: "registered-secret-in-configmap-rotated",
		live: `apiVersion: v1
kind: ConfigMap
metadata:
  name: planted
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","data":{"level":"info","token":"` + oldToken + `"},"kind":"ConfigMap","metadata":{"name":"planted"}}
data:
  level: info
  token: ` + oldToken + `
  url: https://u:` + oldToken + `@example.com/x
  header: Bearer ` + oldToken + ` (v1)
`,
		merged: `apiVersion: v1
kind: ConfigMap
metadata:
  name: planted
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","data":{"level":"debug","token":"` + newToken + `"},"kind":"ConfigMap","metadata":{"name":"planted"}}
data:
  level: debug
  token: ` + newToken + `
  url: https://u:` + newToken + `@example.com/x
  header: Bearer ` + newToken + ` (v1)
  encoded: ` + base64.StdEncoding.EncodeToString([]byte(newToken)) + `
`,
		never: []string{newToken, oldToken, base64.StdEncoding.EncodeToString([]byte(newToken))},
	},
	{
		name: "registered-secret-unchanged",
		live: `apiVersion: v1
kind: ConfigMap
metadata: {name: same-token}
data: {token: ` + newToken + `, v: "1"}
`,
		merged: `apiVersion: v1
kind: ConfigMap
metadata: {name: same-token}
data: {token: ` + newToken + `, v: "2"}
`,
		never: []string{newToken},
	},
	{
		name: "deleted",
		live: `apiVersion: v1
kind: ConfigMap
metadata: {name: gone, namespace: web}
data: {token: ` + newToken + `}
`,
		never: []string{newToken},
	},
}

// TestPrepareGolden renders each case as diff prints it: Prepare, then
// Unified.
func TestPrepareGolden(t *testing.T) {
	for _, tc := range prepareCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Prepare(obj(t, tc.live), obj(t, tc.merged), redactor())
			if err != nil {
				t.Fatal(err)
			}
			if !p.Changed() {
				t.Fatal("the versions differ, Prepare made them equal")
			}
			var b bytes.Buffer
			if err := Unified(&b, "live   "+tc.name, "merged "+tc.name, p.Live, p.Merged, false); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".diff", b.String())
			for _, s := range tc.never {
				if strings.Contains(p.Live+p.Merged+b.String(), s) {
					t.Errorf("the output holds %q", s)
				}
			}
		})
	}
}

func TestPrepareLeavesItsInputAlone(t *testing.T) {
	tc := prepareCases[1]
	live, merged := obj(t, tc.live), obj(t, tc.merged)
	before := live.DeepCopy()
	if _, err := Prepare(live, merged, redactor()); err != nil {
		t.Fatal(err)
	}
	if !equalObjects(before, live) {
		t.Error("Prepare modified the live object")
	}
}

func equalObjects(a, b *unstructured.Unstructured) bool {
	ja, _ := a.MarshalJSON()
	jb, _ := b.MarshalJSON()
	return bytes.Equal(ja, jb)
}

func TestPrepareUnchangedIsEqual(t *testing.T) {
	for _, tc := range prepareCases {
		for _, y := range []string{tc.live, tc.merged} {
			if y == "" {
				continue
			}
			p, err := Prepare(obj(t, y), obj(t, y), redactor())
			if err != nil {
				t.Fatal(err)
			}
			if p.Changed() {
				t.Errorf("%s: an object compared with itself differs:\n%s\n%s", tc.name, p.Live, p.Merged)
			}
		}
	}
}

// TestManagedFieldsOnlyIsNoChange: only managedFields differ, as after a
// no-op server-side apply.
func TestManagedFieldsOnlyIsNoChange(t *testing.T) {
	tc := prepareCases[0]
	live := obj(t, tc.live)
	merged := live.DeepCopy()
	merged.SetManagedFields(nil)
	p, err := Prepare(live, merged, redactor())
	if err != nil {
		t.Fatal(err)
	}
	if p.Changed() {
		t.Errorf("managed fields must be hidden:\n%s\n%s", p.Live, p.Merged)
	}
}

func TestMaskStrings(t *testing.T) {
	red := redactor()
	tests := []struct {
		a, b, wantA, wantB string
	}{
		{"plain", "plain", "plain", "plain"},
		{"v1", "v2", "v1", "v2"},
		{newToken, newToken, Mask, Mask},
		{oldToken, newToken, MaskBefore, MaskAfter},
		{newToken, "typed-in-clear", MaskBefore, MaskAfter},
		{"key=" + oldToken + ";x", "key=" + newToken + ";x", "key=" + MaskBefore + ";x", "key=" + MaskAfter + ";x"},
		{"a " + newToken + " b1", "a " + newToken + " b2", "a " + Mask + " b1", "a " + Mask + " b2"},
		{"héllo " + oldToken + "é", "héllo " + newToken + "é", "héllo " + MaskBefore + "é", "héllo " + MaskAfter + "é"},
		{`{"t":"` + oldToken + `","v":1}`, `{"t":"` + newToken + `","v":2}`, `{"t":"` + MaskBefore + `","v":1}`, `{"t":"` + MaskAfter + `","v":2}`},
	}
	for _, tt := range tests {
		a, b := maskStrings(red, tt.a, tt.b)
		if a != tt.wantA || b != tt.wantB {
			t.Errorf("maskStrings(%q, %q) = %q, %q; want %q, %q", tt.a, tt.b, a, b, tt.wantA, tt.wantB)
		}
	}
}

func TestUnifiedColor(t *testing.T) {
	var b bytes.Buffer
	if err := Unified(&b, "live   ConfigMap x", "merged ConfigMap x", "a: 1\nb: 2\nc: 3\n", "a: 1\nb: 3\nc: 3\nd: 4\n", true); err != nil {
		t.Fatal(err)
	}
	golden(t, "color.diff", b.String())
}

func TestUnifiedEdges(t *testing.T) {
	tests := []struct{ name, a, b string }{
		{"created", "", "a: 1\nb: 2\n"},
		{"deleted", "a: 1\n", ""},
		{"no-final-newline", "a: 1", "a: 2"},
		{"far-apart", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\nY\n12\n"},
		{"equal", "a: 1\n", "a: 1\n"},
	}
	var all strings.Builder
	for _, tt := range tests {
		all.WriteString("## " + tt.name + "\n")
		if err := Unified(&all, "a", "b", tt.a, tt.b, false); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "edges.diff", all.String())
}

func TestParseProgram(t *testing.T) {
	tests := []struct {
		env  string
		want Program
	}{
		{"", Program{}},
		{"meld", Program{Path: "meld"}},
		{"colordiff -N -u", Program{Path: "colordiff", Args: []string{"-N", "-u"}}},
		// kubectl keeps only words of letters, digits, '-' and '=' (they
		// are arguments, never run by a shell)
		{"diff -u --color=always ; rm -rf / $(x)", Program{Path: "diff", Args: []string{"-u", "--color=always", "rm", "-rf"}}},
		{"dyff  between", Program{Path: "dyff", Args: []string{"between"}}},
	}
	for _, tt := range tests {
		got := ParseProgram(tt.env)
		if got.Path != tt.want.Path || strings.Join(got.Args, "|") != strings.Join(tt.want.Args, "|") {
			t.Errorf("ParseProgram(%q) = %+v, want %+v", tt.env, got, tt.want)
		}
	}
}

func TestFileName(t *testing.T) {
	tests := []struct{ y, want string }{
		{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: prod}\n", "app.apps.v1.Deployment.prod.web"},
		{"apiVersion: v1\nkind: Namespace\nmetadata: {name: prod}\n", "app.v1.Namespace..prod"},
	}
	for _, tt := range tests {
		if got := FileName("app", obj(t, tt.y)); got != tt.want {
			t.Errorf("FileName = %q, want %q", got, tt.want)
		}
	}
}

// TestExternalProgram runs a script in kubectl's place for diff(1) and
// reads its exit status kubectl's way.
func TestExternalProgram(t *testing.T) {
	trees, err := NewTrees()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = trees.Remove() }()
	if err := trees.Add("s.v1.ConfigMap.ns.a", Pair{Live: "a: 1\n", Merged: "a: 2\n"}); err != nil {
		t.Fatal(err)
	}
	if err := trees.Add("s.v1.ConfigMap.ns.a", Pair{Merged: "dup: 1\n"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "fake-diff")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"args: $*\"\nls \"$1\" \"$2\"\nexit \"$EXIT\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		exit        string
		differences bool
		err         bool
	}{{"0", false, false}, {"1", true, false}, {"2", false, true}} {
		var out, errOut bytes.Buffer
		differences, err := Program{Path: script, Args: []string{"-u"}}.Run(context.Background(), trees, &out, &errOut, []string{"EXIT=" + tc.exit})
		if differences != tc.differences || (err != nil) != tc.err {
			t.Errorf("exit %s: differences %v, err %v", tc.exit, differences, err)
		}
		want := "args: " + trees.Live + " " + trees.Merged + " -u\n"
		if !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "s.v1.ConfigMap.ns.a.2") {
			t.Errorf("exit %s: output %q", tc.exit, out.String())
		}
	}
	if _, err := (Program{Path: filepath.Join(dir, "missing")}).Run(context.Background(), trees, &bytes.Buffer{}, &bytes.Buffer{}, nil); err == nil {
		t.Error("a program that cannot run must be an error")
	}
	live, _ := os.ReadDir(trees.Live)
	merged, _ := os.ReadDir(trees.Merged)
	if len(live) != 1 || len(merged) != 2 {
		t.Errorf("trees: %d live files, %d merged files; want 1 and 2", len(live), len(merged))
	}
}

// TestMaskStringsProperties: for a string whose registered value replaces
// an old one wherever it sits, neither value is ever shown, and different
// versions never look the same.
func TestMaskStringsProperties(t *testing.T) {
	red := redactor()
	around := []string{"", "x", "key=", "é", " ", "Bearer ", `{"a":`, "tok-", "-NEW"}
	for _, pre := range around {
		for _, post := range around {
			for _, other := range []string{"", "v2", newToken} {
				a := pre + oldToken + post
				b := pre + newToken + post + other
				ma, mb := maskStrings(red, a, b)
				for _, s := range []string{oldToken, newToken} {
					if strings.Contains(ma+mb, s) {
						t.Errorf("maskStrings(%q, %q) = %q, %q: shows %q", a, b, ma, mb, s)
					}
				}
				if ma == mb {
					t.Errorf("maskStrings(%q, %q): both %q", a, b, ma)
				}
			}
		}
	}
}

// TestPrepareMasksKeysAndNumbers: a registered value that is a map key or
// a number is masked too.
func TestPrepareMasksKeysAndNumbers(t *testing.T) {
	red := redactor()
	red.Add("918273645")
	live := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\ndata: {"+newToken+": a}\n")
	merged := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\ndata: {"+newToken+": b}\nport: 918273645\n")
	p, err := Prepare(live, merged, red)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Live+p.Merged, newToken) || strings.Contains(p.Merged, "918273645") || !p.Changed() {
		t.Errorf("not masked:\n%s\n%s", p.Live, p.Merged)
	}
}
