//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/lock"
	"khook.io/core/state"
	"khook.io/core/testing/chartrepo"
)

// API-server outages and the run lock (docs/spec.md 200-209), on a
// private cluster whose API server the tests stop, kill and start again.
// One cluster serves every subtest.

// outageSpec is a spec with a state record in ns: a wait step "gate"
// (ConfigMap gate's open=yes, which the test sets), with helm a helm step
// "app" with wait: true whose Pod nobody schedules (the test binds it),
// both waiting from the start, and three apply steps c0..c2 that need the
// gate.
func outageSpec(t *testing.T, cs kubernetes.Interface, ns string, helm bool) string {
	t.Helper()
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm("gate", map[string]string{"open": "no"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: gate
    timeout: 5m
    wait: {for: "jsonpath={.data.open}=yes", on: configmap/gate, namespace: %[1]s}
`, ns)
	if helm {
		fmt.Fprintf(&b, "  - name: app\n    timeout: 5m\n    helm: {chart: %s, namespace: %s, wait: true, values: {schedulerName: khook-nobody}}\n", chartrepo.ChartDir("cmdeploy"), ns)
	}
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, "  - name: c%[1]d\n    needs: [gate]\n    apply:\n      namespace: %[2]s\n      manifests: [{inline: \"apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: c%[1]d}\\ndata: {v: \\\"%[1]d\\\"}\\n\"}]\n", i, ns)
	}
	return writeSpec(t, b.String())
}

func openGate(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), "gate", types.MergePatchType, []byte(`{"data":{"open":"yes"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// holding waits until a run holds the lock of ns's record and has marked
// its run begun in it (its steps run), and returns the holder.
func holding(t *testing.T, cs kubernetes.Interface, ns string, b *background) lock.Holder {
	t.Helper()
	loc := lock.Location{Namespace: ns, Name: "khook-state-" + ns}
	var h lock.Holder
	eventually(t, failAfter, "the run holds its lock and began", func() bool {
		select {
		case err := <-b.done:
			b.done <- err
			t.Fatalf("the run ended (%v) before it held its lock:\n%s", err, tail(b.Stderr(), 30))
		default:
		}
		var held bool
		var err error
		if h, held, err = lock.Read(context.Background(), cs, loc); err != nil {
			t.Fatal(err)
		}
		rec := readRecord(t, cs, ns, loc.Name)
		return held && rec != nil && rec.RunStatus == "running"
	})
	if h.PID != b.cmd.Process.Pid {
		t.Fatalf("the lock is held by %+v, want pid %d", h, b.cmd.Process.Pid)
	}
	return h
}

// consistent checks the record of ns after a run that succeeded: run ok,
// every step ok with its input hash, and the lock released.
func consistent(t *testing.T, cs kubernetes.Interface, ns string, steps ...string) {
	t.Helper()
	rec := readRecord(t, cs, ns, "khook-state-"+ns)
	if rec == nil || rec.RunStatus != "ok" || rec.FinishedAt == nil {
		t.Fatalf("the record after the run: %s", recordJSON(rec))
	}
	for _, s := range steps {
		if e := rec.Steps[s]; e == nil || e.Status != state.StepOK || e.Hash == "" {
			t.Errorf("step %s in the record: %+v, want ok with its hash", s, e)
		}
	}
	if _, held, err := lock.Read(context.Background(), cs, lock.Location{Namespace: ns, Name: "khook-state-" + ns}); err != nil || held {
		t.Errorf("after the runs ended the lock is still held (%v)", err)
	}
}

// bindAll binds every Pod of release app in ns that nobody scheduled, as
// it appears, to a node, until stop is called: a run that reinstalls the
// release (a recovery) makes new ones.
func bindAll(t *testing.T, cs kubernetes.Interface, ns string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no node to bind to: %v", err)
	}
	node := nodes.Items[0].Name
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=app"})
			if err != nil {
				time.Sleep(100 * time.Millisecond) // the API server may be down: watch again
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted || p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
					continue
				}
				b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
				_ = cs.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{}) // a Pod deleted meanwhile needs none
			}
		}
	}()
	return func() { cancel(); <-done }
}

func reportOf(t *testing.T, b *background) report {
	t.Helper()
	b.mu.Lock()
	out := b.stdout.String()
	b.mu.Unlock()
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-o json: %v\n%s\n%s", err, out, tail(b.Stderr(), 30))
	}
	return r
}

