//go:build integration

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"khook.io/core/lock"
	"khook.io/core/objects"
	"khook.io/core/testing/testcluster"
	"khook.io/core/testing/testenv"
)

// companionType is the type of the Secrets that keep khook's record
// beside an object (objects.CompanionType; spelt out so that the test
// runs against builds before it).
const companionType = "khook.io/previous"

// kubectlBin is the kubectl of the test cluster's binaries
// (docs/test-cluster.md).
func kubectlBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(testcluster.EnvTestbin)
	if bin == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(root, ".cache", "testbin", "bin")
	}
	return filepath.Join(bin, "kubectl")
}

// kubectl runs the test cluster's kubectl in ns and fails the test when
// it fails.
func kubectl(t *testing.T, ns, stdin string, args ...string) string {
	t.Helper()
	res := run(t, kubectlBin(t), kubeEnv(t), stdin, append(args, "-n", ns)...)
	if res.Code != 0 {
		t.Fatalf("kubectl %s: exit %d\n%s%s", strings.Join(args, " "), res.Code, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// ptyStep is one moment of a conversation with destroy on a terminal:
// when what it printed holds marker, do runs (with all printed so far).
type ptyStep struct {
	marker string
	do     func(printed string)
}

// ptyConverse runs the binary on a pseudo-terminal, calls each step's do
// once its marker was printed (in order, the binary going on meanwhile
// unless it waits for input), then answers, and returns the exit code and
// all it printed.
func ptyConverse(t *testing.T, env []string, steps []ptyStep, answer string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Kubectl, args...)
	cmd.Env = env
	f, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	printed := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			select {
			case printed <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	snapshot := func() string {
		mu.Lock()
		defer mu.Unlock()
		return out.String()
	}
	for _, s := range steps {
		for !strings.Contains(snapshot(), s.marker) {
			select {
			case <-printed:
			case <-done:
				goto wait
			}
		}
		s.do(snapshot())
	}
	if _, err := io.WriteString(f, answer+"\n"); err != nil {
		t.Fatal(err)
	}
wait:
	werr := cmd.Wait()
	// the binary has ended, but what it printed last may still be in the
	// terminal's buffer: read it to its end (EIO once drained) before
	// closing, or its last line is lost (a "destroy cancelled" went
	// missing so, on a loaded machine)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	f.Close()
	<-done
	code := 0
	if ee, ok := werr.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if werr != nil {
		t.Fatal(werr)
	}
	return code, snapshot()
}

// shownSpec creates two ConfigMaps and configures two that another team
// applied with kubectl.
const shownSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: shown}
state: {namespace: %[1]s}
steps:
  - name: mine
    apply:
      namespace: %[1]s
      manifests:
        - inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine-a}\ndata: {a: \"1\"}\n"
        - inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine-b}\ndata: {b: \"1\"}\n"
  - name: theirs
    apply:
      namespace: %[1]s
      manifests:
        - inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs-a}\ndata: {k: khook}\n"
        - inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs-b}\ndata: {k: khook}\n"
