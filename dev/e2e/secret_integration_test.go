//go:build integration

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/testcluster"
)

const planted = "pl4nted/S3cret+token=value"

func plantedForms() []string {
	return []string{planted, base64.StdEncoding.EncodeToString([]byte(planted)), url.QueryEscape(planted), url.PathEscape(planted)}
}

// serveLogs makes kwok serve file as the log of every container in ns.
func serveLogs(t *testing.T, ns, file string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(testcluster.Get(t).RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterlogs"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
		"metadata": map[string]any{"name": ns},
		"spec": map[string]any{
			"selector": map[string]any{"matchNamespaces": []any{ns}},
			"logs":     []any{map[string]any{"logsFile": file}},
		},
	}}
	if _, err := dyn.Resource(gvr).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), ns, metav1.DeleteOptions{}) })
}

// TestPlantedSecretNeverPrinted plants a secret through KHOOK_SECRET_TOKEN
// and uses it in a manifest, a helm value echoed by a failing template, a
// wait whose timeout reports the value it saw, and a failing Job whose log
// lines (served by kwok) echo it. No output of apply, plan, destroy, in
// text or JSON, on stdout or stderr, may carry it or its encodings.
func TestPlantedSecretNeverPrinted(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "secret")
	dir := t.TempDir()
	logFile := filepath.Join(dir, "pod.log")
	var log strings.Builder
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&log, "2026-11-22T05:00:0%dZ stdout F step %d\n", i, i)
	}
	fmt.Fprintf(&log, "2026-11-22T05:00:06Z stdout F connecting with token %s\n", planted)
	fmt.Fprintf(&log, "2026-11-22T05:00:07Z stdout F base64 %s\n", base64.StdEncoding.EncodeToString([]byte(planted)))
	if err := os.WriteFile(logFile, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	serveLogs(t, ns, logFile)
	copyDir(t, chartrepo.ChartDir("demo"), filepath.Join(dir, "demo"))
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: secret}
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
            data: {token: "${TOKEN}", b64: "${TOKEN|b64enc}"}
  - name: seen-value
    needs: [config]
    timeout: 1s
    wait: {for: "jsonpath={.data.token}=something-else", on: configmap/creds, namespace: %[1]s}
  - name: chart
    helm:
      chart: ./demo
      namespace: %[1]s
      values: {failWith: "${TOKEN}"}
  - name: migrate
    job:
      image: busybox
      namespace: %[1]s
      args: ["--token=${TOKEN}"]
      env: {KHOOK_TEST_EXIT_CODE: "1", TOKEN: "${TOKEN}"}
`, ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := kubeEnv(t, "KHOOK_SECRET_TOKEN="+planted)
	check := func(what string, res Result) {
		t.Helper()
		for _, f := range plantedForms() {
			if strings.Contains(res.Stdout, f) || strings.Contains(res.Stderr, f) {
				t.Errorf("%s leaked %q:\nstdout:\n%s\nstderr:\n%s", what, f, res.Stdout, res.Stderr)
			}
		}
	}
	for _, args := range [][]string{{"apply", "-f", spec}, {"apply", "-f", spec, "-o", "json"}, {"apply", "-f", spec, "-v", "7"}} {
		res := run(t, bins.Kubectl, env, "", args...)
		if slices.Contains(args, "-v") && !strings.Contains(res.Stderr, `"Request" verb="GET"`) {
			// client-go's request log (with headers at 7) is on, and masked
			t.Errorf("%v: no client-go request log on stderr:\n%s", args, res.Stderr)
		}
		if res.Code != 1 {
			t.Fatalf("%v: want exit 1 (three steps fail), got %d\n%s", args, res.Code, res.Stderr)
		}
		check(strings.Join(args, " "), res)
		t.Logf("%v:\n%s", args, res.Stdout)
		// the failures must be reported, masked: the job's log lines, the
		// template's echo and the value the wait saw
		for _, want := range []string{"connecting with token ***", "refusing to render with failWith=***", "***"} {
			if !strings.Contains(res.Stdout, want) {
				t.Errorf("%v: the summary lacks %q:\n%s", args, want, res.Stdout)
			}
		}
	}
	for _, args := range [][]string{{"plan", "-f", spec}, {"plan", "-f", spec, "-o", "json"}, {"plan", "-f", spec, "-o", "yaml"}, {"destroy", "--yes", "-f", spec}, {"destroy", "--yes", "-f", spec, "-o", "json"}} {
		check(strings.Join(args, " "), run(t, bins.Kubectl, env, "", args...))
		check("helm khook "+strings.Join(args, " "), run(t, bins.Helm, env, "", args...))
	}
}
