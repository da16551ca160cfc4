package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/engine"
	"khook.io/core/engine/fleet"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/run"
	"khook.io/core/steps/builtin"
)

// flagsConnection is kubectl's connection flags, for tests.
type flagsConnection struct {
	flags *genericclioptions.ConfigFlags
}

func (c flagsConnection) AddFlags(fs *pflag.FlagSet) { c.flags.AddFlags(fs) }
func (c flagsConnection) RESTClientGetter() genericclioptions.RESTClientGetter {
	return c.flags
}

// helmLike names its context flag as helm does.
type helmLike struct{ flagsConnection }

func (helmLike) ContextFlag() string { return "kube-context" }

const fleetKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: prod-eu
  context: {cluster: a, user: u}
- name: prod-us
  context: {cluster: a, user: u}
- name: staging
  context: {cluster: a, user: u}
current-context: staging
users:
- name: u
  user: {token: t0ken-value}
`

const fleetSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: fleet}
steps:
  - name: cm
    apply:
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: "region-${REGION}"}
            data: {context: "${KHOOK_CONTEXT}", token: "${TOKEN}"}
  - name: eu-only
    needs: [cm]
    when: vars.KHOOK_CONTEXT.endsWith("-eu")
    wait: {for: condition=Ready, on: pods}
`

