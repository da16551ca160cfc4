package testcluster

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// kwokConfig is kwok's configuration: options and stages (see kwok.yaml).
//
//go:embed kwok.yaml
var kwokConfig []byte

// renderKwokConfig fills in the port kwok serves the kubelet API on.
func renderKwokConfig(port int) []byte {
	return bytes.ReplaceAll(kwokConfig, []byte("@KWOK_PORT@"), []byte(strconv.Itoa(port)))
}

// limitedRules are the rights of the least-privilege user in its namespace:
// the everyday namespaced verbs on the kinds khook works with, nothing
// cluster-scoped.
func limitedRules() []rbacv1.PolicyRule {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "pods", "pods/log", "events"}, Verbs: verbs},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: verbs},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: verbs},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: verbs},
	}
}

// fakeNode is the one node of the cluster, managed by kwok (annotation), with
// no taint so that ordinary pods schedule on it.
func fakeNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname": nodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
	}
}

// setupObjects creates the fake node and the least-privilege user's
// namespace, Role and RoleBinding.
func (s *starter) setupObjects(ctx context.Context, cs kubernetes.Interface) error {
	objs := []struct {
		what   string
		create func() error
	}{
		{"node " + nodeName, func() error {
			_, err := cs.CoreV1().Nodes().Create(ctx, fakeNode(), metav1.CreateOptions{})
			return err
		}},
		{"namespace " + limitedNamespace, func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: limitedNamespace}}, metav1.CreateOptions{})
			return err
		}},
		{"role " + limitedUser, func() error {
			_, err := cs.RbacV1().Roles(limitedNamespace).Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: limitedUser},
				Rules:      limitedRules(),
			}, metav1.CreateOptions{})
			return err
		}},
		{"rolebinding " + limitedUser, func() error {
			_, err := cs.RbacV1().RoleBindings(limitedNamespace).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: limitedUser},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: limitedUser},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: limitedUser}},
			}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, o := range objs {
		if err := o.create(); err != nil && !apierrors.IsAlreadyExists(err) {
			if ctx.Err() != nil {
				return ctxErr(ctx, "creating "+o.what)
			}
			return fmt.Errorf("create %s: %w", o.what, err)
		}
	}
	return nil
}

// waitFor watches the objects lw lists until one satisfies cond.
func waitFor[T runtime.Object](ctx context.Context, what string, lw cache.ListerWatcher, objType T, cond func(T) bool) error {
	_, err := watchtools.UntilWithSync(ctx, lw, objType, nil, func(ev watch.Event) (bool, error) {
		obj, ok := ev.Object.(T)
		return ok && ev.Type != watch.Deleted && cond(obj), nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctxErr(ctx, what)
		}
		return fmt.Errorf("wait for %s: %w", what, err)
	}
	return nil
}

func byName(name string) fields.Selector { return fields.OneTermEqualSelector("metadata.name", name) }

// waitNode waits until kwok reports the node Ready and the controller
// manager has lifted its not-ready/unreachable taints.
func (s *starter) waitNode(ctx context.Context, cs kubernetes.Interface) error {
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "nodes", "", byName(nodeName))
	err := waitFor(ctx, "node "+nodeName+" Ready", lw, &corev1.Node{}, func(n *corev1.Node) bool {
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		for _, t := range n.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
				return false
			}
		}
		return ready
	})
	if err != nil {
		return err
	}
	s.logf("node %s ready", nodeName)
	return nil
}

// waitNamespaceReady waits for the `default` ServiceAccount of ns (made by
// the controller manager; pods cannot be created before it exists) and, with
// rootCA, the kube-root-ca.crt ConfigMap.
func (s *starter) waitNamespaceReady(ctx context.Context, cs kubernetes.Interface, ns string, rootCA bool) error {
	if err := waitServiceAccount(ctx, cs, ns); err != nil {
		return err
	}
	if rootCA {
		lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", ns, byName("kube-root-ca.crt"))
		if err := waitFor(ctx, "ConfigMap "+ns+"/kube-root-ca.crt", lw, &corev1.ConfigMap{}, func(*corev1.ConfigMap) bool { return true }); err != nil {
			return err
		}
	}
	s.logf("namespace %s ready", ns)
	return nil
}

func waitServiceAccount(ctx context.Context, cs kubernetes.Interface, ns string) error {
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "serviceaccounts", ns, byName("default"))
	return waitFor(ctx, "ServiceAccount "+ns+"/default", lw, &corev1.ServiceAccount{}, func(*corev1.ServiceAccount) bool { return true })
}

// writeOwner records the calling process as the owner of a private cluster:
// if it dies without stopping the cluster (the parent-death signal kills the
// components), a later Main finds the directory and cleans it up.
func writeOwner(dir string) error {
	st, _ := procStartTime(os.Getpid())
	data := fmt.Sprintf("%d %d\n", os.Getpid(), st)
	if err := os.WriteFile(filepath.Join(dir, fileOwner), []byte(data), 0o644); err != nil {
		return fmt.Errorf("write owner file: %w", err)
	}
	return nil
}

// ownerAlive tells whether the process recorded in dir's owner file still
// runs; false when there is no owner file.
func ownerAlive(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, fileOwner))
	if err != nil {
		return false
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return false
	}
	pid, err1 := strconv.Atoi(f[0])
	st, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	cur, ok := procStartTime(pid)
	return ok && cur == st
}