func TestAPIServerOutagesAndTheRunLock(t *testing.T) {
	c := startPrivateCluster(t)
	cs := privateClient(t, c)
	env := []string{"KUBECONFIG=" + c.Kubeconfig}
	outage := func(t *testing.T, down time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		took, err := c.Outage(ctx, down, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the API server was down and ready again after %s", took.Round(100*time.Millisecond))
	}

	// (First, while the cluster has never restarted: the next run's
	// recovery needs the controllers to make a Pod at once.)
	//
	// force-unlock breaks a live holder's lock while its helm step waits
	// and its apply step's create of f-2 is held by an admission webhook.
	// From then on the old holder writes nothing (watched on the server):
	// not helm's record of the interrupted install, not the state record,
	// not f-3. The next run takes the freed lock, knows the broken run is
	// gone and recovers the release it left pending.
	t.Run("a run whose lock was broken writes nothing more", func(t *testing.T) {
		hook := newHoldingWebhook(t, c)
		ns := c.NewNamespace(t, "fence")
		var b strings.Builder
		fmt.Fprintf(&b, `apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: app
    timeout: 5m
    helm: {chart: %[2]s, namespace: %[1]s, wait: true, values: {schedulerName: khook-nobody}}
  - name: objects
    apply:
      namespace: %[1]s
      manifests:
`, ns, chartrepo.ChartDir("cmdeploy"))
		for i := 1; i <= 3; i++ {
			labels := ""
			if i == 2 {
				labels = ", labels: {" + hookLabel + ": \\\"true\\\"}"
			}
			fmt.Fprintf(&b, "        - inline: \"apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: f-%d%s}\\n\"\n", i, labels)
		}
		spec := writeSpec(t, b.String())
		held, release := hook.arm()
		defer release()
		holder := startBackground(t, bins.Kubectl, env, "apply", "-f", spec, "-o", "json")
		h := holding(t, cs, ns, holder)
		pendingInstall(t, cs, ns, holder)
		select {
		case <-held:
		case <-time.After(failAfter):
			t.Fatalf("the create of f-2 never reached the webhook:\n%s", holder.Stderr())
		}

		// every write in the namespace from now on is seen
		ctx := context.Background()
		secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := cs.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: secrets.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Stop()
		wc, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cms.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer wc.Stop()
		record := readRecord(t, cs, ns, "khook-state-"+ns)
		rel := releaseSecret(t, cs, ns, "app", 1)

		if _, err := lock.ForceUnlock(ctx, cs, lock.Location{Namespace: ns, Name: "khook-state-" + ns}, h.ID); err != nil {
			t.Fatal(err)
		}
		if code := holder.exit(t, "the broken run"); code != 1 || !strings.Contains(holder.Stderr(), "lost: force-unlock broke it") {
			t.Fatalf("the broken run: exit %d, want 1 saying its lock was lost\n%s", code, tail(holder.Stderr(), 30))
		}
		// markers written after the old holder exited: every event before
		// them is a write made after the break
		marker := map[string]string{"khook.test/marker": "yes"}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker", Labels: marker}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "marker", Labels: marker}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for what, w := range map[string]watch.Interface{"Secret": ws, "ConfigMap": wc} {
			for done := false; !done; {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatalf("the watch of %ss ended", what)
					}
					m, err := metaOf(ev.Object)
					if err != nil {
						t.Fatalf("%s event %s: %v", what, ev.Type, err)
					}
					if m.GetName() == "marker" {
						done = true
						continue
					}
					t.Errorf("after the break: %s %s/%s %s (resourceVersion %s)", ev.Type, what, m.GetName(), m.GetLabels()["status"], m.GetResourceVersion())
				case <-time.After(failAfter):
					t.Fatalf("the %s marker never came", what)
				}
			}
		}
		if now := readRecord(t, cs, ns, "khook-state-"+ns); now.UpdatedAt != record.UpdatedAt || now.RunStatus != "running" {
			t.Errorf("the record was written after the break: %s", recordJSON(now))
		}
		if now := releaseSecret(t, cs, ns, "app", 1); now.ResourceVersion != rel.ResourceVersion || now.Labels["status"] != "pending-install" {
			t.Errorf("the release was written after the break: %s, resourceVersion %s (was %s)", now.Labels["status"], now.ResourceVersion, rel.ResourceVersion)
		}
		if d := cmData(t, cs, ns, "f-3"); d != nil {
			t.Error("ConfigMap f-3 was created after the break")
		}

		release()
		defer bindAll(t, cs, ns)()
		next := startBackground(t, bins.Kubectl, env, "apply", "-f", spec, "-o", "json")
		if code := next.exit(t, "the next run"); code != 0 {
			t.Fatalf("the next run: exit %d\n%s", code, tail(next.Stderr(), 40))
		}
		for _, want := range []string{"which force-unlock broke from", "run " + h.ID} {
			if !strings.Contains(next.Stderr(), want) {
				t.Errorf("the next run does not say %q:\n%s", want, next.Stderr())
			}
		}
		consistent(t, cs, ns, "app", "objects")
	})

	// A run with a state record waiting in a wait step and in a helm
	// wait: true step when the API server goes away for 30 s keeps its
	// lock and ends well; a run waiting for the lock through the outage
	// (--lock-timeout) does not take it, nor does one started during the
	// outage (it cannot connect) or right after the restart (it sees the
	// holder renew); the waiting one runs once the first ends.
	t.Run("a run rides out a 30s outage and keeps its lock", func(t *testing.T) {
		ns := c.NewNamespace(t, "outage")
		spec := outageSpec(t, cs, ns, true)
		holder := startBackground(t, bins.Kubectl, env, "apply", "-f", spec, "-o", "json")
		h := holding(t, cs, ns, holder)
		pendingInstall(t, cs, ns, holder)
		taker := startBackground(t, bins.Kubectl, env, "apply", "-f", spec, "-o", "json", "--lock-timeout", "5m")
		taker.waitStderr(t, "waiting for the run lock of state record "+ns)

		// a run started while the API server is down cannot even connect
		// (the up-front check is not retried: decision 62)
		during, dir := make(chan Result, 1), root(t)
		go func() {
			if waitRefused(c.Ports.APIServer) != nil {
				close(during)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, _ := Run(ctx, dir, bins.Kubectl, env, "", "apply", "-f", spec, "--lock-timeout", "5m")
			during <- res
		}()
		outage(t, 30*time.Second)
		if res, ok := <-during; !ok || res.Code != 1 || !strings.Contains(res.Stderr, "cannot reach the cluster") {
			t.Errorf("a run started during the outage: exit %d, want 1 as the cluster cannot be reached\n%s", res.Code, res.Stderr)
		}
		late := run(t, bins.Kubectl, env, "", "apply", "-f", spec)
		if late.Code != 1 {
			t.Fatalf("a run started after the restart: exit %d, want 1\n%s", late.Code, late.Stderr)
		}
		heldBy(t, late.Stderr, h.PID)
		if h2, held, err := lock.Read(context.Background(), cs, lock.Location{Namespace: ns, Name: "khook-state-" + ns}); err != nil || !held || h2.ID != h.ID {
			t.Fatalf("after the outage the lock is %+v (held %v, %v), want the first run's", h2, held, err)
		}

		openGate(t, cs, ns)
		defer bindAll(t, cs, ns)()
		if code := holder.exit(t, "the run through the outage"); code != 0 {
			t.Fatalf("the run through the outage: exit %d\n%s", code, tail(holder.Stderr(), 40))
		}
		r := reportOf(t, holder)
		for _, s := range []string{"gate", "app", "c0", "c1", "c2"} {
			if status, attempts, errText, _ := r.step(t, s); status != "ok" || attempts != 1 {
				t.Errorf("step %s: %s after %d attempts (%s), want ok at once", s, status, attempts, errText)
			}
		}
		if rel := releaseSecret(t, cs, ns, "app", 1); rel == nil || rel.Labels["status"] != "deployed" {
			t.Errorf("the release after the outage: %v", rel)
		}
		if code := taker.exit(t, "the run waiting through the outage"); code != 0 {
			t.Fatalf("the waiting run: exit %d\n%s", code, tail(taker.Stderr(), 40))
		}
		if strings.Contains(taker.Stderr(), "took over") {
			t.Errorf("the waiting run took the lock over:\n%s", taker.Stderr())
		}
		for _, s := range reportOf(t, taker).Steps {
			if s.Status != "skipped" || s.SkipReason != state.ResumeReason {
				t.Errorf("the waiting run: step %s %s %q, want resumed from the first run's record", s.Name, s.Status, s.SkipReason)
			}
		}
		consistent(t, cs, ns, "gate", "app", "c0", "c1", "c2")
	})

	// No wait outlives its deadline during an outage (deadline_integration_test.go).
	t.Run("a helm step's timeout and SIGINT hold during a 30s outage", func(t *testing.T) {
		deadlinesThroughAnOutage(t, c, cs, env)
	})

	// A holder SIGKILLed while the API server is down cannot release its
	// lock. The next run, started once the server is back, watches the
	// Lease stay unchanged for the lease duration and takes it over. (No
	// helm step here: after a restart the controllers take their time to
	// make new Pods, which a recovered release would need.)
	t.Run("a holder killed during an outage is taken over", func(t *testing.T) {
		ns := plainNamespace(t, cs, "outage-kill")
		spec := outageSpec(t, cs, ns, false)
		holder := startBackground(t, bins.Kubectl, env, "apply", "-f", spec)
		h := holding(t, cs, ns, holder)
		began := time.Now()
		if err := c.StopAPIServer(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		if ended := holder.kill(); ended {
			t.Fatalf("the holder ended before it was killed:\n%s", holder.output())
		}
		time.Sleep(time.Until(began.Add(10 * time.Second))) // the outage's length
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		openGate(t, cs, ns)
		start := time.Now()
		next := startBackground(t, bins.Kubectl, env, "apply", "-f", spec, "-o", "json")
		if code := next.exit(t, "the next run"); code != 0 {
			t.Fatalf("the next run: exit %d\n%s", code, tail(next.Stderr(), 40))
		}
		if waited := time.Since(start); waited < lock.LeaseDuration {
			t.Errorf("the next run took the lock over after %s, less than the %s it must watch it", waited, lock.LeaseDuration)
		}
		for _, want := range []string{"took over the run lock of state record " + ns, fmt.Sprintf("pid %d", h.PID)} {
			if !strings.Contains(next.Stderr(), want) {
				t.Errorf("the next run does not say %q:\n%s", want, next.Stderr())
			}
		}
		consistent(t, cs, ns, "gate", "c0", "c1", "c2")
	})

	// A bulk apply of named objects (no retries:) while the API server is
	// killed or restarted under it: creates whose connection broke are sent
	// again, and an AlreadyExists for one the server had made is checked
	// against what exists. Six runs, six successes.
	t.Run("creates in flight across API-server restarts", func(t *testing.T) {
		const objects = 400
		resent := 0
		for i := 1; i <= 6; i++ {
			ns := plainNamespace(t, cs, fmt.Sprintf("bulk%d", i))
			var m strings.Builder
			for j := 1; j <= objects; j++ {
				fmt.Fprintf(&m, "        - inline: \"apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: cm-%03d}\\ndata: {i: \\\"%d\\\"}\\n\"\n", j, j)
			}
			spec := writeSpec(t, fmt.Sprintf("apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: %[1]s}\nsteps:\n  - name: objects\n    timeout: 5m\n    apply:\n      namespace: %[1]s\n      manifests:\n%[2]s", ns, m.String()))
			w, err := cs.CoreV1().ConfigMaps(ns).Watch(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b := startBackground(t, bins.Kubectl, env, "apply", "-f", spec, "-o", "json", "-v", "6")
			for seen := 0; seen < objects/8; {
				select {
				case ev := <-w.ResultChan():
					if ev.Type == watch.Added {
						seen++
					}
				case <-time.After(failAfter):
					t.Fatalf("run %d: the apply made no objects\n%s", i, tail(b.Stderr(), 20))
				}
			}
			w.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			how := "killed"
			if i%2 == 0 {
				how = "stopped"
				err = c.StopAPIServer(5 * time.Second)
			} else {
				err = c.KillAPIServer(ctx)
			}
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			err = c.StartAPIServer(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			code := b.exit(t, "the bulk apply")
			stderr := b.Stderr()
			r := reportOf(t, b)
			if status, attempts, errText, _ := r.step(t, "objects"); code != 0 || status != "ok" || attempts != 1 {
				t.Errorf("run %d (API server %s): exit %d, step %s after %d attempts: %s\n%s", i, how, code, status, attempts, errText, tail(stderr, 20))
				continue
			}
			if !strings.Contains(stderr, `"Retrying request after a connection failure"`) {
				t.Errorf("run %d: no request was retried: the restart missed the apply", i)
			}
			list, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, o := range list.Items {
				if strings.HasPrefix(o.Name, "cm-") {
					n++
				}
			}
			if n != objects {
				t.Errorf("run %d: %d of %d ConfigMaps exist", i, n, objects)
			}
			posts := strings.Count(stderr, `"Retrying request after a connection failure" verb="POST"`)
			own := strings.Count(stderr, "A resent create found the object its first attempt created")
			resent += own
			t.Logf("run %d (API server %s): exit 0; %d creates sent again, %d of them found made by their first attempt", i, how, posts, own)
		}
		t.Logf("creates whose first attempt had made the object: %d in 6 runs", resent)
	})
}

// plainNamespace creates a namespace without waiting for its
// ServiceAccount, as NewNamespace does: after an API-server restart the
// controllers take their time to come back, and a namespace without Pods
// needs none.
func plainNamespace(t *testing.T, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// metaOf is an event object's metadata.
func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("not an object: %T %v", obj, obj)
	}
	return m, nil
}
