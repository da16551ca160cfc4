//go:build integration

package helm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// scaledChart is a Deployment under an HorizontalPodAutoscaler (at least
// 2 replicas, where the chart says 1), and a ConfigMap.
const scaledChart = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: busybox}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 5
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {level: info}
`

// TestRepairKeepsAScaleAfterTheCheck: the race of the issue. A release
// whose Deployment an autoscaler scaled (its replicas the autoscaler's,
// through scale) drifts elsewhere (a ConfigMap edited); between the
// drift check and the repair's write, the autoscaler scales again. The
// repair puts the ConfigMap back and leaves the replicas out of its
// write: the later scale stands. Before, the repair wrote the replicas at
// the value read during the check, with force-conflicts, undoing it.
// Both ways a release applies: server-side (khook's installs, helm 4's)
// and client-side (helm 3's, and khook's before decision 221).
func TestRepairKeepsAScaleAfterTheCheck(t *testing.T) {
	for _, tc := range []struct {
		name       string
		serverSide bool
	}{{"server-side", true}, {"client-side", false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, "race-"+tc.name[:6])
			dir := t.TempDir()
			for name, body := range map[string]string{"Chart.yaml": "apiVersion: v2\nname: scaled\nversion: 0.1.0\n", "templates/all.yaml": scaledChart} {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := Release{Name: "sc", Namespace: c.ns, Source: Source{Chart: dir}, Timeout: time.Minute}
			if tc.serverSide {
				c.apply(r)
			} else {
				ch, err := c.client.LoadChart(context.Background(), r.Source)
				if err != nil {
					t.Fatal(err)
				}
				chrt, err := ch.load()
				if err != nil {
					t.Fatal(err)
				}
				in := action.NewInstall(c.config().Configuration)
				in.ReleaseName, in.Namespace, in.ServerSideApply = r.Name, r.Namespace, false
				in.WaitStrategy = helmkube.HookOnlyStrategy
				if _, err := in.RunWithContext(context.Background(), chrt, map[string]any{}); err != nil {
					t.Fatal(err)
				}
			}
			deploys := c.clients.Typed.AppsV1().Deployments(c.ns)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				d, err := deploys.Get(ctx, "web", metav1.GetOptions{})
				return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 2, err
			}); err != nil {
				t.Fatalf("the autoscaler did not scale the Deployment: %v", err)
			}
			if _, err := c.clients.Typed.CoreV1().ConfigMaps(c.ns).Patch(context.Background(), "cfg", types.MergePatchType, []byte(`{"data":{"level":"debug"}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
				t.Fatal(err)
			}

			// between the check and the write: a scale to 4, through scale,
			// as an autoscaler writes it
			scaled := false
			c.client.beforeRepair = func() {
				scaled = true
				s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: c.ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
				cur, err := deploys.GetScale(context.Background(), "web", metav1.GetOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				s.ResourceVersion = cur.ResourceVersion
				if _, err := deploys.UpdateScale(context.Background(), "web", s, metav1.UpdateOptions{FieldManager: "race-autoscaler"}); err != nil {
					t.Error(err)
				}
			}
			res := c.apply(r)
			if res.Action != Repaired || !scaled || res.Drift.Summary("re-created") != "ConfigMap/cfg data.level" {
				t.Fatalf("apply: %s (hook ran: %v), drift %q", res.Action, scaled, res.Drift.Summary("re-created"))
			}
			kept := strings.Join(res.Drift.KeptLines(), "; ")
			if !strings.Contains(kept, "kept: Deployment/web spec.replicas (written by ") {
				t.Errorf("kept %q", kept)
			}
			d, err := deploys.Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if *d.Spec.Replicas != 4 {
				t.Errorf("replicas %d after the repair: the scale between the check and the write was undone", *d.Spec.Replicas)
			}
			cm, err := c.clients.Typed.CoreV1().ConfigMaps(c.ns).Get(context.Background(), "cfg", metav1.GetOptions{})
			if err != nil || cm.Data["level"] != "info" {
				t.Errorf("the ConfigMap was not put back: %v %v", cm.Data, err)
			}
		})
	}
}
