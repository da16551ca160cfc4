//go:build integration

package diagnose_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"khook.io/core/kube"
	"khook.io/core/redact"
	"khook.io/core/step"
	"khook.io/core/steps/apply"
	helmstep "khook.io/core/steps/helm"
	"khook.io/core/steps/rollout"
	"khook.io/core/steps/wait"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// The planted secrets: a ValidatingAdmissionPolicy's message and a
// crashing container's log line quote them; no error may show them.
const (
	policySecret = "vap-s3cret-planted-9f2"
	logSecret    = "log-s3cret-planted-4c1"
)

// stuckTimeout is every stuck step's timeout: past the first diagnosis
// (waiter.DefaultStallAfter, 5 s, counted from the controllers' last
// status write), short for the test. A helm wait ends its step's margin
// (decision 181: a tenth of what is left, at least 1 s, and the final
// diagnosis) before the deadline and starts after the install: with 12 s
// it waited 8.8 s, and on a loaded machine (load average 17 on 2 cores)
// 4 to 10 of the 10 helm waits ended before their first diagnosis.
const stuckTimeout = 15 * time.Second

// cause is one way a Deployment never becomes ready, as the cluster
// reports it.
type cause struct {
	name string
	// setup prepares the namespace (what the cause needs besides the
	// Deployment); it runs before any step.
	setup func(t *testing.T, e *env, ns string)
	// annotations and pod are added to the Deployment's pod template
	// (annotations, and YAML lines under spec:), container under its
	// container.
	annotations map[string]string
	pod         string
	container   string
	// want: what the error must say, in the cluster's words; object: the
	// object it names ("Pod ns/web-", with ns replaced).
	want   []string
	object string
}

// causes are the acceptance list of issue 27: scheduler (node selector,
// CPU), controller (service account, quota), storage (a claim whose
// storage class does not exist), admission (a denying policy), container
// (image pull, crash loop with exit code, missing ConfigMap, readiness).
var causes = []cause{
	{name: "node-selector", pod: `nodeSelector: {khook.io/no-such-node: "true"}`,
		want: []string{"Unschedulable: 0/1 nodes are available", "didn't match Pod's node affinity/selector"}, object: "Pod ns/web-"},
	{name: "insufficient-cpu", container: `resources: {requests: {cpu: "2000"}}`,
		want: []string{"Unschedulable: 0/1 nodes are available", "Insufficient cpu"}, object: "Pod ns/web-"},
	{name: "service-account", pod: "serviceAccountName: no-such-account",
		want: []string{"FailedCreate", `error looking up service account ns/no-such-account: serviceaccount "no-such-account" not found`}, object: "ReplicaSet ns/web-"},
	{name: "quota", setup: quota,
		want: []string{"FailedCreate", "exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0"}, object: "ReplicaSet ns/web-"},
	{name: "storage-class", setup: claim, pod: "volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]",
		want: []string{`ProvisioningFailed: storageclass.storage.k8s.io "no-such-class" not found`}, object: "PersistentVolumeClaim ns/data"},
	{name: "admission-policy", setup: denyPods,
		want:   []string{"FailedCreate", "ValidatingAdmissionPolicy 'khook-test-deny-pods' with binding 'khook-test-deny-pods' denied request: pods are not allowed here: the token *** is revoked"},
		object: "ReplicaSet ns/web-"},
	{name: "image-pull", annotations: map[string]string{"kwok.khook.io/pod": "image-pull-fails"},
		want: []string{"container app: ", "registry.invalid/nope:1", "not found"}, object: "Pod ns/web-"},
	{name: "crash-loop", setup: crashLogs, annotations: map[string]string{"kwok.khook.io/pod": "crash-loop", "kwok.khook.io/exit-code": "3"},
		want:   []string{"container app: CrashLoopBackOff: last exit code 3 (Error)", "; last 3 log lines:\n    starting\n    fatal: cannot authenticate with token ***\n    " + strings.Repeat("x", 392) + "***"},
		object: "Pod ns/web-"},
	{name: "missing-configmap", annotations: map[string]string{"kwok.khook.io/pod": "config-error"},
		container: "env: [{name: COLOR, valueFrom: {configMapKeyRef: {name: no-such-config, key: color}}}]",
		want:      []string{`container app: CreateContainerConfigError: configmap "no-such-config" not found`}, object: "Pod ns/web-"},
	{name: "readiness", annotations: map[string]string{"kwok.khook.io/pod": "never-ready"},
		want: []string{"Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 503"}, object: "Pod ns/web-"},
}

