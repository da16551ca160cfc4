//go:build integration

package helm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	khelm "khook.io/core/helm"
	"khook.io/core/step"
	"khook.io/core/testing/chartrepo"
	"khook.io/core/testing/steptest"
	"khook.io/core/testing/testenv"
)

// The helm CLIs of the compatibility test: the versions `make helm-tools`
// builds into .cache/tools (hack/dist.mk).
const (
	helm3Version = "v3.22.0"
	helm4Version = "v4.3.1"
)

// helmCLI returns the helm CLI of version (see testenv.HelmCLI).
func helmCLI(t *testing.T, version string) string {
	t.Helper()
	return testenv.HelmCLI(t, version)
}

// helmCmd runs one helm CLI against the test cluster, in a home of its own.
type helmCmd struct {
	name string // "helm 3"
	bin  string
	env  []string
}

func newHelmCmd(t *testing.T, name, version, kubeconfig string) *helmCmd {
	home := t.TempDir()
	return &helmCmd{name: name, bin: helmCLI(t, version), env: []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"KUBECONFIG=" + kubeconfig,
	}}
}

func (h *helmCmd) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = h.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", h.name, strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// list returns the release's revision and status as helm list says.
func (h *helmCmd) list(t *testing.T, ns, release string) string {
	t.Helper()
	var rels []struct {
		Name     string `json:"name"`
		Revision string `json:"revision"`
		Status   string `json:"status"`
		Chart    string `json:"chart"`
	}
	out := h.run(t, "list", "-n", ns, "-o", "json")
	if err := json.Unmarshal([]byte(out), &rels); err != nil {
		t.Fatalf("%s list: %v\n%s", h.name, err, out)
	}
	for _, r := range rels {
		if r.Name == release {
			return r.Revision + ":" + r.Status + ":" + r.Chart
		}
	}
	return ""
}

