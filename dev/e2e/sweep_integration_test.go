//go:build integration

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/testcluster"
)

// The two values the sweep plants as KHOOK_SECRET_TOKEN, one per round:
// mixed case (so upper and lower case differ from them), and characters
// that URL, base64url and JSON encodings each write differently.
const (
	sweepFirst  = "pl4nted/S3cret+tok&en=value"
	sweepSecond = "R0tated/S3cond+tok&en=other"
)

// secretForms are the encodings of s a leak could take.
func secretForms(s string) map[string]string {
	js, _ := json.Marshal(s)
	sum := sha256.Sum256([]byte(s))
	return map[string]string{
		"raw":           s,
		"base64":        base64.StdEncoding.EncodeToString([]byte(s)),
		"base64 raw":    base64.RawStdEncoding.EncodeToString([]byte(s)),
		"base64url":     base64.URLEncoding.EncodeToString([]byte(s)),
		"base64url raw": base64.RawURLEncoding.EncodeToString([]byte(s)),
		"sha256":        hex.EncodeToString(sum[:]),
		"upper":         strings.ToUpper(s),
		"lower":         strings.ToLower(s),
		"query-escaped": url.QueryEscape(s),
		"path-escaped":  url.PathEscape(s),
		"JSON-escaped":  strings.Trim(string(js), `"`),
	}
}

// sweeper checks every text it is given for every form of both planted
// values, whichever round planted which.
type sweeper struct {
	t      *testing.T
	forms  map[string]string // form -> "which value, which encoding"
	checks int
}

func newSweeper(t *testing.T) *sweeper {
	s := &sweeper{t: t, forms: map[string]string{}}
	for _, v := range []string{sweepFirst, sweepSecond} {
		for enc, f := range secretForms(v) {
			s.forms[f] = fmt.Sprintf("%s of %q", enc, v)
		}
	}
	return s
}

func (s *sweeper) check(what, text string) {
	s.t.Helper()
	s.checks++
	for f, name := range s.forms {
		if strings.Contains(text, f) {
			s.t.Errorf("%s shows the planted secret (%s):\n%s", what, name, text)
		}
	}
}

func (s *sweeper) result(what string, res Result) {
	s.t.Helper()
	if res.Code > 3 {
		s.t.Errorf("%s: exit %d\n%s", what, res.Code, res.Stderr)
	}
	s.check(what+" (stdout)", res.Stdout)
	s.check(what+" (stderr)", res.Stderr)
}

// files checks every file under dir.
func (s *sweeper) files(what, dir string) int {
	s.t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		s.check(what+" "+filepath.Base(p), string(data))
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// TestSecretSweep runs every command in every output format, twice with
// KHOOK_SECRET_TOKEN set to one value and then rotated to another, over a
// spec that writes the secret into a ConfigMap (raw and through pipelines),
// a Secret, a server-side apply, a helm value, a patch, a wait that
// reports the value it saw and a failing Job whose log echoes it, with the
// state record on. No output may show either value in any encoding:
// standard output and error, JSON and YAML, client logs, the files handed
// to KUBECTL_EXTERNAL_DIFF, and the state record.
func TestSecretSweep(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "sweep")
	dir := t.TempDir()
	logFile := filepath.Join(dir, "pod.log")
	// the Job's log echoes the round's value (khook cannot know a value
	// it was never given)
	podLog := func(token string) {
		t.Helper()
		text := fmt.Sprintf("2026-11-22T05:00:01Z stdout F token %s\n2026-11-22T05:00:02Z stdout F base64 %s\n", token, base64.StdEncoding.EncodeToString([]byte(token)))
		if err := os.WriteFile(logFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	podLog(sweepFirst)
	serveLogs(t, ns, logFile)
	copyDir(t, chartrepo.ChartDir("demo"), filepath.Join(dir, "demo"))
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: sweep}
state: {namespace: %[1]s}
defaults: {onError: continue}
steps:
  - name: config
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: creds}
            data:
              token: "${TOKEN}"
              b64: "${TOKEN|b64enc}"
              upper: "${TOKEN|upper}"
              sum: "${TOKEN|sha256sum}"
            --- # the Secret
            apiVersion: v1
            kind: Secret
            metadata: {name: creds}
            stringData: {token: "${TOKEN}"}
  - name: server-side
    apply:
      namespace: %[1]s
      serverSide: true
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: ssa}
            data: {token: "${TOKEN}"}
  - name: seen-value
    needs: [config]
    timeout: 2s
    wait: {for: "jsonpath={.data.token}=something-else", on: configmap/creds, namespace: %[1]s}
  - name: chart
    helm:
      chart: ./demo
      namespace: %[1]s
      values: {greeting: "${TOKEN}"}
  - name: patched
    needs: [config]
    patch:
      target: configmap/creds
      namespace: %[1]s
      type: merge
      patch: {data: {patched: "${TOKEN}"}}
  - name: migrate
    job:
      image: busybox
      namespace: %[1]s
      args: ["--token=${TOKEN}"]
      env: {KHOOK_TEST_EXIT_CODE: "1", TOKEN: "${TOKEN}"}
`, ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	extDiff := filepath.Join(dir, "record-diff")
	extRec := filepath.Join(dir, "external-diff")
	if err := os.WriteFile(extDiff, []byte("#!/bin/sh\ncp -r \"$1\" \"$2\" \"$EXT_REC/\"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(extRec, 0o755); err != nil {
		t.Fatal(err)
	}
	sw := newSweeper(t)

	commands := [][]string{
		{"validate", "-f", spec},
		{"validate", "-f", spec, "-o", "json"},
		{"plan", "-f", spec, "--offline"},
		{"plan", "-f", spec},
		{"plan", "-f", spec, "-o", "json"},
		{"plan", "-f", spec, "-o", "yaml"},
		{"graph", "-f", spec},
		{"diff", "-f", spec},
		{"apply", "-f", spec, "-v", "6"},
		{"status", "-f", spec},
		{"status", "-f", spec, "-o", "json"},
		{"diff", "-f", spec},
		{"apply", "-f", spec, "-o", "json"},
		{"status", "-f", spec, "-o", "json"},
	}
	for round, token := range []string{sweepFirst, sweepSecond} {
		podLog(token)
		env := kubeEnv(t, "KHOOK_SECRET_TOKEN="+token, "EXT_REC="+extRec)
		// before apply, what it would change (the first round: create;
		// the second: the rotated value over the first), as the folders
		// handed to the external program hold it
		res := run(t, bins.Kubectl, append(env, "KUBECTL_EXTERNAL_DIFF="+extDiff), "", "diff", "-f", spec)
		sw.result(fmt.Sprintf("round %d: diff with KUBECTL_EXTERNAL_DIFF", round+1), res)
		if res.Code != 1 {
			t.Errorf("round %d: diff with KUBECTL_EXTERNAL_DIFF: exit %d, want 1 (differences)\n%s\n%s", round+1, res.Code, res.Stdout, res.Stderr)
		}
		for _, args := range commands {
			what := fmt.Sprintf("round %d: kubectl khook %s", round+1, strings.Join(args[:1], " ")+" "+strings.Join(args[3:], " "))
			sw.result(what, run(t, bins.Kubectl, env, "", args...))
		}
		for _, args := range [][]string{{"plan", "-f", spec, "-o", "json"}, {"diff", "-f", spec}, {"status", "-f", spec}} {
			sw.result(fmt.Sprintf("round %d: helm khook %s", round+1, strings.Join(args, " ")), run(t, bins.Helm, env, "", args...))
		}
		sw.record(t, ns)
	}
	if n := sw.files("a file handed to KUBECTL_EXTERNAL_DIFF:", extRec); n == 0 {
		t.Error("the external diff program was handed no files")
	}
	env := kubeEnv(t, "KHOOK_SECRET_TOKEN="+sweepSecond)
	for _, args := range [][]string{{"destroy", "--yes", "-f", spec, "-o", "json"}, {"apply", "-f", spec}, {"destroy", "--yes", "-f", spec}} {
		sw.result("kubectl khook "+strings.Join(args, " "), run(t, bins.Kubectl, env, "", args...))
	}
	// the applied ConfigMap holds the secret: the sweep would have seen
	// it had anything printed it
	if sw.checks < 60 {
		t.Errorf("only %d outputs checked", sw.checks)
	}
}

// record checks the state record Secret, as stored.
func (s *sweeper) record(t *testing.T, ns string) {
	t.Helper()
	sec, err := typed(t).CoreV1().Secrets(ns).Get(context.Background(), "khook-state-sweep", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the state record: %v", err)
	}
	for k, v := range sec.Data {
		s.check("the state record's "+k, string(v))
	}
	for k, v := range sec.Annotations {
		s.check("the state record's annotation "+k, v)
	}
}