// deployment is the Deployment "web" of c: two replicas.
func (c cause) deployment() string {
	var b strings.Builder
	b.WriteString("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata:\n      labels: {app: web}\n")
	if len(c.annotations) > 0 {
		b.WriteString("      annotations:\n")
		for k, v := range c.annotations {
			fmt.Fprintf(&b, "        %s: %q\n", k, v)
		}
	}
	b.WriteString("    spec:\n")
	if c.pod != "" {
		b.WriteString("      " + c.pod + "\n")
	}
	b.WriteString("      containers:\n      - name: app\n        image: registry.invalid/nope:1\n")
	if c.container != "" {
		b.WriteString("        " + c.container + "\n")
	}
	return b.String()
}

// way is one way khook waits for the Deployment.
type way struct {
	name string
	// request builds the step (creating what the step does not); it runs
	// in the test's goroutine.
	request func(t *testing.T, e *env, ns, deployment string) (step.Executor, *step.Request)
}

var ways = []way{
	{"apply-waitFor", func(t *testing.T, e *env, ns, d string) (step.Executor, *step.Request) {
		return apply.New(apply.Options{}), e.request(t, "name: web\napply:\n  namespace: "+ns+"\n  waitFor: condition=Available\n  manifests:\n  - inline: |\n"+indent(d, "      "))
	}},
	{"helm-wait", func(t *testing.T, e *env, ns, d string) (step.Executor, *step.Request) {
		return helmstep.New(helmstep.Options{}), e.request(t, "name: web\nhelm:\n  chart: "+chart(t, map[string]string{"deployment.yaml": d})+"\n  namespace: "+ns+"\n  wait: true")
	}},
	{"wait-step", func(t *testing.T, e *env, ns, d string) (step.Executor, *step.Request) {
		steptest.Create(t, e.c, ns, d)
		return wait.New(), e.request(t, "name: web\nwait:\n  for: condition=Available\n  on: deployment/web\n  namespace: "+ns)
	}},
	{"rollout-status", func(t *testing.T, e *env, ns, d string) (step.Executor, *step.Request) {
		steptest.Create(t, e.c, ns, d)
		return rollout.New(), e.request(t, "name: web\nrollout:\n  status: deployment/web\n  namespace: "+ns)
	}},
}

// env is what every case shares: the cluster, one redactor that knows
// the planted secrets, and what the setups made.
type env struct {
	cl  *testcluster.Cluster
	c   *kube.Clients
	red *redact.Redactor
	// denied and crashing collect the namespaces the admission policy and
	// the crash logs are for; finish applies them.
	denied   []string
	crashing []string
	timeout  time.Duration
}

