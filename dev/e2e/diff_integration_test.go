//go:build integration

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/testing/testcluster"
)

// diffSpec is a spec of every step type diff diffs object by object:
// client-side apply (a ConfigMap carrying a secret variable, and a
// Secret), server-side apply, a helm release of a local chart, and a
// patch of the chart's Deployment; plus a wait, which diff describes in
// one line. Variables change what each step writes.
type diffSpec struct {
	dir, path, ns string
}

func newDiffSpec(t *testing.T, prefix string) *diffSpec {
	t.Helper()
	ns := testcluster.Get(t).NewNamespace(t, prefix)
	d := &diffSpec{dir: t.TempDir(), ns: ns}
	d.path = filepath.Join(d.dir, "spec.yaml")
	copyDir(t, filepath.Join(root(t), "examples", "charts", "hello"), filepath.Join(d.dir, "chart"))
	spec := fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: difftest}
steps:
  - name: csa
    apply:
      namespace: %[1]s
      serverSide: ${CSA_SSA:-false}
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: csa}
            data: {v: "${V:-1}", token: "${TOKEN}", keep: same}
            ---
            apiVersion: v1
            kind: Secret
            metadata: {name: creds}
            stringData: {password: "${PASSWORD:-first-password}", user: admin}
  - name: ssa
    apply:
      namespace: %[1]s
      serverSide: true
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: ssa}
            data: {s: "${S:-1}", keep: same}
  - name: chart
    helm:
      chart: ./chart
      namespace: %[1]s
      values: {greeting: "${GREETING:-hello}"}
  - name: scale
    needs: [chart]
    patch:
      target: deployment/chart
      namespace: %[1]s
      type: merge
      patch: {spec: {replicas: ${REPLICAS:-1}}}
  - name: ready
    needs: [scale]
    wait:
      for: jsonpath={.spec.replicas}
      on: deployment/chart
      namespace: %[1]s