// fleetDir writes a kubeconfig, the spec and a var dir with files for the
// contexts given (REGION: the value).
func fleetDir(t *testing.T, regions map[string]string) (kubeconfig, spec, varDir string) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig, spec, varDir = filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "spec.yaml"), filepath.Join(dir, "vars")
	for p, body := range map[string]string{kubeconfig: fleetKubeconfig, spec: fleetSpec} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(varDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for ctx, region := range regions {
		if err := os.WriteFile(filepath.Join(varDir, ctx+".yaml"), []byte("REGION: "+region+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return kubeconfig, spec, varDir
}

func runFleetCLI(t *testing.T, conn Connection, env []string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), Config{
		Name: "kubectl khook", Connection: conn, In: strings.NewReader(""), Out: &out, ErrOut: &errOut,
		Environ: append([]string{"PATH=/usr/bin"}, env...), Steps: builtin.Registry,
	}, args)
	return out.String(), errOut.String(), code
}

func kubeconfigConnection(kubeconfig string) flagsConnection {
	f := genericclioptions.NewConfigFlags(true)
	f.KubeConfig = &kubeconfig
	return flagsConnection{flags: f}
}

// TestFleetPlanOffline: each context gets its own variables (KHOOK_CONTEXT,
// its --var-dir file winning over --var-file), so its own plan, with
// secrets masked.
func TestFleetPlanOffline(t *testing.T) {
	kc, spec, varDir := fleetDir(t, map[string]string{"prod-eu": "eu-west-1", "prod-us": "us-east-1"})
	shared := filepath.Join(filepath.Dir(spec), "shared.yaml")
	if err := os.WriteFile(shared, []byte("REGION: shared\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"KHOOK_SECRET_TOKEN=planted-secret-123"}
	out, errOut, code := runFleetCLI(t, kubeconfigConnection(kc), env, "plan", "-f", spec, "--offline", "--contexts", "prod-*", "--var-dir", varDir, "--var-file", shared, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var fp struct {
		Clusters []struct {
			Context string
			Plan    struct {
				Steps []struct{ Name, Action, Summary string }
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &fp); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(fp.Clusters) != 2 || fp.Clusters[0].Context != "prod-eu" || fp.Clusters[1].Context != "prod-us" {
		t.Fatalf("clusters: %+v", fp.Clusters)
	}
	if a := fp.Clusters[0].Plan.Steps[1].Action; a != "run" {
		t.Errorf("prod-eu runs eu-only: %s", a)
	}
	if a := fp.Clusters[1].Plan.Steps[1].Action; a != "skip" {
		t.Errorf("prod-us skips eu-only: %s", a)
	}
	if strings.Contains(out, "planted-secret-123") {
		t.Errorf("the secret leaked:\n%s", out)
	}

	out, errOut, code = runFleetCLI(t, kubeconfigConnection(kc), env, "plan", "-f", spec, "--offline", "--contexts", "prod-us,prod-eu", "--var-dir", varDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	us, eu := strings.Index(out, "==> context prod-us <=="), strings.Index(out, "==> context prod-eu <==")
	if us < 0 || eu < us {
		t.Errorf("sections in the order of --contexts:\n%s", out)
	}
}

// TestFleetRefusesBadInputBeforeAnyCluster: what keeps a fleet from
// running is found before anything touches a cluster, every problem of
// every context at once (the kubeconfig's server is unreachable: a check
// of it would say so, and it never does).
func TestFleetRefusesBadInputBeforeAnyCluster(t *testing.T) {
	kc, spec, varDir := fleetDir(t, map[string]string{"prod-eu": "eu-west-1", "prod-us": "us-east-1"})
	if err := os.WriteFile(filepath.Join(varDir, "staging.yaml"), []byte("OTHER: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(filepath.Dir(spec), "broken.yaml")
	if err := os.WriteFile(broken, []byte(strings.Replace(fleetSpec, "metadata: {name: fleet}", "metadata: {name: fleet}\nbogus: 1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	conn := kubeconfigConnection(kc)
	ctxFlag := "staging"
	withContext := kubeconfigConnection(kc)
	withContext.flags.Context = &ctxFlag
	for _, tc := range []struct {
		name string
		conn Connection
		args []string
		env  []string
		code int
		has  []string
		not  []string
	}{
		{"a variable missing in one context only", conn, []string{"apply", "-f", spec, "--contexts", "*", "--var-dir", varDir}, nil, ExitInvalid,
			[]string{"1 of 3 contexts of the fleet cannot run the spec, so nothing was run on any", `context "staging": invalid spec: 1 problem`, "variable REGION is not set"},
			[]string{`context "prod-eu"`, "cannot reach"}},
		{"a missing variables file", conn, []string{"destroy", "-f", spec, "--contexts", "prod-eu,prod-us", "--var-dir", filepath.Join(varDir, "none")}, nil, ExitInvalid,
			[]string{"2 of 2 contexts", `context "prod-eu": no variables for this context: ` + filepath.Join(varDir, "none", "prod-eu.yaml") + " does not exist", `context "prod-us": no variables`}, nil},
		{"the same problem everywhere, once", conn, []string{"diff", "-f", broken, "--contexts", "prod-*", "--var-dir", varDir}, nil, ExitInvalid,
			[]string{"in every context of the fleet (2), nothing was run", `unknown field "bogus"`}, []string{`context "prod-eu"`}},
		{"a source setting KHOOK_CONTEXT", conn, []string{"apply", "-f", spec, "--contexts", "prod-eu", "--set", "KHOOK_CONTEXT=x", "--set", "REGION=r"}, nil, ExitInvalid,
			[]string{"KHOOK_CONTEXT is the name of the cluster's kubeconfig context in a fleet run (--contexts), set by khook; it cannot be set"}, nil},
		{"an unknown context and a pattern matching nothing", conn, []string{"apply", "-f", spec, "--contexts", "prod-eu,prod-asia,dev-*"}, nil, ExitFailed,
			[]string{`--contexts: context "prod-asia" is not in the kubeconfig`, `pattern "dev-*" matches no context`, "its contexts: prod-eu, prod-us, staging"}, nil},
		{"--contexts with --context", withContext, []string{"status", "-f", spec, "--contexts", "prod-eu"}, nil, ExitInvalid,
			[]string{`--contexts and --context ("staging") both choose the context: pass one`}, nil},
		{"--contexts with helm's --kube-context", helmLike{withContext}, []string{"plan", "-f", spec, "--contexts", "prod-eu"}, nil, ExitInvalid,
			[]string{`--contexts and --kube-context ("staging")`}, nil},
		{"--var-dir without --contexts", conn, []string{"apply", "-f", spec, "--var-dir", varDir}, nil, ExitInvalid, []string{"--var-dir needs --contexts"}, nil},
		{"--fleet-parallelism without --contexts", conn, []string{"plan", "-f", spec, "--fleet-parallelism", "2"}, nil, ExitInvalid, []string{"--fleet-parallelism needs --contexts"}, nil},
		{"a negative --fleet-parallelism", conn, []string{"apply", "-f", spec, "--contexts", "*", "--fleet-parallelism", "-1"}, nil, ExitInvalid, []string{"must not be negative"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runFleetCLI(t, tc.conn, append([]string{"KHOOK_SECRET_TOKEN=planted-secret-123"}, tc.env...), tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, s := range tc.has {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			for _, s := range append(tc.not, "planted-secret-123") {
				if strings.Contains(out+errOut, s) {
					t.Errorf("output holds %q:\n%s%s", s, out, errOut)
				}
			}
		})
	}
}

// TestFleetOptions: the fleet forms' options built alone, with the
// connection as the only way to the clusters: plan --contexts offline
// prints a section per context, each with its own variables (its
// KHOOK_CONTEXT decides a when:); status and
// diff refuse a context the kubeconfig lacks before any cluster is
// touched.
func TestFleetOptions(t *testing.T) {
	kc, spec, varDir := fleetDir(t, map[string]string{"prod-eu": "eu-west-1", "prod-us": "us-east-1"})
	clusters := &Clusters{Connection: kubeconfigConnection(kc)}
	red := redact.New()
	src := SpecSource{Loader: builtinLoader(), Environ: []string{"KHOOK_SECRET_TOKEN=planted-secret-123"}, Redactor: red}

	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	pf := NewPlanFlags()
	pf.Spec.File, pf.Offline, pf.Fleet.Contexts, pf.Fleet.VarDir = spec, true, []string{"prod-*"}, varDir
	po, err := pf.ToOptions(streams, src, clusters)
	if err != nil {
		t.Fatal(err)
	}
	if err := po.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	eu, us, found := strings.Cut(out.String(), "==> context prod-us <==")
	if !found || !strings.HasPrefix(eu, "==> context prod-eu <==") || strings.Contains(eu, "is false") || !strings.Contains(us, `when: vars.KHOOK_CONTEXT.endsWith("-eu") is false`) {
		t.Errorf("plan: a section per context, eu-only skipped on prod-us only:\n%s", out.String())
	}

	sf := NewStatusFlags()
	sf.Spec.File, sf.Fleet.Contexts = spec, []string{"prod-eu", "prod-asia"}
	so, err := sf.ToOptions(streams, src, clusters)
	if err != nil {
		t.Fatal(err)
	}
	if err := so.Run(context.Background()); err == nil || !strings.Contains(err.Error(), `context "prod-asia" is not in the kubeconfig`) {
		t.Errorf("status: %v", err)
	}
	df := NewDiffFlags()
	df.Spec.File, df.Fleet.Contexts = spec, []string{"dev-*"}
	do, err := df.ToOptions(streams, src, clusters, out)
	if err != nil {
		t.Fatal(err)
	}
	var exit *ExitError
	if err := do.Run(context.Background()); !errors.As(err, &exit) || exit.Code != ExitDiffError || !strings.Contains(err.Error(), `pattern "dev-*" matches no context`) {
		t.Errorf("diff: %v", err)
	}
}

// TestEmptyFleetFlags: --contexts or --var-dir given an empty value (an
// unset CI variable) is refused, exit 2, for every command that has them,
// before anything touches a cluster (the kubeconfig's current context is
// unreachable: running there would say so, exit 1).
func TestEmptyFleetFlags(t *testing.T) {
	kc, spec, _ := fleetDir(t, map[string]string{"prod-eu": "eu-west-1"})
	const contexts = "--contexts was given an empty value (an unset variable?)"
	const dir = "--var-dir was given an empty value"
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"empty", []string{"--contexts", ""}, []string{contexts}},
		{"empty, with =", []string{"--contexts="}, []string{contexts}},
		{"a comma", []string{"--contexts", ","}, []string{contexts}},
		{"blanks", []string{"--contexts", " , "}, []string{contexts}},
		{"empty after a context", []string{"--contexts", "prod-eu", "--contexts", ""}, []string{contexts}},
		{"an empty --var-dir", []string{"--contexts", "prod-eu", "--var-dir", ""}, []string{dir}},
		{"an empty --var-dir alone", []string{"--var-dir", ""}, []string{dir}},
		{"both", []string{"--contexts", "", "--var-dir", "", "--fleet-parallelism", "2"}, []string{contexts, dir}},
	} {
		for _, command := range []string{"apply", "destroy", "plan", "diff", "status"} {
			t.Run(tc.name+"/"+command, func(t *testing.T) {
				args := append([]string{command, "-f", spec}, tc.args...)
				out, errOut, code := runFleetCLI(t, kubeconfigConnection(kc), []string{"REGION=x"}, args...)
				if code != ExitInvalid {
					t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, ExitInvalid, out, errOut)
				}
				for _, s := range tc.want {
					if !strings.Contains(errOut, s) {
						t.Errorf("stderr lacks %q:\n%s", s, errOut)
					}
				}
				if strings.Contains(out+errOut, "127.0.0.1") {
					t.Errorf("a cluster was contacted:\n%s%s", out, errOut)
				}
			})
		}
	}
	// a library caller's blank entries are refused as the flag's are
	ff := FleetFlags{Contexts: []string{"", " "}}
	if err := ff.check(); err == nil || !strings.Contains(err.Error(), contexts) {
		t.Errorf("blank entries: %v", err)
	}
}

// TestFleetMemberUsageErrorExits2: a command a member refuses as its
// usage (--no-needs leaving a need of a step the context runs neither
// selected nor done) exits 2, as the same command on that one cluster
// does, not 1 as a failure; the context is named, and the member whose
// when: excludes the step plans.
func TestFleetMemberUsageErrorExits2(t *testing.T) {
	kc, spec, varDir := fleetDir(t, map[string]string{"prod-eu": "eu-west-1", "prod-us": "us-east-1"})
	for _, output := range []string{"text", "json"} {
		t.Run(output, func(t *testing.T) {
			out, errOut, code := runFleetCLI(t, kubeconfigConnection(kc), []string{"KHOOK_SECRET_TOKEN=planted-secret-123"},
				"plan", "-f", spec, "--offline", "--contexts", "prod-*", "--var-dir", varDir, "--steps", "eu-only", "--no-needs", "-o", output)
			if code != ExitInvalid || !strings.Contains(errOut, "1 of 2 clusters failed: prod-eu") {
				t.Errorf("exit %d, want %d (a usage error); stderr:\n%s\nstdout:\n%s", code, ExitInvalid, errOut, out)
			}
			if want := "--no-needs: eu-only needs cm"; !strings.Contains(out, want) {
				t.Errorf("the member's error should say %q:\n%s", want, out)
			}
			if output == "text" && !strings.Contains(out, "==> context prod-us <==") {
				t.Errorf("prod-us should plan:\n%s", out)
			}
		})
	}
}

// TestFleetRunUsageErrorExits2: apply or destroy on a fleet one member of
// which refused the run as its usage (--no-needs without a need done in
// that cluster's record) exits 2 once the report is printed; a failure
// alone exits 1.
func TestFleetRunUsageErrorExits2(t *testing.T) {
	refused := &engine.UsageError{Err: errors.New("--no-needs: b needs a, which is neither selected nor recorded done in the state record: select it too, or leave out --no-needs; nothing was run")}
	for _, tc := range []struct {
		name string
		errs []error
		want int
	}{
		{"a failure", []error{nil, errors.New("unreachable")}, ExitFailed},
		{"a usage error", []error{nil, refused}, ExitInvalid},
		{"a usage error and a failure", []error{errors.New("unreachable"), refused}, ExitInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			o := &RunOptions{Command: "apply", Output: "text", ClusterOptions: ClusterOptions{Streams: streams, Redactor: redact.New()}}
			runs := make([]render.ClusterRun, len(tc.errs))
			results := make([]*fleet.Result, len(tc.errs))
			for i, err := range tc.errs {
				results[i] = &fleet.Result{Context: fmt.Sprintf("c%d", i), Status: run.RunOK, Err: err}
				runs[i] = render.ClusterRun{Context: results[i].Context, Status: run.RunOK, Result: &run.Result{Status: run.RunOK}}
				if err != nil {
					results[i].Status, runs[i].Status, runs[i].Err, runs[i].Result = run.RunFailed, run.RunFailed, err.Error(), nil
				}
			}
			var exit *ExitError
			if err := o.fleetReport("spec", runs, results, time.Second); !errors.As(err, &exit) || exit.Code != tc.want {
				t.Errorf("exit %v, want %d\n%s", err, tc.want, out)
			}
		})
	}
}