// request is a step with clients of its own: the steps run at once,
// and one run's clients (one rate limiter) would make them queue for
// their diagnoses as a real run's dozens of stuck steps would not.
func (e *env) request(t *testing.T, stepYAML string) *step.Request {
	return steptest.Request(t, steptest.Clients(t, e.cl.RESTConfig(t)), stepYAML, steptest.Options{Redactor: e.red, Timeout: e.timeout})
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// chart writes a chart of the given templates and returns its directory.
func chart(t *testing.T, templates map[string]string) string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: stuck\nversion: 0.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range templates {
		if err := os.WriteFile(filepath.Join(dir, "templates", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// outcome is what one stuck step did.
type outcome struct {
	err      error
	progress []string
	took     time.Duration
}

// run runs the steps at once (each waits for its timeout: one after the
// other would take minutes) and returns their outcomes, in order.
func run(execs []step.Executor, reqs []*step.Request) []outcome {
	out := make([]outcome, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		var mu sync.Mutex
		req.Log = func(format string, args ...any) {
			mu.Lock()
			out[i].progress = append(out[i].progress, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		wg.Go(func() {
			began := time.Now()
			_, err := steptest.Run(execs[i], req)
			mu.Lock()
			out[i].err, out[i].took = err, time.Since(began)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// TestStuckWaitsSayWhy is the acceptance matrix of issue 27: every cause
// the cluster reports, under every way khook waits, on one cluster. Each
// step times out; its error names the cause in the cluster's words and the
// object it comes from, and its progress showed that cause once (a
// "stuck:" line), without the planted secrets.
func TestStuckWaitsSayWhy(t *testing.T) {
	cl := testcluster.Get(t)
	e := &env{cl: cl, c: steptest.Clients(t, cl.RESTConfig(t)), red: redact.New(), timeout: stuckTimeout}
	e.red.Add(policySecret)
	e.red.Add(logSecret)
	type row struct {
		cause cause
		way   string
		ns    string
	}
	var rows []row
	var execs []step.Executor
	var reqs []*step.Request
	for _, c := range causes {
		for _, w := range ways {
			ns := cl.NewNamespace(t, c.name+"-"+w.name)
			if c.setup != nil {
				c.setup(t, e, ns)
			}
			rows = append(rows, row{cause: c, way: w.name, ns: ns})
		}
	}
	e.finish(t)
	for _, r := range rows {
		for _, w := range ways {
			if w.name == r.way {
				ex, req := w.request(t, e, r.ns, r.cause.deployment())
				execs, reqs = append(execs, ex), append(reqs, req)
			}
		}
	}
	outcomes := run(execs, reqs)
	for i, r := range rows {
		o := outcomes[i]
		t.Run(r.cause.name+"/"+r.way, func(t *testing.T) {
			if o.err == nil {
				t.Fatal("the step succeeded")
			}
			msg := o.err.Error()
			t.Logf("error after %s: %s", o.took.Round(100*time.Millisecond), msg)
			_, cause, ok := strings.Cut(msg, "; cause: ")
			if !ok {
				t.Fatalf("the error names no cause")
			}
			object := strings.ReplaceAll(r.cause.object, "ns/", r.ns+"/")
			if !strings.HasPrefix(cause, object) && !strings.Contains(cause, "pods ("+object) {
				t.Errorf("the cause does not name %s...: %s", object, cause)
			}
			for _, want := range r.cause.want {
				if want = strings.ReplaceAll(want, "ns/", r.ns+"/"); !strings.Contains(cause, want) {
					t.Errorf("the cause lacks %q", want)
				}
			}
			// helm keeps the wait's error in its release record, which
			// helm history shows: decoded as it reads it
			var record string
			if r.way == "helm-wait" {
				record = releaseRecord(t, e.c, r.ns, "web")
			}
			for _, s := range []string{policySecret, logSecret, logSecret[:8]} {
				if strings.Contains(msg, s) || strings.Contains(strings.Join(o.progress, "\n"), s) || strings.Contains(record, s) {
					t.Errorf("a planted secret shows")
				}
			}
			// progress showed the cause once it was stuck, once: never a
			// line per look
			var stuck []string
			for _, l := range o.progress {
				if strings.HasPrefix(l, "stuck: ") {
					stuck = append(stuck, l)
				}
			}
			if len(stuck) != 1 || !strings.Contains(stuck[0], object) {
				t.Errorf("progress lines %q\nwant one stuck: line naming %s", o.progress, object)
			}
		})
	}
}

// quota: the namespace may hold no pod.
func quota(t *testing.T, e *env, ns string) {
	steptest.Create(t, e.c, ns, "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: no-pods}\nspec: {hard: {pods: \"0\"}}\n")
	// the quota admits nothing before the controller computed its status
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := e.c.Typed.CoreV1().ResourceQuotas(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=no-pods"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if q, ok := ev.Object.(*corev1.ResourceQuota); ok && q.Status.Hard != nil {
			return
		}
	}
	t.Fatal("the quota controller computed no status for the quota within 30 s")
}

// claim: a claim of a storage class that does not exist.
func claim(t *testing.T, e *env, ns string) {
	steptest.Create(t, e.c, ns, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  storageClassName: no-such-class\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n")
}

// denyPods: the admission policy refuses Pods in ns (finish makes it).
func denyPods(t *testing.T, e *env, ns string) {
	e.denied = append(e.denied, ns)
}

// crashLogs: kwok serves a log that quotes a secret for the Pods of ns
// (finish makes it).
func crashLogs(t *testing.T, e *env, ns string) {
	e.crashing = append(e.crashing, ns)
}

// finish makes what the setups asked for, for all their namespaces at
// once: the denying admission policy (and waits until it denies), the
// crash logs (and waits until kwok serves them).
func (e *env) finish(t *testing.T) {
	if len(e.denied) > 0 {
		denyPolicy(t, e.c, e.denied)
	}
	if len(e.crashing) > 0 {
		logFile := filepath.Join(t.TempDir(), "crash.log")
		// the last line is cut to its bound inside the secret: the
		// redactor masks the whole output first, so no part of it stays
		log := "2026-11-22T05:00:00.000000000Z stdout F starting\n2026-11-22T05:00:01.000000000Z stderr F fatal: cannot authenticate with token " + logSecret + "\n" +
			"2026-11-22T05:00:02.000000000Z stderr F " + strings.Repeat("x", 392) + logSecret + "\n"
		if err := os.WriteFile(logFile, []byte(log), 0o644); err != nil {
			t.Fatal(err)
		}
		servePodLogs(t, e.c, e.crashing, logFile)
	}
}

// denyPolicy makes a ValidatingAdmissionPolicy that denies every Pod
// created in namespaces, quoting a planted secret, and waits until the
// API server enforces it.
func denyPolicy(t *testing.T, c *kube.Clients, namespaces []string) {
	const name = "khook-test-deny-pods"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ns []any
	for _, n := range namespaces {
		ns = append(ns, n)
	}
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"pods"}}}},
			"validations": []any{map[string]any{"expression": "false", "message": "pods are not allowed here: the token " + policySecret + " is revoked"}},
		},
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"policyName": name, "validationActions": []any{"Deny"},
			"matchResources": map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{
				"key": "kubernetes.io/metadata.name", "operator": "In", "values": ns}}}},
		},
	}}
	for _, o := range []*unstructured.Unstructured{policy, binding} {
		m, err := c.MappingFor(ctx, o.GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		ri := c.Resource(m, "")
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
	}
	// the API server loads policies from its informers: a dry-run Pod
	// says when it denies
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := c.Typed.CoreV1().Pods(namespaces[0]).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "denied request") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the admission policy denies nothing within 30 s (last: %v)", err)
		case <-tick.C:
		}
	}
}

