package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	helmkube "helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UninstallResult is what Uninstall did.
type UninstallResult struct {
	// Absent: there was no release (and IgnoreNotFound made it a success).
	Absent bool
	// Previous is the latest revision before the uninstall.
	Previous *Status
	// Deleted is how many of the release's objects were waited for until
	// gone; Kept how many the helm.sh/resource-policy: keep annotation kept.
	Deleted int
	Kept    int
}

// UninstallOptions tune Uninstall.
type UninstallOptions struct {
	// IgnoreNotFound makes an absent release a success.
	IgnoreNotFound bool
	// Timeout bounds the uninstall when ctx has no deadline.
	Timeout time.Duration
}

// ErrReleaseNotFound is returned (wrapped) by Uninstall for an absent
// release without IgnoreNotFound.
var ErrReleaseNotFound = errors.New("release not found")

// Uninstall uninstalls a release (its history purged, like helm uninstall)
// and waits until the objects of its manifest are gone, their dependents
// first (foreground deletion: a Deployment is gone once its pods are),
// bounded by ctx. Objects kept by helm.sh/resource-policy: keep are not
// waited for.
func (c *Client) Uninstall(ctx context.Context, name, namespace string, opts UninstallOptions) (UninstallResult, error) {
	res, err := c.uninstallRelease(ctx, name, namespace, opts)
	if err != nil {
		err = fmt.Errorf("release %s (%s): %w", name, namespace, err)
	}
	return res, c.env.Redactor.Error(err)
}

func (c *Client) uninstallRelease(ctx context.Context, name, namespace string, opts UninstallOptions) (UninstallResult, error) {
	cfg, err := c.configuration(namespace)
	if err != nil {
		return UninstallResult{}, err
	}
	res, err := c.uninstall(ctx, cfg, name, namespace, opts.Timeout)
	if err == nil && res.Absent && !opts.IgnoreNotFound {
		return res, ErrReleaseNotFound
	}
	return res, err
}

func (c *Client) uninstall(ctx context.Context, cfg *configuration, name, namespace string, timeout time.Duration) (UninstallResult, error) {
	hist, err := history(cfg, name)
	if err != nil {
		return UninstallResult{}, err
	}
	last := latest(hist)
	res := UninstallResult{Previous: statusOf(last)}
	if last == nil {
		res.Absent = true
		return res, nil
	}
	var targets []object
	if last.Info == nil || last.Info.Status != release.StatusUninstalled {
		targets, res.Kept = c.objectsOf(cfg, last)
	}
	un := action.NewUninstall(cfg.Configuration)
	un.DeletionPropagation = "foreground"
	un.Timeout = budget(ctx, timeout) // hooks
	c.env.logf("uninstalling release %s in %s (%s)", name, namespace, res.Previous)
	if _, err := un.Run(name); err != nil {
		if detail := cfg.log.lastError(); detail != "" {
			return res, fmt.Errorf("uninstall failed: %w (%s)", err, detail)
		}
		return res, fmt.Errorf("uninstall failed: %w", err)
	}
	res.Deleted = len(targets)
	if err := c.waitGone(ctx, name, targets); err != nil {
		return res, err
	}
	return res, nil
}

// object is one object of a release's manifest.
type object struct {
	mapping   *meta.RESTMapping
	namespace string
	name      string
}

func (o object) String() string {
	if o.namespace == "" {
		return o.mapping.GroupVersionKind.Kind + " " + o.name
	}
	return o.mapping.GroupVersionKind.Kind + " " + o.namespace + "/" + o.name
}

// objectsOf lists the objects of rel's manifest that an uninstall deletes
// (those annotated helm.sh/resource-policy: keep are counted in kept). A
// manifest that no longer maps (a CRD gone) yields nothing to wait for.
func (c *Client) objectsOf(cfg *configuration, rel *release.Release) (objs []object, kept int) {
	resources, err := cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err != nil {
		c.env.logf("release %s: cannot list its objects to wait for their deletion: %v", rel.Name, err)
		return nil, 0
	}
	for _, info := range resources {
		if acc, err := meta.Accessor(info.Object); err == nil && acc.GetAnnotations()[helmkube.ResourcePolicyAnno] == helmkube.KeepPolicy {
			kept++
			continue
		}
		objs = append(objs, object{mapping: info.Mapping, namespace: info.Namespace, name: info.Name})
	}
	return objs, kept
}

// waitGone polls until every object is gone, bounded by ctx.
func (c *Client) waitGone(ctx context.Context, releaseName string, objs []object) error {
	interval := 100 * time.Millisecond
	reported := -1
	for {
		var present []object
		for _, o := range objs {
			_, err := c.env.Kube.Resource(o.mapping, o.namespace).Get(ctx, o.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err == nil:
				present = append(present, o)
			case ctx.Err() != nil:
				present = append(present, o)
			default:
				return fmt.Errorf("uninstalled, but cannot check that %s is gone: %w", o, err)
			}
		}
		if len(present) == 0 {
			return nil
		}
		if len(present) != reported {
			reported = len(present)
			c.env.logf("release %s: waiting for %d object(s) to be deleted: %s", releaseName, len(present), listObjects(present))
		}
		objs = present
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("uninstalled, but %d object(s) still present: %s: %w", len(present), listObjects(present), ctx.Err())
		case <-t.C:
		}
		interval = min(interval*2, time.Second)
	}
}

func listObjects(objs []object) string {
	const show = 5
	parts := make([]string, 0, show+1)
	for i, o := range objs {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(objs)-show))
			break
		}
		parts = append(parts, o.String())
	}
	return strings.Join(parts, ", ")
}
