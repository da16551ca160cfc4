//go:build integration

package testkind

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"khook.io/core/cli"
	"khook.io/core/state"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// connection is kubectl's connection flags, for the test cluster.
type connection struct {
	flags *genericclioptions.ConfigFlags
}

func (c connection) AddFlags(fs *pflag.FlagSet) { c.flags.AddFlags(fs) }

func (c connection) RESTClientGetter() genericclioptions.RESTClientGetter { return c.flags }

// TestTestKindOnTheCluster: a spec with a configMap: step, run by the
// command line on the test cluster with the kind registered: apply
// creates the ConfigMap, the state record keeps its input hash (a re-run
// resumes it; a change of its file re-runs it), the live plan asks its
// Planner, and destroy asks its Destroyer.
func TestTestKindOnTheCluster(t *testing.T) {
	cl := testcluster.Get(t)
	ns := cl.NewNamespace(t, "testkind")
	cms := steptest.Clients(t, cl.RESTConfig(t)).Typed.CoreV1().ConfigMaps(ns)
	dir := t.TempDir()
	extra := filepath.Join(dir, "extra.txt")
	file := filepath.Join(dir, "spec.yaml")
	write(t, extra, "one\n")
	write(t, file, "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: kinds}\nstate: {namespace: "+ns+"}\nsteps:\n"+
		"  - name: settings\n    configMap: {name: app-settings, namespace: "+ns+", data: {level: info}, fromFile: ./extra.txt}\n")

	// one step's line of a command's -o json, with what it said
	type stepJSON struct {
		Type, Status, Message, SkipReason, Action, Reason string
	}
	khookJSON := func(args ...string) stepJSON {
		t.Helper()
		flags := genericclioptions.NewConfigFlags(true)
		flags.KubeConfig = &cl.Kubeconfig
		var out, errOut bytes.Buffer
		code := cli.Execute(context.Background(), cli.Config{Name: "kubectl khook", Connection: connection{flags}, In: strings.NewReader(""),
			Out: &out, ErrOut: &errOut, Environ: []string{}, Steps: registry}, append(args, "-o", "json", "-f", file))
		var doc struct{ Steps []stepJSON }
		if err := json.Unmarshal(out.Bytes(), &doc); code != 0 || err != nil || len(doc.Steps) != 1 || doc.Steps[0].Type != Type {
			t.Fatalf("%v: exit %d, %v:\n%s%s", args, code, err, out.String(), errOut.String())
		}
		return doc.Steps[0]
	}
	data := func() map[string]string {
		t.Helper()
		cm, err := cms.Get(context.Background(), "app-settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}
	const resumed = "unchanged since it succeeded in a previous run (state record)"

	if got := khookJSON("apply"); got.Status != "ok" || got.Message != "ConfigMap/app-settings created" {
		t.Fatalf("first apply: %+v", got)
	}
	if got := data(); !reflect.DeepEqual(got, map[string]string{"level": "info", "extra.txt": "one\n"}) {
		t.Errorf("data after the first apply: %v", got)
	}
	if got := khookJSON("plan"); got.Action != "skip" || got.Reason != resumed {
		t.Errorf("plan of an unchanged step: %+v", got)
	}

	write(t, extra, "two\n") // the declared input changes, so does the hash
	if got := khookJSON("plan"); got.Action != "configure" || got.Reason != "ConfigMap/app-settings" {
		t.Errorf("plan after the file changed: %+v", got)
	}
	if got := khookJSON("apply"); got.Status != "ok" || got.Message != "ConfigMap/app-settings configured" {
		t.Errorf("apply after the file changed: %+v", got)
	}
	if got := data(); got["extra.txt"] != "two\n" {
		t.Errorf("data after the second apply: %v", got)
	}
	if got := khookJSON("apply"); got.Status != "skipped" || got.SkipReason != resumed {
		t.Errorf("apply of an unchanged step: %+v", got)
	}

	if got := khookJSON("destroy", "--yes"); got.Status != "ok" || got.Message != "deleted 1 object" {
		t.Errorf("destroy: %+v", got)
	}
	if _, err := cms.Get(context.Background(), "app-settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after destroy: %v", err)
	}
}

// TestTestKindEchoOnTheCluster: echo:, which says a planted secret in
// everything it returns and reports and masks nothing, run by the command
// line on the test cluster with a state record: no output of plan,
// apply (its failure too) or destroy, text or -o json, standard output
// or error, and no byte of the record holds the secret, while each says
// what the step said, masked; the plan shows echo's own word. (The
// command line masks what it prints and the journal what it records as
// well: this proves the whole path; TestTestKindCannotLeak proves the
// engine's boundary alone, the engine's results and events as a library
// caller such as the provider gets them.)
func TestTestKindEchoOnTheCluster(t *testing.T) {
	cl := testcluster.Get(t)
	ns := cl.NewNamespace(t, "testkind-echo")
	typed := steptest.Clients(t, cl.RESTConfig(t)).Typed
	dir := t.TempDir()
	file := filepath.Join(dir, "spec.yaml")
	env := []string{"KHOOK_SECRET_TOKEN=" + planted}
	khookRun := func(args ...string) (int, string) {
		t.Helper()
		flags := genericclioptions.NewConfigFlags(true)
		flags.KubeConfig = &cl.Kubeconfig
		var out, errOut bytes.Buffer
		code := cli.Execute(context.Background(), cli.Config{Name: "kubectl khook", Connection: connection{flags}, In: strings.NewReader(""),
			Out: &out, ErrOut: &errOut, Environ: env, Steps: echoRegistry}, append(args, "-f", file))
		return code, out.String() + errOut.String()
	}
	for _, fail := range []bool{false, true} {
		write(t, file, fmt.Sprintf("apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: echo-%v}\nstate: {namespace: %s}\nsteps:\n"+
			"  - name: say\n    echo: {text: \"token ${TOKEN}\", fail: %v}\n", fail, ns, fail))
		outputs := map[string]string{}
		for _, args := range [][]string{{"plan"}, {"plan", "-o", "json"}, {"diff"}, {"apply"}, {"apply", "-o", "json"}, {"status"}, {"destroy", "--dry-run"}, {"destroy", "--yes"}, {"destroy", "--yes", "-o", "json"}} {
			code, out := khookRun(args...)
			outputs[fmt.Sprintf("fail=%v %v (exit %d)", fail, args, code)] = out
			if args[0] == "plan" && len(args) == 1 {
				want := "say   echo  echo"
				if fail {
					want = "say   echo  unknown"
				}
				if !strings.Contains(out, want) || !strings.Contains(out, "token ***") {
					t.Errorf("fail=%v plan: want %q and the masked text in:\n%s", fail, want, out)
				}
			}
			if args[0] == "apply" && len(args) == 1 {
				rec, found, err := state.Read(context.Background(), typed, state.Location{Namespace: ns, Name: "khook-state-echo-" + fmt.Sprint(fail)})
				if err != nil || !found {
					t.Fatalf("record: %v %v", found, err)
				}
				raw, err := typed.CoreV1().Secrets(ns).Get(context.Background(), "khook-state-echo-"+fmt.Sprint(fail), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				js, _ := json.Marshal(rec)
				outputs[fmt.Sprintf("fail=%v the record", fail)] = string(js)
				for k, v := range raw.Data {
					outputs[fmt.Sprintf("fail=%v the record's Secret %s", fail, k)] = string(v)
				}
				if !strings.Contains(string(js), "token ***") {
					t.Errorf("fail=%v: the record does not say the masked text: %s", fail, js)
				}
			}
		}
		for what, out := range outputs {
			if strings.Contains(out, planted) {
				t.Errorf("%s holds the planted secret:\n%s", what, out)
			}
		}
	}
}
