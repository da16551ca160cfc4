package testkind

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"khook.io/core/engine"
	"khook.io/core/event"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/render"
	"khook.io/core/run"
	"khook.io/core/state"
	"khook.io/core/vars"
)

// planted is the secret the tests plant in echo: steps.
const planted = "pl4nted-s3cret-value"

// echoCluster loads src with the built-in kinds, configMap: and echo:,
// the secret variable TOKEN holding planted, and attaches it to a fake
// clientset (echo: touches no cluster; the state record and the run lock
// live in the fake). What the engine notes and emits is collected.
type echoCluster struct {
	*engine.Cluster
	typed *fake.Clientset
	mu    sync.Mutex
	said  []string // every note and event text
}

func newEchoCluster(t *testing.T, src string) *echoCluster {
	return newEchoClusterOn(t, src, engine.SelectOptions{}, newFake())
}

// newFake is a fake clientset that gives each write the next
// resourceVersion, as the API server does (the record and the lock write
// on it).
func newFake() *fake.Clientset {
	typed := fake.NewClientset()
	var rv atomic.Int64
	typed.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if w, ok := a.(interface{ GetObject() runtime.Object }); ok && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			if m, err := meta.Accessor(w.GetObject()); err == nil {
				m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
				if m.GetUID() == "" {
					m.SetUID(types.UID(m.GetName()))
				}
			}
		}
		return false, nil, nil
	})
	return typed
}

// newEchoClusterOn is newEchoCluster on the fake typed, with the
// selection o (--steps, --replace).
func newEchoClusterOn(t *testing.T, src string, o engine.SelectOptions, typed *fake.Clientset) *echoCluster {
	t.Helper()
	red := redact.New()
	set, err := vars.Resolve(vars.Options{Environ: []string{"KHOOK_SECRET_TOKEN=" + planted}}, red)
	if err != nil {
		t.Fatal(err)
	}
	l := load.Loader{Steps: echoRegistry}
	doc, err := l.Parse([]byte(head+src), "spec.yaml", t.TempDir(), set, red)
	if err != nil {
		t.Fatal(err)
	}
	ec := &echoCluster{typed: typed}
	e := &engine.Engine{Steps: echoRegistry, Redactor: red}
	tgt := engine.Target{
		Notes: func(n engine.Note) { ec.record(n.Subject + " " + n.Text) },
		Events: event.SinkFunc(func(e event.Event) {
			ec.record(e.Step + " " + e.Message + " " + e.Detail + " " + e.Phase)
		}),
	}
	sel, err := engine.Resolve(doc, engine.CommandApply, o)
	if err != nil {
		t.Fatal(err)
	}
	ec.Cluster = e.Attach(doc, &kube.Clients{Typed: ec.typed, Config: &rest.Config{}, Writes: &kube.WriteGate{}}, tgt, engine.Options{Selection: sel})
	return ec
}

func (ec *echoCluster) record(s string) {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	ec.said = append(ec.said, s)
}

func (ec *echoCluster) texts() string {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return strings.Join(ec.said, "\n")
}

// noLeak fails when any of texts holds the planted secret.
func noLeak(t *testing.T, texts map[string]string) {
	t.Helper()
	for what, text := range texts {
		if strings.Contains(text, planted) {
			t.Errorf("%s holds the planted secret:\n%s", what, text)
		}
	}
}