`, ns)
	if err := os.WriteFile(d.path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

const (
	diffToken    = "d1ff-T0ken/first+one"
	diffRotated  = "d1ff-T0ken/second+two"
	diffPassword = "first-password"
)

// snapshot is the resourceVersion of every ConfigMap and Secret of ns,
// the generation and metadata of every Deployment, and the number of helm
// revisions (release Secrets).
func snapshot(t *testing.T, ns string) map[string]string {
	t.Helper()
	c := typed(t)
	ctx := context.Background()
	out := map[string]string{}
	cms, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cms.Items {
		if o.Name == "kube-root-ca.crt" {
			continue // the root CA publisher's, added to a namespace at its own pace
		}
		out["ConfigMap/"+o.Name] = o.ResourceVersion
	}
	secs, err := c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	revisions := 0
	for _, o := range secs.Items {
		out["Secret/"+o.Name] = o.ResourceVersion
		if o.Labels["owner"] == "helm" {
			revisions++
		}
	}
	out["helm revisions"] = fmt.Sprint(revisions)
	deps, err := c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range deps.Items {
		// the deployment controller keeps writing a Deployment's status
		// and its revision annotation (its pods come up under kwok): the
		// generation says whether anyone else wrote the object
		ann := maps.Clone(o.Annotations)
		delete(ann, "deployment.kubernetes.io/revision")
		out["Deployment/"+o.Name] = fmt.Sprintf("generation %d, labels %v, annotations %v", o.Generation, o.Labels, ann)
	}
	return out
}

func sameSnapshot(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("diff changed the cluster: %s was %s, is %s", k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("diff changed the cluster: %s appeared", k)
		}
	}
}

func (d *diffSpec) diff(t *testing.T, env []string, args ...string) Result {
	t.Helper()
	return run(t, bins.Kubectl, kubeEnv(t, env...), "", append([]string{"diff", "-f", d.path}, args...)...)
}

// changedLines maps each object diffed ("ConfigMap ns/csa") to its
// removed and added lines, in order.
func changedLines(out string) map[string][]string {
	res := map[string][]string{}
	var cur string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "--- live   "):
			cur = strings.TrimPrefix(l, "--- live   ")
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "@@"), strings.HasPrefix(l, "=== "):
		case cur != "" && (strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+")):
			res[cur] = append(res[cur], l)
		}
	}
	return res
}

func noSecretIn(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, s := range []string{diffToken, diffRotated, diffPassword, "second-password"} {
		forms := []string{s, base64.StdEncoding.EncodeToString([]byte(s))}
		for _, f := range forms {
			for _, text := range texts {
				if strings.Contains(text, f) {
					t.Errorf("%s shows %q:\n%s", what, f, text)
				}
			}
		}
	}
}

// TestDiffShowsExactlyWhatApplyWouldChange: after apply, diff finds no
// differences (exit 0); after an edit of every step, it shows exactly the
// edited fields (exit 1): client-side and server-side apply, a helm
// release's values, a patch; a Secret's changed value masked but told
// apart; a secret variable planted in a ConfigMap masked, also when it
// was rotated. Nothing is ever changed by diff.
func TestDiffShowsExactlyWhatApplyWouldChange(t *testing.T) {
	d := newDiffSpec(t, "diff")
	secretEnv := "KHOOK_SECRET_TOKEN=" + diffToken
	if r, res := applyJSON(t, "apply", d.path, kubeEnv(t, secretEnv)); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	before := snapshot(t, d.ns)

	res := d.diff(t, []string{secretEnv})
	if res.Code != 0 {
		t.Fatalf("diff of the applied spec: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if strings.Contains(res.Stdout, "@@") || !strings.Contains(res.Stdout, "No differences in difftest (5 steps): 5 unchanged.") {
		t.Errorf("diff of the applied spec shows differences:\n%s", res.Stdout)
	}
	for _, want := range []string{
		"=== csa (apply): no changes (2 objects)",
		"=== ssa (apply): no changes (1 object)",
		"=== chart (helm): no changes (2 objects)",
		"=== scale (patch): no changes (1 object)",
		"=== ready (wait): no-op: jsonpath {.spec.replicas} already holds",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, res.Stdout)
		}
	}
	sameSnapshot(t, before, snapshot(t, d.ns))

	// Edit every step; rotate the token.
	edits := []string{"KHOOK_SECRET_TOKEN=" + diffRotated, "KHOOK_VAR_V=2", "KHOOK_VAR_PASSWORD=second-password", "KHOOK_VAR_S=2", "KHOOK_VAR_GREETING=hi", "KHOOK_VAR_REPLICAS=2"}
	res = d.diff(t, edits)
	if res.Code != 1 {
		t.Fatalf("diff after edits: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	noSecretIn(t, "diff", res.Stdout, res.Stderr)
	got := changedLines(res.Stdout)
	lastApplied := func(lines []string) []string { // the last-applied annotation's JSON lines
		var out []string
		for _, l := range lines {
			if strings.HasPrefix(l[1:], "      {") {
				out = append(out, l)
			}
		}
		return out
	}
	withoutJSON := func(lines []string) []string {
		return slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return strings.HasPrefix(l[1:], "      {") })
	}
	want := map[string][]string{
		"ConfigMap " + d.ns + "/csa":    {`-  token: '*** (before)'`, `-  v: "1"`, `+  token: '*** (after)'`, `+  v: "2"`},
		"Secret " + d.ns + "/creds":     {`-  password: '*** (before)'`, `+  password: '*** (after)'`},
		"ConfigMap " + d.ns + "/ssa":    {`-  s: "1"`, `+  s: "2"`},
		"ConfigMap " + d.ns + "/chart":  {`-  greeting: hello`, `+  greeting: hi`},
		"Deployment " + d.ns + "/chart": {`-  generation: 1`, `+  generation: 2`, `-  replicas: 1`, `+  replicas: 2`},
	}
	if len(got) != len(want) {
		t.Errorf("diff shows %d objects, want %d:\n%s", len(got), len(want), res.Stdout)
	}
	for name, w := range want {
		if g := withoutJSON(got[name]); !slices.Equal(g, w) {
			t.Errorf("%s: changed lines\n%s\nwant\n%s", name, strings.Join(g, "\n"), strings.Join(w, "\n"))
		}
	}
	// client-side apply changes the last-applied annotation too; its
	// copies of the values are masked the same way
	csaJSON := lastApplied(got["ConfigMap "+d.ns+"/csa"])
	if len(csaJSON) != 2 || !strings.Contains(csaJSON[0], `"token":"*** (before)","v":"1"`) || !strings.Contains(csaJSON[1], `"token":"*** (after)","v":"2"`) {
		t.Errorf("ConfigMap csa: last-applied lines %q", csaJSON)
	}
	credJSON := lastApplied(got["Secret "+d.ns+"/creds"])
	if len(credJSON) != 2 || !strings.Contains(credJSON[0], `"password":"*** (before)","user":"***"`) || !strings.Contains(credJSON[1], `"password":"*** (after)","user":"***"`) {
		t.Errorf("Secret creds: last-applied lines %q", credJSON)
	}
	for _, want := range []string{
		"=== csa (apply): 2 objects would change",
		"=== chart (helm): 1 of 2 objects would change",
		"    upgrade from revision 1 (deployed, chart hello 0.1.0) to chart ./chart",
		"    values change",
		"Differences in difftest (5 steps): 4 would change, 1 unchanged.",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, res.Stdout)
		}
	}
	// unchanged fields are context, never changes
	if strings.Contains(res.Stdout, "-  keep: same") || strings.Contains(res.Stdout, "+  user: '***'") {
		t.Errorf("unchanged fields shown as changes:\n%s", res.Stdout)
	}
	sameSnapshot(t, before, snapshot(t, d.ns))
}

// TestDiffServerSideSwitch: turning serverSide on for objects client-side
// apply wrote is no conflict (the client-side appliers' fields are taken
// over, as the API server takes them over for kubectl apply
// --server-side); the one change is the last-applied annotation, which
// apply keeps current as the API server writes it for kubectl (its JSON
// without the empty annotations map client-side apply leaves:
// docs/spec.md 224). Once applied, the switch diffs as no change, and an
// edit changes the value and the annotation.
func TestDiffServerSideSwitch(t *testing.T) {
	d := newDiffSpec(t, "diffssa")
	env := kubeEnv(t, "KHOOK_SECRET_TOKEN="+diffToken)
	if r, res := applyJSON(t, "apply", d.path, env); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	before := snapshot(t, d.ns)
	ssa := []string{"KHOOK_SECRET_TOKEN=" + diffToken, "KHOOK_VAR_CSA_SSA=true"}
	res := d.diff(t, ssa)
	if res.Code != 1 || !strings.Contains(res.Stdout, "=== csa (apply): 2 objects would change") {
		t.Fatalf("diff with serverSide switched on: exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	for _, obj := range []string{"ConfigMap " + d.ns + "/csa", "Secret " + d.ns + "/creds"} {
		g := changedLines(res.Stdout)[obj]
		if len(g) != 2 || !strings.HasPrefix(g[0], "-      {") || !strings.Contains(g[0], `"annotations":{},`) ||
			g[1] != "+"+strings.Replace(g[0][1:], `"annotations":{},`, "", 1) {
			t.Errorf("%s: changed lines %q, want the last-applied annotation only", obj, g)
		}
	}
	sameSnapshot(t, before, snapshot(t, d.ns))
	if r, res := applyJSON(t, "apply", d.path, kubeEnv(t, ssa...)); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply with serverSide: exit %d\n%s", res.Code, res.Stderr)
	}
	before = snapshot(t, d.ns)
	if res = d.diff(t, ssa); res.Code != 0 || !strings.Contains(res.Stdout, "=== csa (apply): no changes (2 objects)") {
		t.Fatalf("diff after the switch: exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	res = d.diff(t, append(ssa, "KHOOK_VAR_V=3"))
	if res.Code != 1 {
		t.Fatalf("diff with serverSide and an edit: exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	g := changedLines(res.Stdout)["ConfigMap "+d.ns+"/csa"]
	if len(g) != 4 || g[0] != `-  v: "1"` || g[1] != `+  v: "3"` || !strings.Contains(g[2], `"v":"1"`) || !strings.Contains(g[3], `"v":"3"`) {
		t.Errorf("server-side apply of the edit: changed lines %q, want v and the last-applied annotation\n%s", g, res.Stdout)
	}
	sameSnapshot(t, before, snapshot(t, d.ns))
}

// TestDiffUnavailableGoesOn: a custom resource whose CRD an earlier step
// (not applied yet) creates cannot be diffed: "diff unavailable" with the
// reason, and the command goes on with the other steps. An object in a
// namespace its own step creates is shown as apply would send it, with a
// note; a step skipIf: exists would skip says so. Nothing is created.
func TestDiffUnavailableGoesOn(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "diffcrd")
	group := strings.ReplaceAll(ns, "-", "") + ".khook.test"
	created := ns + "-made"
	t.Cleanup(func() { // in case diff did create it
		_ = typed(t).CoreV1().Namespaces().Delete(context.Background(), created, metav1.DeleteOptions{})
	})
	spec := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: unavailable}
steps:
  - name: crd
    apply:
      manifests:
        - inline: |
            apiVersion: apiextensions.k8s.io/v1
            kind: CustomResourceDefinition
            metadata: {name: widgets.%[1]s}
            spec:
              group: %[1]s
              scope: Namespaced
              names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
              versions:
                - name: v1
                  served: true
                  storage: true
                  schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: widget
    needs: [crd]
    apply:
      namespace: %[2]s
      manifests:
        - inline: |
            apiVersion: %[1]s/v1
            kind: Widget
            metadata: {name: w}
            spec: {size: 1}
  - name: after
    needs: [widget]
    apply:
      namespace: %[3]s
      createNamespace: true
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: after}
            data: {v: "1"}
  - name: kept
    apply:
      skipIf: exists
      manifests:
        - inline: |
            apiVersion: v1
            kind: Namespace
            metadata: {name: %[2]s, labels: {changed: "yes"}}
`, group, ns, created))
	res := run(t, bins.Kubectl, kubeEnv(t), "", "diff", "-f", spec)
	if res.Code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	for _, want := range []string{
		"=== crd (apply): 1 object would change",
		"+++ merged CustomResourceDefinition widgets." + group,
		"=== widget (apply): 1 diff unavailable",
		"    Widget w: diff unavailable: the cluster does not serve Widget (" + group + "/v1): its CustomResourceDefinition does not exist yet (an earlier step may create it)",
		"=== after (apply): 2 objects would change",
		"+++ merged Namespace " + created,
		"    ConfigMap " + created + "/after: not a server dry run: its namespace is created by this step first",
		"+++ merged ConfigMap " + created + "/after",
		"=== kept (apply): skipped: the object exists (skipIf: exists)",
		"Differences in unavailable (4 steps): 2 would change, 1 unchanged, 1 diff unavailable.",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, res.Stdout)
		}
	}
	ctx := context.Background()
	if _, err := typed(t).CoreV1().Namespaces().Get(ctx, created, metav1.GetOptions{}); err == nil {
		t.Errorf("diff created namespace %s", created)
	}
	if _, err := typed(t).Discovery().ServerResourcesForGroupVersion(group + "/v1"); err == nil {
		t.Errorf("diff created the CRD of %s", group)
	}
}