// TestHelmCLICompatibility: releases stay compatible both ways between
// khook (on the helm 4 SDK) and the helm 3 and helm 4 CLIs. A release the
// helm 3 CLI installed is upgraded and uninstalled by khook; a release
// khook installed is listed, upgraded and rolled back by the helm 3 CLI
// and by the helm 4 CLI, and khook upgrades it again afterwards.
func TestHelmCLICompatibility(t *testing.T) {
	f := newFixture(t)
	kubeconfig := f.cluster.Kubeconfig
	helm3 := newHelmCmd(t, "helm 3", helm3Version, kubeconfig)
	helm4 := newHelmCmd(t, "helm 4", helm4Version, kubeconfig)
	demo := chartrepo.ChartDir("demo")

	t.Run("helm 3 installs, khook upgrades and uninstalls", func(t *testing.T) {
		f := f.on(t)
		ns := f.cluster.NewNamespace(t, "helm-cli-3k")
		helm3.run(t, "install", "old", demo, "-n", ns, "--set", "color=red", "--wait")
		out := f.apply(withRun(f.request(fmt.Sprintf("name: old\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true\n  values: {color: green}", demo, ns), steptest.Options{}), "k1"))
		if !strings.Contains(out.Message, "upgraded release old ("+ns+") to revision 2") {
			t.Errorf("khook over helm 3's release: %q", out.Message)
		}
		if got := f.configMap(ns, "old")["color"]; got != "green" {
			t.Errorf("color = %q after khook's upgrade", got)
		}
		if got := helm3.list(t, ns, "old"); !strings.HasPrefix(got, "2:deployed:") {
			t.Errorf("helm 3 lists %q after khook's upgrade", got)
		}
		del := f.request(fmt.Sprintf("name: rm\ndelete:\n  release: old\n  namespace: %s", ns), steptest.Options{})
		ctx, cancel := f.ctx(del)
		defer cancel()
		if out, err := f.exec.Uninstall(ctx, del.req, "old", ns, false); err != nil || !strings.HasPrefix(out.Message, "uninstalled release old") {
			t.Fatalf("khook uninstall of helm 3's release: %q, %v", out.Message, err)
		}
		if !f.gone(ns, "ConfigMap", "old-demo") {
			t.Error("the ConfigMap is still there")
		}
		if got := helm3.list(t, ns, "old"); got != "" {
			t.Errorf("helm 3 still lists %q", got)
		}
	})

	for _, h := range []*helmCmd{helm3, helm4} {
		t.Run("khook installs, "+h.name+" lists, upgrades and rolls back", func(t *testing.T) {
			f := f.on(t)
			ns := f.cluster.NewNamespace(t, "helm-cli-k"+strings.TrimPrefix(h.name, "helm "))
			spec := fmt.Sprintf("name: app\nhelm:\n  chart: %s\n  namespace: %s\n  wait: true\n  values: {color: %%s}", demo, ns)
			f.apply(withRun(f.request(fmt.Sprintf(spec, "blue"), steptest.Options{}), "k1"))
			if got := h.list(t, ns, "app"); !strings.HasPrefix(got, "1:deployed:demo-") {
				t.Errorf("%s lists %q", h.name, got)
			}
			h.run(t, "upgrade", "app", demo, "-n", ns, "--set", "color=yellow", "--wait")
			if got := f.configMap(ns, "app")["color"]; got != "yellow" {
				t.Errorf("color = %q after %s's upgrade", got, h.name)
			}
			h.run(t, "rollback", "app", "1", "-n", ns, "--wait")
			if got := f.configMap(ns, "app")["color"]; got != "blue" {
				t.Errorf("color = %q after %s's rollback", got, h.name)
			}
			if got := h.list(t, ns, "app"); !strings.HasPrefix(got, "3:deployed:") {
				t.Errorf("%s lists %q after its rollback", h.name, got)
			}
			if got := f.revisions(ns, "app"); strings.Join(got, ",") != "1:superseded,2:superseded,3:deployed" {
				t.Errorf("revisions = %v", got)
			}
			// the CLI carried khook's run label over to its own revisions
			// (an upgrade merges the last revision's labels, a rollback
			// copies its target's): the revision label tells them apart
			for rev, want := range map[int]string{1: "k1/1", 2: "k1/1", 3: "k1/1"} {
				if got := runLabels(t, f, ns, "app", rev); got != want {
					t.Errorf("revision %d labelled %q, want %q", rev, got, want)
				}
			}
			// khook takes over again: the spec's values, a new revision
			out := f.apply(withRun(f.request(fmt.Sprintf(spec, "white"), steptest.Options{}), "k2"))
			if !strings.Contains(out.Message, "upgraded release app ("+ns+") to revision 4") {
				t.Errorf("khook after %s: %q", h.name, out.Message)
			}
			if got := f.configMap(ns, "app")["color"]; got != "white" {
				t.Errorf("color = %q after khook's upgrade", got)
			}
			if got := runLabels(t, f, ns, "app", 4); got != "k2/4" {
				t.Errorf("revision 4 labelled %q", got)
			}
			// and the CLI still upgrades and rolls back a revision khook
			// labelled
			h.run(t, "upgrade", "app", demo, "-n", ns, "--set", "color=pink", "--wait")
			h.run(t, "rollback", "app", "4", "-n", ns, "--wait")
			if got := h.list(t, ns, "app"); !strings.HasPrefix(got, "6:deployed:") {
				t.Errorf("%s lists %q after its rollback to khook's revision", h.name, got)
			}
			if got := f.configMap(ns, "app")["color"]; got != "white" {
				t.Errorf("color = %q after %s's rollback to khook's revision", got, h.name)
			}
		})
	}
}

// withRun makes r a step of the khook run id.
func withRun(r *run, id string) *run {
	r.req.Run = step.RunInfo{ID: id}
	return r
}

// runLabels is "run/revision" of the khook labels on a revision's storage
// Secret.
func runLabels(t *testing.T, f *fixture, ns, release string, revision int) string {
	t.Helper()
	s, err := f.clients.Typed.CoreV1().Secrets(ns).Get(context.Background(), fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Labels[khelm.RunLabel] + "/" + s.Labels[khelm.RunRevisionLabel]
}