// servePodLogs makes kwok serve logFile as the log of every container in
// namespaces (a kwok ClusterLogs object) and returns once a probe Pod's
// log reads so.
func servePodLogs(t *testing.T, c *kube.Clients, namespaces []string, logFile string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := c.MappingForType(ctx, "clusterlogs.kwok.x-k8s.io")
	if err != nil {
		t.Fatalf("kwok serves no pod logs in this test cluster: %v", err)
	}
	var ns []any
	for _, n := range namespaces {
		ns = append(ns, n)
	}
	name := "stuck-" + namespaces[0]
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"selector": map[string]any{"matchNamespaces": ns}, "logs": []any{map[string]any{"logsFile": logFile}}},
	}}
	if _, err := c.Resource(m, "").Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Resource(m, "").Delete(context.Background(), name, metav1.DeleteOptions{}) })
	probe, err := c.Typed.CoreV1().Pods(namespaces[0]).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "log-probe"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "x"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		raw, err := c.Typed.CoreV1().Pods(namespaces[0]).GetLogs(probe.Name, &corev1.PodLogOptions{Container: "probe"}).Do(ctx).Raw()
		if err == nil && strings.Contains(string(raw), "cannot authenticate") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kwok serves no pod logs within 30 s (last error: %v)", err)
		case <-tick.C:
		}
	}
}

