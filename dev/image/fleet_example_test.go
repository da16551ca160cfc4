package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"khook.io/dev/e2e"
)

// TestInClusterFleetExample checks examples/in-cluster/fleet without a
// cluster: an Indexed Job of N Pods whose args, as each Pod's index
// expands them, cut the kubeconfig's contexts into N disjoint slices that
// together hold every context; the kubeconfig comes from the Secret at
// KUBECONFIG; the spec validates.
func TestInClusterFleetExample(t *testing.T) {
	objs, out := kustomizeStrict(t, "in-cluster/fleet")
	var job *batchv1.Job
	var cm *corev1.ConfigMap
	var sec *corev1.Secret
	for _, obj := range objs {
		switch o := obj.(type) {
		case *batchv1.Job:
			job = o
		case *corev1.ConfigMap:
			cm = o
		case *corev1.Secret:
			sec = o
		default:
			t.Fatalf("examples/in-cluster/fleet: unexpected %T", obj)
		}
	}
	if job == nil || cm == nil || sec == nil {
		t.Fatalf("examples/in-cluster/fleet: want a Job, a ConfigMap and a Secret; kustomize gave\n%s", out)
	}

	// an Indexed Job of N Pods at once, retrying nothing by itself
	spec := job.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion || spec.Completions == nil || spec.Parallelism == nil || *spec.Completions != *spec.Parallelism {
		t.Fatalf("job: completionMode %v, completions %v, parallelism %v: want Indexed, N and N", spec.CompletionMode, spec.Completions, spec.Parallelism)
	}
	n := int(*spec.Completions)
	if spec.BackoffLimit == nil || *spec.BackoffLimit != 0 {
		t.Errorf("backoffLimit %v, want 0 (a re-run resumes from the records)", spec.BackoffLimit)
	}
	pod := spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	i := slices.Index(c.Args, "--shard")
	if i < 0 || i+1 >= len(c.Args) || c.Args[i+1] != "$(JOB_COMPLETION_INDEX)+1/"+strconv.Itoa(n) {
		t.Fatalf("args %q: want --shard $(JOB_COMPLETION_INDEX)+1/%d (N = completions)", c.Args, n)
	}
	if !slices.Contains(c.Args, "--contexts") {
		t.Fatalf("args %q: --shard needs --contexts", c.Args)
	}

	// KUBECONFIG is the Secret's key, mounted
	var kubeconfig string
	for _, e := range c.Env {
		if e.Name == "KUBECONFIG" {
			kubeconfig = e.Value
		}
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == sec.Name {
				_, key := sec.StringData[strings.TrimPrefix(kubeconfig, m.MountPath+"/")]
				mounted = key && strings.HasPrefix(kubeconfig, m.MountPath+"/")
			}
		}
	}
	if !mounted {
		t.Fatalf("KUBECONFIG=%q is not a key of Secret %s mounted in the container", kubeconfig, sec.Name)
	}

	// each Pod's args, expanded as Kubernetes expands them for index K,
	// over a kubeconfig of ten contexts: N disjoint slices, every context
	// once
	bins, err := e2e.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	specFile := filepath.Join(dir, "bootstrap.yaml")
	if err := os.WriteFile(specFile, []byte(cm.Data["bootstrap.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	var all []string
	for k := range 10 {
		name := fmt.Sprintf("cluster-%02d", k)
		all = append(all, name)
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "x"}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kcFile := filepath.Join(dir, "config")
	if err := clientcmd.WriteToFile(*kc, kcFile); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for k := range n {
		args := slices.Clone(c.Args)
		for j, a := range args {
			args[j] = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(k))
		}
		// the same selection, planned offline instead of applied
		args[0] = "plan"
		args[slices.Index(args, "-f")+1] = specFile
		o := slices.Index(args, "-o")
		args = append(args[:o], "-o", "json", "--offline")
		res, err := e2e.Run(t.Context(), dir, bins.Kubectl, []string{"KUBECONFIG=" + kcFile}, "", args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan struct{ Clusters []struct{ Context string } }
		if err := json.Unmarshal([]byte(res.Stdout), &plan); err != nil || res.Code != 0 {
			t.Fatalf("kubectl-khook %q: exit %d, %v\n%s%s", args, res.Code, err, res.Stdout, res.Stderr)
		}
		if len(plan.Clusters) == 0 {
			t.Errorf("Pod %d runs no cluster", k)
		}
		for _, cl := range plan.Clusters {
			seen[cl.Context]++
		}
	}
	for _, name := range all {
		if seen[name] != 1 {
			t.Errorf("context %s runs in %d Pods, want 1 (%v)", name, seen[name], seen)
		}
	}
}