`

// TestDestroyRunsWhatItShowed: destroy holds the run lock from the first
// line of its plan (the Lease names destroy as its holder when that line
// shows, and an apply started while it asks is refused); kubectl writes,
// which the lock does not stop, change a ConfigMap the spec created and
// one it configured between the question and the answer: those two are
// refused, each named, as a stale plan is refused (exit 1), and the
// others are carried out as shown. A second destroy then plans again and
// undoes them, kubectl's label staying on the one khook configured.
func TestDestroyRunsWhatItShowed(t *testing.T) {
	cs := typed(t)
	ctx := context.Background()
	ns := testcluster.Get(t).NewNamespace(t, "shown")
	for _, name := range []string{"theirs-a", "theirs-b"} {
		kubectl(t, ns, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {k: before}\n", name), "apply", "-f", "-")
	}
	spec := writeSpec(t, fmt.Sprintf(shownSpec, ns))
	if _, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	code, out := ptyConverse(t, kubeEnv(t), []ptyStep{
		{marker: "Destroy plan of spec shown", do: func(string) {
			h, held, err := lock.Read(ctx, cs, lock.Location{Namespace: ns, Name: "khook-state-shown"})
			if err != nil || !held || h.Command != "destroy" {
				t.Errorf("at the first line of destroy's plan the run lock is not destroy's: held %v by %+v (%v)", held, h, err)
			}
		}},
		{marker: "or 'yes' to destroy: ", do: func(string) {
			if res := run(t, bins.Kubectl, kubeEnv(t), "", "apply", "-f", spec); res.Code != 1 || !strings.Contains(res.Stderr, "is locked by another run") {
				t.Errorf("an apply while destroy asks: exit %d, want 1, refused by destroy's lock\n%s", res.Code, res.Stderr)
			}
			// kubectl is no khook run: the lock does not stop it
			kubectl(t, ns, "", "label", "configmap", "mine-a", "late=kubectl")
			kubectl(t, ns, "", "label", "configmap", "theirs-a", "late=kubectl")
		}},
	}, "yes", "destroy", "-f", spec)
	if code != 1 {
		t.Fatalf("destroy after kubectl changed two objects: exit %d, want 1\n%s", code, out)
	}
	for _, name := range []string{"ConfigMap/mine-a in " + ns, "ConfigMap/theirs-a in " + ns} {
		if !strings.Contains(out, name+": changed since destroy's plan") {
			t.Errorf("destroy does not refuse %s as changed since its plan:\n%s", name, out)
		}
	}
	data := func(name string) map[string]string {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}
	// refused: left as they were; the rest as shown
	if data("mine-a") == nil || data("mine-b") != nil {
		t.Errorf("after destroy: mine-a %v (changed: kept), mine-b %v (deleted)", data("mine-a"), data("mine-b"))
	}
	if d := data("theirs-a"); d["k"] != "khook" {
		t.Errorf("theirs-a, changed since the plan, is not left as it was: %v", d)
	}
	if d := data("theirs-b"); d["k"] != "before" {
		t.Errorf("theirs-b is not given back: %v", d)
	}
	// a destroy that plans again carries out its own plan
	if _, res := applyJSON(t, "destroy", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("a second destroy: exit %d\n%s", res.Code, res.Stderr)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "theirs-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["k"] != "before" || cm.Labels["late"] != "kubectl" {
		t.Errorf("theirs-a after the second destroy: data %v labels %v, want k given back and kubectl's label kept", cm.Data, cm.Labels)
	}
	if data("mine-a") != nil {
		t.Error("mine-a is left after the second destroy")
	}
}

// givenSpec configures a ConfigMap and a Deployment another team made
// with kubectl, and creates a ConfigMap.
const givenSpec = `apiVersion: khook.io/v1
kind: Khook
metadata: {name: given}
steps:
  - name: app
    apply:
      namespace: %[1]s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: mine}
            data: {a: "1"}
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: theirs, labels: {khook: added}}
            data: {k: khook, added: by-khook}
        - inline: |
            apiVersion: apps/v1
            kind: Deployment
            metadata: {name: web, labels: {app: web}}
            spec:
              replicas: 1
              selector: {matchLabels: {app: web}}
              template:
                metadata: {labels: {app: web}}
                spec:
                  containers:
                  - name: nginx
                    image: nginx:2.0
                    env: [{name: MODE, value: khook-mode}]