// TestTestKindNewAction: echo:'s own action word, which no other package
// knows, is counted, rendered and planned: the live plan shows it and
// counts it ("2 echo"), a step it triggers is planned to run (a trigger
// predicted to echo changes something: ActionEcho.Changes), a diff of the
// step counts it a change, -o json says it, and destroy's plan counts its
// unsay ("1 to unsay"). The Terraform provider's planning of it is
// TestTestKindActionPlanned in terraform-provider-khook.
func TestTestKindNewAction(t *testing.T) {
	ec := newEchoCluster(t, `  - name: say
    echo: {text: hello}
  - name: after
    needs: [say]
    triggeredBy: [say]
    echo: {text: again}
`)
	ctx := context.Background()
	res, err := engine.NewPlan(ec.Cluster).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Actions[0] != ActionEcho || res.Actions[1] != ActionEcho {
		t.Errorf("actions %+v", res.Actions)
	}
	if got := res.Dispositions[1].Fate; got != engine.FateTriggered {
		t.Errorf("the step say triggers: fate %v, want %v (echo changes the cluster)", got, engine.FateTriggered)
	}
	var text, js bytes.Buffer
	if err := render.PlanText(&text, res.Plan); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0      say    echo  echo    -      echo 5 characters\n", "↳ would say hello\n", "↳ triggered: say changes\n", "\n2 echo.\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("plan text lacks %q:\n%s", want, text.String())
		}
	}
	if err := render.JSON(&js, res.Plan); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Steps []struct{ Name, Action, Reason string }
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || len(doc.Steps) != 2 || doc.Steps[0].Action != "echo" || doc.Steps[0].Reason != "would say hello" {
		t.Errorf("plan -o json: %v\n%s", err, js.String())
	}

	diffs, err := diffOne(ctx, ec.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffs[0]; d.Counted != engine.CatChange || !d.Changes || d.Headline != "echo: would say hello" {
		t.Errorf("diff of say: %+v", d)
	}

	steps, err := ec.PreviewDestroy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dp bytes.Buffer
	v := render.DestroyPlanView{Spec: "kinds", Clusters: []render.DestroyCluster{{Context: "test", Server: "https://test", Steps: steps}}}
	if err := render.DestroyPlan(&dp, v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(server https://test): 2 to unsay\n", "    unsay     text hello: it said hello\n"} {
		if !strings.Contains(dp.String(), want) {
			t.Errorf("destroy plan lacks %q:\n%s", want, dp.String())
		}
	}
}

// TestTestKindCannotLeak: echo: says a planted secret in everything it
// returns and reports, masking nothing; the engine's boundary masks it
// all: the live plan (text and -o json), diff, destroy's plan, the run's
// results, errors and events, the notes (warnings), and the state record
// the run writes.
func TestTestKindCannotLeak(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			ec := newEchoCluster(t, fmt.Sprintf(`  - name: say
    echo: {text: "token ${TOKEN}", fail: %v}
`, fail)+"state: {namespace: khook}\n")
			ctx := context.Background()
			out := map[string]string{}

			res, err := engine.NewPlan(ec.Cluster).Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var text, js bytes.Buffer
			if err := render.PlanText(&text, res.Plan); err != nil {
				t.Fatal(err)
			}
			if err := render.JSON(&js, res.Plan); err != nil {
				t.Fatal(err)
			}
			out["plan"], out["plan -o json"] = text.String(), js.String()
			if want := "↳ would say token ***"; !fail && !strings.Contains(text.String(), want) {
				t.Errorf("plan lacks %q:\n%s", want, text.String())
			}
			if want := "↳ echo plan failed: token ***"; fail && !strings.Contains(text.String(), want) {
				t.Errorf("plan lacks %q:\n%s", want, text.String())
			}

			diffs, err := diffOne(ctx, ec.Cluster)
			if err != nil {
				t.Fatal(err)
			}
			out["diff"] = fmt.Sprintf("%+v %v", *diffs[0], diffs[0].Err)

			steps, err := ec.PreviewDestroy(ctx)
			out["destroy plan"] = fmt.Sprintf("%+v %v", steps, err)

			result, err := ec.Execute(ctx, engine.CommandApply, engine.RunOptions{Parallelism: 1})
			if err != nil {
				t.Fatal(err)
			}
			rj, _ := json.Marshal(result)
			out["apply result"], out["apply -o json"] = fmt.Sprintf("%+v", result), string(rj)
			s := result.Steps[0]
			switch {
			case fail && (s.Status != run.StatusFailed || s.Error != "echo failed: token ***"):
				t.Errorf("failed apply: %+v", s)
			case !fail && (s.Status != run.StatusOK || s.Message != "said token ***"):
				t.Errorf("apply: %+v", s)
			}

			rec, found, err := state.Read(ctx, ec.typed, state.Location{Namespace: "khook", Name: ec.Doc().Spec.StateSecretName()})
			if err != nil || !found {
				t.Fatalf("record: found %v, %v", found, err)
			}
			recJSON, _ := json.Marshal(rec)
			out["state record"] = string(recJSON)
			if !strings.Contains(string(recJSON), "token ***") {
				t.Errorf("the record does not say what the step said, masked: %s", recJSON)
			}

			if !fail {
				destroyed, err := ec.Execute(ctx, engine.CommandDestroy, engine.RunOptions{Parallelism: 1})
				if err != nil {
					t.Fatal(err)
				}
				out["destroy result"] = fmt.Sprintf("%+v", destroyed)
			}
			said := ec.texts()
			out["events and notes"] = said
			for _, want := range []string{"progress: token ***", "warning: token ***", "phase: token ***", "phase failed: token ***", "cause: token ***"} {
				if !strings.Contains(said, want) {
					t.Errorf("the events and notes lack %q:\n%s", want, said)
				}
			}
			noLeak(t, out)
		})
	}
}