// TestStuckHooksSayWhy: a chart's hook Job that fails, or that can create
// no Pod, and an atomic install that is rolled back: the error says why,
// from the hook Job's Pod or the refusal, through Helm's own wording.
func TestStuckHooksSayWhy(t *testing.T) {
	cl := testcluster.Get(t)
	e := &env{cl: cl, c: steptest.Clients(t, cl.RESTConfig(t)), red: redact.New(), timeout: stuckTimeout}
	hook := func(extra string) string {
		return "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations: {helm.sh/hook: post-install}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n" +
			extra + "      containers:\n      - name: migrate\n        image: registry.invalid/migrate:1\n        env: [{name: KHOOK_TEST_EXIT_CODE, value: \"3\"}]\n"
	}
	config := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"
	quotaNS := cl.NewNamespace(t, "hook-atomic")
	quota(t, e, quotaNS)
	rows := []struct {
		name, ns string
		req      *step.Request
		want     []string
	}{
		{name: "hook-fails", ns: cl.NewNamespace(t, "hook-fails"), want: []string{
			"failed post-install: Job ns/migrate failed: BackoffLimitExceeded: Job has reached the specified backoff limit; cause: Pod ns/migrate-",
			": container migrate exited with code 3 (Error)"}},
		{name: "hook-no-pod", ns: cl.NewNamespace(t, "hook-no-pod"), want: []string{
			"timed out waiting for completion of the hook on Job ns/migrate: 0 active; cause: Job ns/migrate: FailedCreate: Error creating: pods \"migrate-",
			`error looking up service account ns/no-such-account: serviceaccount "no-such-account" not found`}},
		{name: "atomic", ns: quotaNS, want: []string{
			"has been uninstalled due to atomic being set: timed out waiting for readiness on Deployment ns/web",
			"; cause: ReplicaSet ns/web-", "exceeded quota: no-pods"}},
	}
	execs := make([]step.Executor, len(rows))
	reqs := make([]*step.Request, len(rows))
	for i, r := range rows {
		var body string
		switch r.name {
		case "hook-fails":
			body = "name: web\nhelm:\n  chart: " + chart(t, map[string]string{"config.yaml": config, "hook.yaml": hook("")}) + "\n  namespace: " + r.ns
		case "hook-no-pod":
			body = "name: web\nhelm:\n  chart: " + chart(t, map[string]string{"config.yaml": config, "hook.yaml": hook("      serviceAccountName: no-such-account\n")}) + "\n  namespace: " + r.ns
		case "atomic":
			body = "name: web\nhelm:\n  chart: " + chart(t, map[string]string{"deployment.yaml": cause{}.deployment()}) + "\n  namespace: " + r.ns + "\n  atomic: true"
		}
		execs[i], reqs[i] = helmstep.New(helmstep.Options{}), e.request(t, body)
	}
	outcomes := run(execs, reqs)
	for i, r := range rows {
		o := outcomes[i]
		t.Run(r.name, func(t *testing.T) {
			if o.err == nil {
				t.Fatal("the step succeeded")
			}
			msg := o.err.Error()
			t.Logf("error after %s: %s", o.took.Round(100*time.Millisecond), msg)
			for _, want := range r.want {
				if want = strings.ReplaceAll(want, "ns/", r.ns+"/"); !strings.Contains(msg, want) {
					t.Errorf("the error lacks %q", want)
				}
			}
		})
	}
}