`

// theirMode is the env value kubectl set before khook: khook's record
// holds it while khook's value is there.
const theirMode = "their-mode-5e1b7"

// giveBackSetup makes what another team applied with kubectl before
// khook (a ConfigMap by client-side apply, a Deployment by kubectl create
// and kubectl set env), then applies givenSpec, and waits until the
// Deployment's ReplicaSet of khook's template exists.
func giveBackSetup(t *testing.T, ns, spec string) {
	t.Helper()
	kubectl(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs, labels: {team: a}}\ndata: {k: before, keep: theirs}\n", "apply", "-f", "-")
	kubectl(t, ns, "", "create", "deployment", "web", "--image=nginx:1.0")
	kubectl(t, ns, "", "set", "env", "deployment/web", "MODE="+theirMode)
	if _, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	cs := typed(t)
	eventually(t, time.Minute, "the ReplicaSet of khook's template", func() bool {
		for _, rs := range replicaSets(t, cs, ns, "web") {
			if strings.Contains(fmt.Sprint(rs.Spec.Template.Spec.Containers), "nginx:2.0") {
				return true
			}
		}
		return false
	})
}

// replicaSets are the ReplicaSets of Deployment name in ns, on the server.
func replicaSets(t *testing.T, cs kubernetes.Interface, ns, name string) []appsv1.ReplicaSet {
	t.Helper()
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []appsv1.ReplicaSet
	for _, rs := range list.Items {
		if metav1.IsControlledBy(&rs, d) {
			out = append(out, rs)
		}
	}
	return out
}

// endState is what a destroy leaves of givenSpec's objects, for
// comparison: each object's content and its field managers (the
// controllers' aside), the ReplicaSets' annotations that hold khook's
// record or a value it recorded, and the companions of khook's record.
func endState(t *testing.T, cs kubernetes.Interface, ns string) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	managers := func(entries []metav1.ManagedFieldsEntry) []string {
		var out []string
		for _, e := range entries {
			if e.Manager != "kube-controller-manager" {
				out = append(out, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
			}
		}
		sort.Strings(out)
		return out
	}
	for _, name := range []string{"mine", "theirs"} {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(&b, "ConfigMap %s: gone\n", name)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "ConfigMap %s: data %v labels %v annotations %v managers %v\n", name, cm.Data, cm.Labels, cm.Annotations, managers(cm.ManagedFields))
	}
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ann := copyMap(d.Annotations)
	delete(ann, "deployment.kubernetes.io/revision")
	fmt.Fprintf(&b, "Deployment web: containers %v labels %v annotations %v managers %v\n", d.Spec.Template.Spec.Containers, d.Labels, ann, managers(d.ManagedFields))
	for _, rs := range replicaSets(t, cs, ns, "web") {
		for k, v := range rs.Annotations {
			if k == objects.AnnotationPrevious || strings.Contains(v, theirMode) {
				fmt.Fprintf(&b, "ReplicaSet %s: annotation %s holds khook's record: %s\n", rs.Name, k, v)
			}
		}
	}
	list, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=" + companionType})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "companions of khook's record: %d\n", len(list.Items))
	return b.String()
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestDestroyLeavesNoRecordBehind: a Deployment made with kubectl create
// deployment and kubectl set env, configured by an apply step (a new
// image, a new env value) until its new ReplicaSet exists, is given back
// exactly by destroy, and no ReplicaSet of it carries khook's record or a
// value khook recorded (the env value kubectl set), on the server: the
// deployment controller copies a Deployment's annotations onto its
// ReplicaSets and never removes them there. Nothing of khook's record is
// left anywhere.
func TestDestroyLeavesNoRecordBehind(t *testing.T) {
	cs := typed(t)
	ns := testcluster.Get(t).NewNamespace(t, "norecord")
	spec := writeSpec(t, fmt.Sprintf(givenSpec, ns))
	giveBackSetup(t, ns, spec)
	if _, res := applyJSON(t, "destroy", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("destroy: exit %d\n%s", res.Code, res.Stderr)
	}
	end := endState(t, cs, ns)
	t.Logf("after destroy:\n%s", end)
	if strings.Contains(end, "holds khook's record") || !strings.Contains(end, "companions of khook's record: 0") {
		t.Errorf("destroy left khook's record behind:\n%s", end)
	}
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "nginx:1.0" || len(c.Env) != 1 || c.Env[0].Value != theirMode {
		t.Errorf("the Deployment is not given back: image %s env %v", c.Image, c.Env)
	}
	if n := len(replicaSets(t, cs, ns, "web")); n < 2 {
		t.Errorf("%d ReplicaSets: khook's configuration made none", n)
	}
}

// killProxy is an HTTP proxy in front of the test cluster's API server
// that kills the process it serves (SIGKILL) right after the API server
// answered its killAt-th write in ns, before the answer reaches it: the
// write happened, the process never heard of it.
type killProxy struct {
	srv *httptest.Server
	ns  string

	mu     sync.Mutex
	writes int
	killAt int
	proc   *os.Process
	killed bool
}

func newKillProxy(t *testing.T, ns string) *killProxy {
	t.Helper()
	cfg := testcluster.Get(t).RESTConfig(t)
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &killProxy{ns: ns}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     rt,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			r := resp.Request
			write := r.Method != http.MethodGet && r.URL.Query().Get("dryRun") == "" && resp.StatusCode < 300 &&
				strings.Contains(r.URL.Path, "/namespaces/"+ns+"/")
			if !write {
				return nil
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			p.writes++
			if p.killAt > 0 && p.writes == p.killAt && p.proc != nil {
				_ = p.proc.Kill()
				p.killed = true
				return errors.New("killed")
			}
			return nil
		},
	}
	p.srv = httptest.NewServer(rp)
	t.Cleanup(p.srv.Close)
	return p
}

// kubeconfig is a kubeconfig whose server is the proxy.
func (p *killProxy) kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	body := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: p, cluster: {server: %q}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: p, context: {cluster: p, user: u, namespace: %s}}]\ncurrent-context: p\n", p.srv.URL, p.ns)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// destroy runs destroy --yes through the proxy, killed after its
// killAt-th write (never with 0); it returns how many writes it made and
// whether it was killed.
func (p *killProxy) destroy(t *testing.T, spec string, killAt int) (int, bool) {
	t.Helper()
	p.mu.Lock()
	p.writes, p.killAt, p.killed, p.proc = 0, killAt, false, nil
	p.mu.Unlock()
	cmd := exec.Command(bins.Kubectl, "destroy", "--yes", "-f", spec)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "KUBECONFIG=" + p.kubeconfig(t)}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p.mu.Lock()
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		t.Fatal(err)
	}
	p.proc = cmd.Process
	p.mu.Unlock()
	err := cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.killed && err != nil {
		t.Fatalf("destroy through the proxy: %v\n%s", err, out.String())
	}
	return p.writes, p.killed
}

// TestDestroyKilledAfterAnyWriteGivesTheSameEnd: destroy of objects khook
// created and configured (a ConfigMap and a Deployment another team made
// with kubectl), killed right after each of its writes in turn (the API
// server did it, the process never heard), then run again, leaves what
// one uninterrupted destroy leaves: khook's record leaves an object only
// once the values it holds are back, so the second destroy still knows
// what to give back and never takes another writer's fields for khook's.
func TestDestroyKilledAfterAnyWriteGivesTheSameEnd(t *testing.T) {
	cs := typed(t)
	ns := testcluster.Get(t).NewNamespace(t, "killwrite")
	spec := writeSpec(t, fmt.Sprintf(givenSpec, ns))
	p := newKillProxy(t, ns)
	reset := func() {
		t.Helper()
		for _, o := range []string{"configmap/mine", "configmap/theirs", "deployment/web"} {
			kubectl(t, ns, "", "delete", o, "--ignore-not-found", "--wait")
		}
		kubectl(t, ns, "", "delete", "secrets", "--field-selector", "type="+companionType, "--ignore-not-found")
		giveBackSetup(t, ns, spec)
	}
	reset()
	writes, _ := p.destroy(t, spec, 0)
	want := endState(t, cs, ns)
	t.Logf("an uninterrupted destroy makes %d writes and leaves:\n%s", writes, want)
	if writes < 4 {
		t.Fatalf("an uninterrupted destroy made %d writes: the test would prove nothing", writes)
	}
	for n := 1; n < writes; n++ {
		t.Run(fmt.Sprintf("killed after write %d", n), func(t *testing.T) {
			reset()
			if _, killed := p.destroy(t, spec, n); !killed {
				t.Fatalf("destroy was not killed after write %d", n)
			}
			if _, res := applyJSON(t, "destroy", spec, kubeEnv(t)); res.Code != 0 {
				t.Fatalf("destroy again: exit %d\n%s", res.Code, res.Stderr)
			}
			if got := endState(t, cs, ns); got != want {
				t.Errorf("killed after write %d, then destroyed again:\n%s\nwant, as one uninterrupted destroy leaves:\n%s", n, got, want)
			}
		})
	}
}

// TestGiveBackLargeLastApplied: a ConfigMap applied client-side by kubectl
// with a 190 KiB value (its last-applied annotation as big), configured
// by khook's client-side apply (which drops the large key, as kubectl's
// three-way patch does), is given back exactly by destroy: its data,
// labels and annotations (kubectl's last-applied configuration) as they
// were. The record does not fit the object's annotations (256 KiB in all)
// and is kept beside it while khook's values are there.
func TestGiveBackLargeLastApplied(t *testing.T) {
	cs := typed(t)
	ctx := context.Background()
	ns := testcluster.Get(t).NewNamespace(t, "largeapplied")
	big := strings.Repeat("0123456789abcdef", 190<<10/16)
	kubectl(t, ns, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, labels: {team: a}}\ndata: {k: before, big: %q}\n", big), "apply", "-f", "-")
	before, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(before.Annotations["kubectl.kubernetes.io/last-applied-configuration"]); n < 190<<10 {
		t.Fatalf("kubectl's last-applied configuration holds %d bytes, want 190 KiB", n)
	}
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: largeapplied}
steps:
  - name: cm
    apply:
      namespace: %s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: big, labels: {khook: added}}
            data: {k: khook}
`, ns))
	if _, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	configured, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if configured.Data["k"] != "khook" {
		t.Fatalf("khook did not configure the ConfigMap: %v", configured.Data["k"])
	}
	if _, res := applyJSON(t, "destroy", spec, kubeEnv(t)); res.Code != 0 {
		t.Fatalf("destroy: exit %d\n%s", res.Code, res.Stderr)
	}
	after, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.Data, before.Data) {
		t.Errorf("data after destroy: k=%q, big %d bytes (given back: %v), want as before", after.Data["k"], len(after.Data["big"]), after.Data["big"] == big)
	}
	if !reflect.DeepEqual(after.Labels, before.Labels) || !reflect.DeepEqual(after.Annotations, before.Annotations) {
		var keys []string
		for k, v := range after.Annotations {
			keys = append(keys, fmt.Sprintf("%s (%d bytes, as before: %v)", k, len(v), before.Annotations[k] == v))
		}
		t.Errorf("labels %v, annotations %v after destroy, want labels %v and the annotations as before", after.Labels, keys, before.Labels)
	}
	list, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=" + companionType})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("khook's record left beside the ConfigMap: %d (%v)", len(list.Items), err)
	}
}