// TestDiffExternalProgram: KUBECTL_EXTERNAL_DIFF runs like kubectl diff
// runs it: the LIVE and MERGED folders, then the words kept from the
// variable; its output on standard output; its exit status decides (0
// none, 1 differences, anything else an error: 3). Only masked YAML is
// ever written to the folders, and they are removed afterwards.
func TestDiffExternalProgram(t *testing.T) {
	d := newDiffSpec(t, "diffext")
	secretEnv := "KHOOK_SECRET_TOKEN=" + diffToken
	if r, res := applyJSON(t, "apply", d.path, kubeEnv(t, secretEnv)); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	before := snapshot(t, d.ns)
	rec := t.TempDir()
	script := filepath.Join(t.TempDir(), "record-diff")
	body := `#!/bin/sh
# records its arguments and copies of the two folders, then exits $FAKE_EXIT
printf '%s\n' "$@" > "$REC/args"
cp -r "$1" "$REC/live"
cp -r "$2" "$REC/merged"
env > "$REC/env"
echo "external diff ran"
exit "${FAKE_EXIT:-1}"
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	edits := []string{"KHOOK_SECRET_TOKEN=" + diffRotated, "KHOOK_VAR_V=2", "KHOOK_VAR_PASSWORD=second-password", "REC=" + rec,
		"KUBECTL_EXTERNAL_DIFF=" + script + " -u -N --ignored;word"}

	res := d.diff(t, append(edits, "FAKE_EXIT=1"))
	if res.Code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if res.Stdout != "external diff ran\n" {
		t.Errorf("standard output should be the program's only:\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stderr, "=== csa (apply): 2 objects would change") || !strings.Contains(res.Stderr, "Differences in difftest") {
		t.Errorf("the steps' lines belong on standard error:\n%s", res.Stderr)
	}
	argsData, err := os.ReadFile(filepath.Join(rec, "args"))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSpace(string(argsData)), "\n")
	if len(args) != 4 || !strings.HasPrefix(filepath.Base(args[0]), "LIVE-") || !strings.HasPrefix(filepath.Base(args[1]), "MERGED-") || args[2] != "-u" || args[3] != "-N" {
		t.Errorf("arguments %q: want LIVE-*, MERGED-*, -u, -N (kubectl drops words with other characters)", args)
	}
	for _, dir := range args[:2] {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s was not removed: %v", dir, err)
		}
	}
	wantFiles := []string{
		"chart.apps.v1.Deployment." + d.ns + ".chart",
		"chart.v1.ConfigMap." + d.ns + ".chart",
		"csa.v1.ConfigMap." + d.ns + ".csa",
		"csa.v1.Secret." + d.ns + ".creds",
		"scale.apps.v1.Deployment." + d.ns + ".chart",
		"ssa.v1.ConfigMap." + d.ns + ".ssa",
	}
	for _, side := range []string{"live", "merged"} {
		entries, err := os.ReadDir(filepath.Join(rec, side))
		if err != nil {
			t.Fatal(err)
		}
		var names, texts []string
		for _, e := range entries {
			names = append(names, e.Name())
			data, err := os.ReadFile(filepath.Join(rec, side, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			texts = append(texts, string(data))
		}
		if !slices.Equal(names, wantFiles) {
			t.Errorf("%s files %q, want %q", side, names, wantFiles)
		}
		noSecretIn(t, side+" files", texts...)
	}
	merged, _ := os.ReadFile(filepath.Join(rec, "merged", "csa.v1.Secret."+d.ns+".creds"))
	if !strings.Contains(string(merged), "password: '*** (after)'") {
		t.Errorf("merged Secret:\n%s", merged)
	}
	envData, _ := os.ReadFile(filepath.Join(rec, "env"))
	if strings.Contains(string(envData), "KHOOK_SECRET_") {
		t.Error("the diff program's environment holds the secret variables")
	}

	if res = d.diff(t, append(edits, "FAKE_EXIT=0")); res.Code != 0 {
		t.Errorf("program exit 0 (no differences): khook exit %d, want 0\n%s", res.Code, res.Stderr)
	}
	if res = d.diff(t, append(edits, "FAKE_EXIT=2")); res.Code != 3 || !strings.Contains(res.Stderr, "exited with status 2") {
		t.Errorf("program exit 2 (trouble): khook exit %d, want 3\n%s", res.Code, res.Stderr)
	}
	if res = d.diff(t, append(edits, "KUBECTL_EXTERNAL_DIFF=/nonexistent/diff-program")); res.Code != 3 {
		t.Errorf("a missing program: khook exit %d, want 3\n%s", res.Code, res.Stderr)
	}
	sameSnapshot(t, before, snapshot(t, d.ns))
}

// TestDiffResumedSteps: with a state record, a step apply would resume is
// "resumed from the state record, not diffed" (it changes nothing, even
// if its objects drifted); an edited step is diffed. The record is read,
// never written.
func TestDiffResumedSteps(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "diffstate")
	body := func(v string) string {
		return fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: %[1]s}
state: {namespace: %[1]s}
steps:
  - name: a
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: \"1\"}\n"}]
  - name: b
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {v: \"%[2]s\"}\n"}]
`, ns, v)
	}
	spec := writeSpec(t, body("1"))
	if r, res := applyJSON(t, "apply", spec, kubeEnv(t)); res.Code != 0 || r.Status != "ok" {
		t.Fatalf("apply: exit %d\n%s", res.Code, res.Stderr)
	}
	// drift: a resumed step is not diffed, so diff does not see it
	ctx := context.Background()
	cm, err := typed(t).CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "drifted"
	if _, err := typed(t).CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ns)

	res := run(t, bins.Kubectl, kubeEnv(t), "", "diff", "-f", spec)
	if res.Code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	for _, want := range []string{
		"=== a (apply): resumed from the state record (it succeeded before with these inputs), not diffed: apply skips it",
		"=== b (apply): resumed from the state record",
		"No differences in " + ns + " (2 steps): 2 resumed from the state record.",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, res.Stdout)
		}
	}

	if err := os.WriteFile(spec, []byte(body("2")), 0o644); err != nil {
		t.Fatal(err)
	}
	res = run(t, bins.Kubectl, kubeEnv(t), "", "diff", "-f", spec)
	if res.Code != 1 {
		t.Fatalf("after an edit: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if g := changedLines(res.Stdout)["ConfigMap "+ns+"/b"]; len(g) == 0 || !strings.Contains(res.Stdout, "=== a (apply): resumed") {
		t.Errorf("only the edited step is diffed:\n%s", res.Stdout)
	}
	sameSnapshot(t, before, snapshot(t, ns)) // the record Secret included
}

