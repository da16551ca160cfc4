// Package steptest builds real step requests for executor tests: a step
// written as YAML, loaded and validated like a spec (of the built-in step
// kinds, unless told), with clients for the test cluster. A package that
// the built-in kinds import (core/helm) cannot import it in its own tests.
package steptest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"khook.io/core/fetch"
	"khook.io/core/kube"
	"khook.io/core/load"
	"khook.io/core/redact"
	"khook.io/core/step"
	"khook.io/core/steps/builtin"
	"khook.io/core/testing/testcluster"
	"khook.io/core/vars"
)

// Clients returns clients for cfg, as one run has.
func Clients(t testing.TB, cfg *rest.Config) *kube.Clients {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = kube.DefaultQPS, kube.DefaultBurst
	c, err := kube.NewForConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Options tune Request.
type Options struct {
	// Steps builds the registry whose kinds the step may be; nil: the
	// built-in kinds (steps/builtin.Registry).
	Steps func() (*step.Registry, error)
	// Env holds KHOOK_VAR_*/KHOOK_SECRET_* variables ("K=V").
	Env []string
	// BaseDir anchors local paths; defaults to the test's working directory.
	BaseDir string
	// Timeout of the attempt (default 1m).
	Timeout time.Duration
	// Redactor to register secrets in (a new one when nil).
	Redactor *redact.Redactor
}

// Request loads stepYAML (one step: "name: x\napply: {...}") as the only
// step of a spec, checks it like validate does, and returns a request for
// it against clients. Progress lines go to t.Log.
func Request(t testing.TB, clients *kube.Clients, stepYAML string, opts Options) *step.Request {
	t.Helper()
	red := opts.Redactor
	if red == nil {
		red = redact.New()
	}
	base := opts.BaseDir
	if base == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		base = wd
	}
	set, err := vars.Resolve(vars.Options{Environ: opts.Env}, red)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("apiVersion: khook.io/v1\nkind: Khook\nmetadata:\n  name: steptest\nsteps:\n")
	for i, line := range strings.Split(strings.TrimSpace(stepYAML), "\n") {
		if i == 0 {
			b.WriteString("  - " + line + "\n")
		} else {
			b.WriteString("    " + line + "\n")
		}
	}
	steps := opts.Steps
	if steps == nil {
		steps = builtin.Registry
	}
	l := load.Loader{Steps: steps}
	doc, err := l.Parse([]byte(b.String()), filepath.Join(base, "steptest.yaml"), base, set, red)
	if err != nil {
		t.Fatalf("step does not validate: %v\n%s", err, b.String())
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	return &step.Request{
		Step:     &doc.Spec.Steps[0],
		SpecName: "steptest",
		BaseDir:  base,
		Attempt:  1,
		Timeout:  timeout,
		Kube:     clients,
		HTTP:     fetch.NewClient(),
		Redactor: red,
		Log:      func(format string, args ...any) { t.Logf("progress: "+format, args...) },
	}
}

// Setup returns clients for the test cluster (testcluster.Main must run
// the tests) and a fresh namespace named after prefix.
func Setup(t testing.TB, prefix string) (*kube.Clients, string) {
	t.Helper()
	cl := testcluster.Get(t)
	return Clients(t, cl.RESTConfig(t)), cl.NewNamespace(t, prefix)
}

// Create creates the object written as YAML in ns and returns it as the
// server stored it. A kind not served yet is waited for (discovery lists a
// CRD's kind shortly after the CRD is Established), up to 30 seconds.
func Create(t testing.TB, c *kube.Clients, ns, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var m *meta.RESTMapping
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		var err error
		m, err = c.MappingFor(context.Background(), u.GroupVersionKind())
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	out, err := c.Resource(m, ns).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// Run makes one attempt of req with exec, bounded by the request's
// timeout as the scheduler bounds it.
func Run(exec step.Executor, req *step.Request) (step.Outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), req.Timeout)
	defer cancel()
	return step.RunStep(ctx, exec, req)
}

// Plan predicts req with p within 30 seconds; an error fails the test.
func Plan(t testing.TB, p step.Planner, req *step.Request) step.Prediction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pred, err := step.PlanStep(ctx, p, req)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return pred
}