// TestDestroyUnderFieldManagerGivesBack: an object another tool made
// (kubectl create, field manager kubectl-create), configured by apply
// --field-manager ops, is given back by destroy --field-manager ops: its
// values as they were, and on managedFields nothing of ops' or of
// khook's (neither ops nor ops-previous, neither khook nor
// khook-previous) while the creator's entry stays.
func TestDestroyUnderFieldManagerGivesBack(t *testing.T) {
	cs := typed(t)
	ctx := context.Background()
	ns := testcluster.Get(t).NewNamespace(t, "fmgiveback")
	kubectl(t, ns, "", "create", "configmap", "tool", "--from-literal=k=before", "--from-literal=keep=theirs")
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: fmgiveback}
steps:
  - name: cm
    apply:
      namespace: %s
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: tool}
            data: {k: khook, added: by-khook}
`, ns))
	if _, res := applyJSON(t, "apply", spec, kubeEnv(t), "--field-manager", "ops"); res.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	mid, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "tool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(mid.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "ops" }) {
		t.Fatalf("apply --field-manager ops did not write as ops: %v", mid.ManagedFields)
	}
	if _, res := applyJSON(t, "destroy", spec, kubeEnv(t), "--field-manager", "ops"); res.Code != 0 {
		t.Fatalf("destroy: exit %d\n%s", res.Code, res.Stderr)
	}
	after, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "tool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.Data, map[string]string{"k": "before", "keep": "theirs"}) {
		t.Errorf("data after destroy %v, want as kubectl made it", after.Data)
	}
	if _, ok := after.Annotations[objects.AnnotationPrevious]; ok {
		t.Errorf("khook's record is left: %v", after.Annotations)
	}
	var managers []string
	for _, e := range after.ManagedFields {
		managers = append(managers, e.Manager+"/"+string(e.Operation))
		switch e.Manager {
		case "ops", "ops-previous", "khook", "khook-previous":
			t.Errorf("after destroy --field-manager ops, %s still owns fields: %s", e.Manager, e.FieldsV1)
		}
	}
	if !slices.Contains(managers, "kubectl-create/Update") {
		t.Errorf("the creator's entry is gone: %v", managers)
	}
}
