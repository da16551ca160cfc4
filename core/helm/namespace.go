package helm

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"

	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/objects"
)

// helmNamespaceLabels are the labels `helm install --create-namespace`
// puts on the namespace it creates (helm 3 and helm 4 alike).
func helmNamespaceLabels(ns string) map[string]string { return map[string]string{"name": ns} }

// createNamespaceKube is the Kubernetes client of an install with
// createNamespace (decision 222). Helm's install creates the namespace
// (Install.CreateNamespace) where helm does: after the chart rendered, its
// values passed the schema and no existing object stands in the way, just
// before the release is stored; an install that fails before that leaves
// no namespace behind. The namespace create Helm asks for is khook's own:
// the one labelling policy (objects.Manager.EnsureNamespaceLabelled,
// decision 120), with helm's label name=<namespace> besides khook's, the
// step's field manager, and an existing namespace left as it is. Every
// other call is the operation's kubeClient's.
type createNamespaceKube struct {
	*kubeClient
	namespace string
	ensure    func() error
	done      atomic.Bool
}

// Create takes Helm's create of the install's namespace (the one Namespace
// named after the release namespace, with helm's labels, asked for once)
// to ensure; anything else is the kubeClient's.
func (k *createNamespaceKube) Create(resources helmkube.ResourceList, opts ...helmkube.ClientCreateOption) (*helmkube.Result, error) {
	if k.isHelmsNamespace(resources) && k.done.CompareAndSwap(false, true) {
		if err := k.ensure(); err != nil {
			return nil, err
		}
		return &helmkube.Result{}, nil
	}
	return k.kubeClient.Create(resources, opts...)
}

func (k *createNamespaceKube) isHelmsNamespace(resources helmkube.ResourceList) bool {
	if len(resources) != 1 || resources[0].Mapping == nil {
		return false
	}
	info := resources[0]
	if info.Mapping.GroupVersionKind != (schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}) || info.Name != k.namespace {
		return false
	}
	u, ok := info.Object.(interface{ GetLabels() map[string]string })
	return ok && maps.Equal(u.GetLabels(), helmNamespaceLabels(k.namespace))
}

// withCreateNamespace makes in's install create its namespace as helm
// does, through khook's policy; cfg's client is replaced for this
// operation.
func (c *Client) withCreateNamespace(ctx context.Context, cfg *configuration, namespace string) *createNamespaceKube {
	k := &createNamespaceKube{kubeClient: cfg.kube, namespace: namespace}
	k.ensure = func() error { return c.createNamespace(ctx, namespace) }
	cfg.KubeClient = k
	return k
}

// createNamespace creates the install's namespace when it is missing;
// an existing one is left alone. A client that may neither read nor
// create namespaces is let through: helm's store of the release then
// says whether the namespace is there.
func (c *Client) createNamespace(ctx context.Context, ns string) error {
	created, err := c.objects().EnsureNamespaceLabelled(ctx, ns, helmNamespaceLabels(ns))
	var unknown *objects.NamespaceUnknownError
	switch {
	case errors.As(err, &unknown):
		return nil
	case err != nil:
		return err
	case created:
		c.env.logf("created namespace %s", ns)
	}
	return nil
}