// TestTestKindRecordsSkips: the state record says each skip as its typed
// cause says (event.SkipCause), run after run: a when: exclusion and a
// step a failed need blocked are recorded skipped with their reason; a
// step --steps leaves out, or a conditional one not triggered, keeps its
// entry as it was ("kept"; a step a failed need blocks is recorded so
// even when --steps left it out); one the record resumes keeps its
// success; destroy records what it undid, and what it could not, for the
// next apply, and leaves a when: exclusion's entry.
func TestTestKindRecordsSkips(t *testing.T) {
	const spec = `  - name: one
    echo: {text: one}
  - name: off
    when: "false"
    echo: {text: off}
  - name: same
    echo: {text: same, same: true}
  - name: quiet
    needs: [same]
    triggeredBy: [same]
    echo: {text: quiet}
  - name: bad
    onError: continue
    echo: {text: bad, fail: true}
  - name: blocked
    needs: [bad]
    echo: {text: blocked}
state: {namespace: khook}
`
	ctx := context.Background()
	typed := newFake()
	prev := map[string]*state.StepRecord{}
	entries := func(ec *echoCluster) string {
		t.Helper()
		rec, found, err := state.Read(ctx, ec.typed, state.Location{Namespace: "khook", Name: ec.Doc().Spec.StateSecretName()})
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return "no record"
		}
		var out []string
		for _, st := range ec.Doc().Spec.Steps {
			r := rec.Steps[st.Name]
			if r == nil {
				continue
			}
			line := fmt.Sprintf("%s %s %q %q", st.Name, r.Status, r.Detail, r.Error)
			if p := prev[st.Name]; p != nil && p.FinishedAt.Equal(r.FinishedAt) {
				line += " kept"
			}
			out = append(out, line)
		}
		prev = rec.Steps
		return strings.Join(out, "\n")
	}
	for _, tc := range []struct {
		command engine.Command
		steps   []string
		want    string
	}{
		{engine.CommandApply, nil, `one ok "said one" ""
off skipped "when: false is false" ""
same ok "said same" ""
quiet ok "said quiet" ""
bad failed "" "echo failed: bad"
blocked skipped "needs bad, which failed" ""`},
		{engine.CommandApply, []string{"bad"}, `one ok "said one" "" kept
off skipped "when: false is false" "" kept
same ok "said same" "" kept
quiet ok "said quiet" "" kept
bad failed "" "echo failed: bad"
blocked skipped "needs bad, which failed" ""`},
		{engine.CommandApply, nil, `one ok "said one" "" kept
off skipped "when: false is false" ""
same ok "said same" "" kept
quiet ok "said quiet" "" kept
bad failed "" "echo failed: bad"
blocked skipped "needs bad, which failed" ""`},
		{engine.CommandDestroy, nil, `one skipped "undone by destroy" ""
off skipped "when: false is false" "" kept
same skipped "undone by destroy" ""
quiet skipped "undone by destroy" ""
bad failed "" "destroy failed: echo destroy failed: bad"
blocked skipped "undone by destroy" ""`},
	} {
		time.Sleep(2 * time.Millisecond) // each run's entries have their own time
		ec := newEchoClusterOn(t, spec, engine.SelectOptions{Steps: tc.steps}, typed)
		if _, err := ec.Execute(ctx, tc.command, engine.RunOptions{Parallelism: 1}); err != nil {
			t.Fatal(err)
		}
		if got := entries(ec); got != tc.want {
			t.Errorf("%s %v: the record:\n%s\nwant:\n%s", tc.command, tc.steps, got, tc.want)
		}
	}
}

// diffOne diffs c's steps one at a time.
func diffOne(ctx context.Context, c *engine.Cluster) ([]*engine.StepDiff, error) {
	d := engine.NewDiff(c)
	d.Parallelism = 1
	return d.Run(ctx)
}