// TestSlowRolloutShowsNoCause: Pods that become ready after some seconds
// (kwok.khook.io/ready-after), past the first diagnosis, both ways a slow
// Pod shows: Pending until then, and Running with its containers not
// ready and a failed readiness probe (an Unhealthy event, once: the
// kwok.khook.io/pod: slow-probe stages), as a kubelet shows an
// application that starts slowly. Every way of waiting succeeds, its
// progress shows no cause, and the diagnosis did run (it listed the
// Pods, and read the events of the running ones) and found nothing to
// say.
func TestSlowRolloutShowsNoCause(t *testing.T) {
	cl := testcluster.Get(t)
	slows := []struct {
		name  string
		cause cause
	}{
		{"pending", cause{annotations: map[string]string{"kwok.khook.io/ready-after": "9s"}}},
		{"running", cause{annotations: map[string]string{"kwok.khook.io/pod": "slow-probe", "kwok.khook.io/ready-after": "9s"}}},
	}
	e := &env{cl: cl, red: redact.New(), timeout: time.Minute}
	e.c = steptest.Clients(t, cl.RESTConfig(t))
	var execs []step.Executor
	var reqs []*step.Request
	var seen []*requestLog
	var names []string
	for _, slow := range slows {
		for _, w := range ways {
			ns := cl.NewNamespace(t, "slow-"+slow.name+"-"+w.name)
			ex, req := w.request(t, e, ns, slow.cause.deployment())
			log := &requestLog{}
			req.Kube = steptest.Clients(t, log.config(cl.RESTConfig(t)))
			execs, reqs, seen = append(execs, ex), append(reqs, req), append(seen, log)
			names = append(names, slow.name+"/"+w.name)
		}
	}
	outcomes := run(execs, reqs)
	for i, name := range names {
		o := outcomes[i]
		t.Run(name, func(t *testing.T) {
			if o.err != nil {
				t.Fatalf("a slow but healthy rollout failed: %v", o.err)
			}
			if o.took < 8*time.Second {
				t.Fatalf("the rollout took %s: the Pods were not slow (kwok.khook.io/ready-after)", o.took)
			}
			for _, l := range o.progress {
				if strings.Contains(l, "stuck") || strings.Contains(l, "cause") {
					t.Errorf("progress shows a cause: %q", l)
				}
			}
			if !seen[i].has("/pods?", "limit=100") {
				t.Errorf("the wait never looked for a cause (no Pod listed by the diagnosis): %q", seen[i].all())
			}
			if strings.HasPrefix(name, "running/") && !seen[i].has("/events?", "Warning") {
				t.Errorf("the wait never read the running Pods' events: %q", seen[i].all())
			}
		})
	}
}

// TestDiagnosisReadsWhatThePodNeeds: a Pod that stays ContainerCreating
// without a word has its references checked (a ConfigMap volume that does
// not exist), and a Warning event that quotes a secret is shown masked.
func TestDiagnosisReadsWhatThePodNeeds(t *testing.T) {
	cl := testcluster.Get(t)
	const secret = "ev-s3cret-planted-77a"
	e := &env{cl: cl, c: steptest.Clients(t, cl.RESTConfig(t)), red: redact.New(), timeout: 7 * time.Second}
	e.red.Add(secret)
	creating := map[string]string{"kwok.khook.io/pod": "container-creating"}
	refNS := cl.NewNamespace(t, "diag-refs")
	missing := cause{annotations: creating, pod: "volumes: [{name: cfg, configMap: {name: no-such-config}}]"}
	evNS := cl.NewNamespace(t, "diag-event")
	pod := steptest.Create(t, e.c, evNS, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations: {kwok.khook.io/pod: container-creating}\nspec:\n  containers: [{name: app, image: x}]\n")
	// a Warning event as a kubelet would post it, quoting a secret
	if _, err := e.c.Typed.CoreV1().Events(evNS).Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "web."},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: evNS, Name: "web", UID: pod.GetUID(), APIVersion: "v1"},
		Type:           corev1.EventTypeWarning, Reason: "FailedMount",
		Message: `MountVolume.SetUp failed for volume "creds" : secret "` + secret + `" not found`,
		Source:  corev1.EventSource{Component: "kubelet"}, LastTimestamp: metav1.Now(), Count: 1,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	execs := []step.Executor{apply.New(apply.Options{}), wait.New()}
	reqs := []*step.Request{
		e.request(t, "name: web\napply:\n  namespace: "+refNS+"\n  waitFor: condition=Available\n  manifests:\n  - inline: |\n"+indent(missing.deployment(), "      ")),
		e.request(t, "name: web\nwait:\n  for: condition=Ready\n  on: pod/web\n  namespace: "+evNS),
	}
	outcomes := run(execs, reqs)
	for i, want := range []string{
		"; cause: 2 of 2 pods (Pod " + refNS + "/web-",
		"; cause: Pod " + evNS + `/web: FailedMount: MountVolume.SetUp failed for volume "creds" : secret "***" not found`,
	} {
		o := outcomes[i]
		if o.err == nil {
			t.Fatalf("step %d succeeded", i)
		}
		msg := o.err.Error()
		t.Logf("error: %s", msg)
		if !strings.Contains(msg, want) || strings.Contains(msg, secret) || strings.Contains(strings.Join(o.progress, "\n"), secret) {
			t.Errorf("error %q\nwant %q, masked", msg, want)
		}
	}
	if msg := outcomes[0].err.Error(); !strings.Contains(msg, `: volume cfg: configmaps "no-such-config" not found`) {
		t.Errorf("the missing ConfigMap is not named: %s", msg)
	}
}

