package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"khook.io/core/testing/testenv"
)

var bins Binaries

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "khook-e2e-")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(tmp)
		bins, err = Build(tmp)
		if err != nil {
			println("e2e: " + err.Error())
			return 1
		}
		return runTests(m) // with the test cluster under the integration tag
	}()
	os.Exit(code)
}

func root(t testing.TB) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func run(t testing.TB, bin string, env []string, stdin string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, root(t), bin, env, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBothPluginsValidateEveryExample: the same result from both binaries.
func TestBothPluginsValidateEveryExample(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root(t), "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root(t), f)
		t.Run(filepath.Base(f), func(t *testing.T) {
			k := run(t, bins.Kubectl, nil, "", "validate", "-f", rel)
			h := run(t, bins.Helm, nil, "", "validate", "-f", rel)
			if k.Code != 0 || h.Code != 0 {
				t.Fatalf("exit codes %d and %d:\n%s\n%s", k.Code, h.Code, k.Stderr, h.Stderr)
			}
			if k.Stdout != h.Stdout || !strings.Contains(k.Stdout, "is valid") {
				t.Fatalf("different results:\nkubectl khook: %q\nhelm khook:    %q", k.Stdout, h.Stdout)
			}
		})
	}
}

// TestOfflinePlanWithoutKubeconfig: plan works with no kubeconfig at all,
// and with one pointing at nothing when --offline is set.
func TestOfflinePlanWithoutKubeconfig(t *testing.T) {
	for _, env := range [][]string{
		{"KUBECONFIG=" + filepath.Join(t.TempDir(), "missing")},
		{"KUBECONFIG=" + writeKubeconfig(t, "https://127.0.0.1:1")},
	} {
		for _, bin := range []string{bins.Kubectl, bins.Helm} {
			res := run(t, bin, env, "", "plan", "-f", "examples/quickstart.yaml", "--offline")
			if res.Code != 0 || !strings.Contains(res.Stdout, "Plan for quickstart (offline)") {
				t.Fatalf("%s plan: exit %d\n%s%s", filepath.Base(bin), res.Code, res.Stdout, res.Stderr)
			}
		}
	}
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: x}\n"
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHelpNamesThePlugin: help and completion speak of the plugin the user
// typed.
func TestHelpNamesThePlugin(t *testing.T) {
	for _, c := range []struct{ bin, name, ctxFlag string }{
		{bins.Kubectl, "kubectl khook", "--context"},
		{bins.Helm, "helm khook", "--kube-context"},
	} {
		res := run(t, c.bin, nil, "", "plan", "--help")
		if res.Code != 0 || !strings.Contains(res.Stdout, c.name+" plan -f SPEC") || !strings.Contains(res.Stdout, c.ctxFlag) {
			t.Errorf("%s plan --help lacks %q or %s:\n%s", c.name, c.name+" plan", c.ctxFlag, res.Stdout)
		}
		for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
			res := run(t, c.bin, nil, "", "completion", shell)
			if res.Code != 0 || len(res.Stdout) < 100 {
				t.Errorf("%s completion %s: exit %d, %d bytes", c.name, shell, res.Code, len(res.Stdout))
			}
		}
	}
}

// TestSecretNeverPrintedByTheBinaries repeats the planted-secret check
// through the real processes (stdout and stderr), for both plugins.
func TestSecretNeverPrintedByTheBinaries(t *testing.T) {
	const secret = "pl4nted-S3cret/value"
	env := []string{"KHOOK_SECRET_TOKEN=" + secret}
	spec := "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: s}\nsteps:\n" +
		"  - name: a\n    helm: {chart: app, repo: \"https://u:${TOKEN|urlquery}@charts.example.com\", values: {t: \"${TOKEN|b64enc}\", raw: \"${TOKEN}\"}}\n" +
		"  - name: b\n    job: {image: busybox, namespace: \"${TOKEN}\"}\n"
	for _, bin := range []string{bins.Kubectl, bins.Helm} {
		for _, args := range [][]string{{"validate", "-f", "-"}, {"plan", "-f", "-", "-o", "json"}, {"graph", "-f", "-"}} {
			res := run(t, bin, env, spec, args...)
			if res.Code != 2 {
				t.Fatalf("%v: want exit 2 for the invalid namespace, got %d", args, res.Code)
			}
			if !strings.Contains(res.Stderr, "***") {
				t.Errorf("%v: the error should show the masked value:\n%s", args, res.Stderr)
			}
			if strings.Contains(res.Stdout+res.Stderr, secret) || strings.Contains(res.Stdout+res.Stderr, "cGw0bnRlZC1TM2NyZXQvdmFsdWU") {
				t.Errorf("%s %v leaked the secret:\n%s\n%s", filepath.Base(bin), args, res.Stdout, res.Stderr)
			}
		}
	}
}

// runB runs a binary for a benchmark.
func runB(b *testing.B, bin string, env []string, args ...string) Result {
	b.Helper()
	return run(b, bin, env, "", args...)
}

// writeSpecB writes a spec for a benchmark.
func writeSpecB(b *testing.B, body string) string {
	b.Helper()
	p := filepath.Join(b.TempDir(), "spec.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// TestValidateReportsEveryProblem runs the invalid specs of
// core/load/testdata/problems through both built binaries: exit code 2 and,
// on standard error, exactly the report of the golden file, every problem
// at its file:line:col.
func TestValidateReportsEveryProblem(t *testing.T) {
	dir := filepath.Join(root(t), "core", "load", "testdata", "problems")
	specs, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(specs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, spec := range specs {
		name := strings.TrimSuffix(filepath.Base(spec), ".yaml")
		t.Run(name, func(t *testing.T) {
			golden, err := os.ReadFile(filepath.Join(dir, name+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			var env []string
			if data, err := os.ReadFile(filepath.Join(dir, name+".env")); err == nil {
				env = strings.Split(strings.TrimRight(string(data), "\n"), "\n") // KEY=VALUE lines
			}
			for _, bin := range []string{bins.Kubectl, bins.Helm} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				res, err := Run(ctx, dir, bin, env, "", "validate", "-f", name+".yaml")
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if res.Code != 2 || res.Stderr != "Error: "+string(golden) || res.Stdout != "" {
					t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and:\nError: %s", filepath.Base(bin), res.Code, res.Stdout, res.Stderr, golden)
				}
			}
		})
	}
}
