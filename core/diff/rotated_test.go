package diff

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"khook.io/core/redact"
)

// forms are the ways a secret value can be written into an object or
// shown: raw, base64 (standard and URL), sha256, upper and lower case,
// URL-encoded, JSON-escaped.
func forms(v string) []string {
	j, _ := json.Marshal(v)
	return []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.URLEncoding.EncodeToString([]byte(v)),
		fmt.Sprintf("%x", sha256.Sum256([]byte(v))), strings.ToUpper(v), strings.ToLower(v),
		url.QueryEscape(v), string(j[1 : len(j)-1])}
}

// rotated is the secret before and after the rotation; the old value has
// characters every encoding changes.
const (
	rotOld = "Old/S3cr3t+v4lue&<1>"
	rotNew = "New/S3cr3t+v4lue&<2>"
)

// rotatedRedactor knows what this run substituted: the new value and the
// pipeline outputs a spec made of it (${TOKEN|sha256sum}, ${TOKEN|upper}).
func rotatedRedactor() *redact.Redactor {
	red := redact.New()
	red.Add(rotNew)
	red.Add(fmt.Sprintf("%x", sha256.Sum256([]byte(rotNew))))
	red.Add(strings.ToUpper(rotNew))
	return red
}

// rotatedCases are objects after KHOOK_SECRET_TOKEN changed from rotOld to
// rotNew: the live version holds the old value (never registered), the
// merged version the new.
var rotatedCases = []struct {
	name         string
	live, merged string
}{
	{
		// server-side apply as khook leaves the last-applied copy alone:
		// the old value sits unchanged on both sides, in context lines
		name: "server-side-apply-keeps-old-annotation",
		live: `apiVersion: v1
kind: ConfigMap
metadata:
  name: ssa
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","data":{"level":"info","sha":"` + sha(rotOld) + `","token":"` + jsonEsc(rotOld) + `","up":"` + jsonEsc(strings.ToUpper(rotOld)) + `"},"kind":"ConfigMap","metadata":{"name":"ssa"}}
  labels: {tier: "1"}
data:
  level: info
  sha: ` + sha(rotOld) + `
  token: ` + q(rotOld) + `
  up: ` + q(strings.ToUpper(rotOld)) + `
`,
		merged: `apiVersion: v1
kind: ConfigMap
metadata:
  name: ssa
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","data":{"level":"info","sha":"` + sha(rotOld) + `","token":"` + jsonEsc(rotOld) + `","up":"` + jsonEsc(strings.ToUpper(rotOld)) + `"},"kind":"ConfigMap","metadata":{"name":"ssa"}}
  labels: {tier: "2"}
data:
  level: info
  sha: ` + sha(rotNew) + `
  token: ` + q(rotNew) + `
  up: ` + q(strings.ToUpper(rotNew)) + `
`,
	},
	{
		// an env var added before the secret one: pairing items by index
		// would compare the old token with another variable
		name: "env-list-reordered",
		live: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx
        env:
        - {name: TOKEN, value: ` + q(rotOld) + `}
        - {name: LEVEL, value: info}
`,
		merged: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx
        env:
        - {name: REGION, value: eu}
        - {name: TOKEN, value: ` + q(rotNew) + `}
        - {name: LEVEL, value: info}
`,
	},
	{
		// the secret inside a file, next to other changes
		name: "config-file",
		live: `apiVersion: v1
kind: ConfigMap
metadata: {name: file}
data:
  app.ini: |
    [server]
    port = 8080
    token = ` + rotOld + `
    hash = ` + sha(rotOld) + `
    level = info
`,
		merged: `apiVersion: v1
kind: ConfigMap
metadata: {name: file}
data:
  app.ini: |
    [server]
    port = 8081
    token = ` + rotNew + `
    hash = ` + sha(rotNew) + `
    level = info
`,
	},
	{
		// a Secret written with stringData: the server keeps data, and
		// client-side apply the stringData in the annotation
		name: "secret-string-data",
		live: `apiVersion: v1
kind: Secret
metadata:
  name: creds
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Secret","metadata":{"annotations":{},"name":"creds"},"stringData":{"token":"` + jsonEsc(rotOld) + `"}}
data:
  token: ` + base64.StdEncoding.EncodeToString([]byte(rotOld)) + `
`,
		merged: `apiVersion: v1
kind: Secret
metadata:
  name: creds
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Secret","metadata":{"annotations":{},"name":"creds"},"stringData":{"token":"` + jsonEsc(rotNew) + `"}}
data:
  token: ` + base64.StdEncoding.EncodeToString([]byte(rotNew)) + `
`,
	},
}

func sha(v string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(v))) }

// q is v as a YAML double-quoted scalar.
func q(v string) string { j, _ := json.Marshal(v); return string(j) }

// jsonEsc is v escaped inside a JSON string, as encoding/json writes it
// (the annotation kubectl writes escapes <, > and &).
func jsonEsc(v string) string { j, _ := json.Marshal(v); return string(j[1 : len(j)-1]) }

// TestPrepareRotatedSecret: after a rotation, no form of the old value
// (nor of the new) shows in either version or in their diff, the
// versions still differ, and what did not involve the secret still shows.
func TestPrepareRotatedSecret(t *testing.T) {
	for _, tc := range rotatedCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Prepare(obj(t, tc.live), obj(t, tc.merged), rotatedRedactor())
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
			golden(t, "rotated-"+tc.name+".diff", b.String())
			all := p.Live + p.Merged + b.String()
			for _, v := range []string{rotOld, rotNew} {
				for _, f := range forms(v) {
					if strings.Contains(all, f) {
						t.Errorf("the output holds %q (a form of %q):\n%s\n%s", f, v, p.Live, p.Merged)
					}
				}
			}
		})
	}
}

func TestSecretFields(t *testing.T) {
	red := rotatedRedactor()
	o := obj(t, rotatedCases[1].merged)
	var got []string
	for _, p := range SecretFields(o, red) {
		got = append(got, p.String())
	}
	if len(got) != 1 || got[0] != "spec.template.spec.containers[name=web].env[name=TOKEN].value" {
		t.Errorf("SecretFields = %v", got)
	}
	o = obj(t, "apiVersion: v1\nkind: X\nmetadata: {name: n}\nspec:\n  args: [a, "+q(rotNew)+"]\n  port: 7\n")
	red.Add("7")
	got = nil
	for _, p := range SecretFields(o, red) {
		got = append(got, p.String())
	}
	if strings.Join(sorted(got), " ") != "spec.args[1] spec.port" {
		t.Errorf("SecretFields = %v", got)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