// TestDiffExitCodes: 2 for an invalid spec, 3 for an unreachable cluster
// and for a step whose dry run the server refuses (the other steps are
// still diffed).
func TestDiffExitCodes(t *testing.T) {
	ns := testcluster.Get(t).NewNamespace(t, "diffexit")
	invalid := writeSpec(t, "apiVersion: khook.io/v1\nkind: Khook\nmetadata: {name: x}\nsteps: [{name: a}]\n")
	if res := run(t, bins.Kubectl, kubeEnv(t), "", "diff", "-f", invalid); res.Code != 2 {
		t.Errorf("invalid spec: exit %d, want 2\n%s", res.Code, res.Stderr)
	}
	valid := writeSpec(t, fmt.Sprintf(`apiVersion: khook.io/v1
kind: Khook
metadata: {name: exits}
steps:
  - name: bad
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {v: \"1\"}\nnotAField: 1\n"}]
  - name: good
    apply:
      namespace: %[1]s
      manifests: [{inline: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good}\ndata: {v: \"1\"}\n"}]
`, ns))
	res := run(t, bins.Kubectl, kubeEnv(t), "", "diff", "-f", valid)
	if res.Code != 3 {
		t.Fatalf("a refused dry run: exit %d, want 3\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stdout, "=== bad (apply): diff failed:") || !strings.Contains(res.Stdout, `unknown field "notAField"`) ||
		!strings.Contains(res.Stdout, "=== good (apply): 1 object would change") || !strings.Contains(res.Stderr, "1 step could not be diffed: bad") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}
	kc := writeKubeconfig(t, "https://127.0.0.1:1")
	if res := run(t, bins.Kubectl, []string{"KUBECONFIG=" + kc}, "", "diff", "-f", valid); res.Code != 3 {
		t.Errorf("unreachable cluster: exit %d, want 3\n%s", res.Code, res.Stderr)
	}
}