// requestLog records the requests of a client.
type requestLog struct {
	mu   sync.Mutex
	urls []string
}

func (l *requestLog) config(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.urls = append(l.urls, r.Method+" "+r.URL.RequestURI())
			l.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// has reports whether a request's URL held every part.
func (l *requestLog) has(parts ...string) bool {
	for _, u := range l.all() {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(u, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.urls...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestStuckWorkloadKinds: a StatefulSet and a DaemonSet whose Pods fail,
// and a StatefulSet that can create no Pod, waited for by rollout status:
// the cause comes from their Pods, or from the StatefulSet's own events.
func TestStuckWorkloadKinds(t *testing.T) {
	cl := testcluster.Get(t)
	e := &env{cl: cl, c: steptest.Clients(t, cl.RESTConfig(t)), red: redact.New(), timeout: 10 * time.Second}
	workload := func(kind, annotation, spec string) string {
		y := "apiVersion: apps/v1\nkind: " + kind + "\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n"
		if kind == "StatefulSet" {
			y += "  serviceName: web\n  replicas: 1\n"
		}
		y += "  template:\n    metadata:\n      labels: {app: web}\n"
		if annotation != "" {
			y += "      annotations: {kwok.khook.io/pod: " + annotation + "}\n"
		}
		return y + "    spec:\n" + spec + "      containers: [{name: app, image: registry.invalid/nope:1}]\n"
	}
	quotaNS := cl.NewNamespace(t, "sts-quota")
	quota(t, e, quotaNS)
	rows := []struct {
		name, ns, yaml, target string
		want                   []string
	}{
		{"statefulset-image-pull", cl.NewNamespace(t, "sts-pull"), workload("StatefulSet", "image-pull-fails", ""), "statefulset/web",
			[]string{"; cause: Pod ns/web-0: container app: ", "registry.invalid/nope:1", "not found"}},
		{"daemonset-readiness", cl.NewNamespace(t, "ds-ready"), workload("DaemonSet", "never-ready", ""), "daemonset/web",
			[]string{"; cause: Pod ns/web-", ": Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 503"}},
		{"statefulset-quota", quotaNS, workload("StatefulSet", "", ""), "statefulset/web",
			[]string{"; cause: StatefulSet ns/web: FailedCreate: Create Pod web-0 in StatefulSet web failed error: pods \"web-0\" is forbidden: exceeded quota: no-pods"}},
	}
	var execs []step.Executor
	var reqs []*step.Request
	for _, r := range rows {
		steptest.Create(t, e.c, r.ns, r.yaml)
		execs = append(execs, rollout.New())
		reqs = append(reqs, e.request(t, "name: web\nrollout:\n  status: "+r.target+"\n  namespace: "+r.ns))
	}
	outcomes := run(execs, reqs)
	for i, r := range rows {
		o := outcomes[i]
		t.Run(r.name, func(t *testing.T) {
			if o.err == nil {
				t.Fatal("the rollout succeeded")
			}
			msg := o.err.Error()
			t.Logf("error: %s", msg)
			for _, want := range r.want {
				if want = strings.ReplaceAll(want, "ns/", r.ns+"/"); !strings.Contains(msg, want) {
					t.Errorf("the error lacks %q", want)
				}
			}
		})
	}
}
