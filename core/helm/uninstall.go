package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	"helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"khook.io/core/waiter"
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
	// Timeout bounds the uninstall when ctx has no deadline. It is also
	// how old a pending revision must be before it is taken as abandoned.
	Timeout time.Duration
	// Run is the khook run uninstalling: a release whose latest revision
	// is pending is uninstalled only when it is provably abandoned (see
	// Uninstall).
	Run Run
	// Planned, when set, is the release as destroy's plan read it (nil
	// Status: not installed): a release whose latest revision is another
	// now, or that was installed since, is left as it is (a
	// *ChangedError), as a stale plan is refused.
	Planned *Planned
}

// Planned is a release as a plan read it: its latest revision's status,
// nil when it was not installed.
type Planned struct{ Status *Status }

// ChangedError is an uninstall refused because the release changed since
// the plan it was to carry out was read.
type ChangedError struct{ Was, Now *Status }

func (e *ChangedError) Error() string {
	was := "not installed"
	if e.Was != nil {
		was = e.Was.String()
	}
	return fmt.Sprintf("changed since destroy's plan (%s, now %s), so it is left as it is: a stale plan is refused; run destroy again to see what it would do now", was, e.Now)
}

// ErrReleaseNotFound is returned (wrapped) by Uninstall for an absent
// release without IgnoreNotFound.
var ErrReleaseNotFound = errors.New("release not found")

// Uninstall uninstalls a release (its history purged, like helm uninstall)
// and waits until the objects of its manifest are gone, bounded by ctx.
// The objects are deleted with background propagation (their dependents
// are left to the garbage collector: see deletionPropagation) and followed
// by watches with their UIDs: an object re-created under the same name
// meanwhile is not waited for. Objects kept by
// helm.sh/resource-policy: keep are not waited for.
//
// A release whose latest revision is pending (uninstalling, or
// pending-install, -upgrade or -rollback) is uninstalled only when it is
// provably abandoned, as Apply decides; otherwise another operation may be
// working on it, and Uninstall fails at once with a *PendingError,
// changing nothing.
func (c *Client) Uninstall(ctx context.Context, name, namespace string, opts UninstallOptions) (UninstallResult, error) {
	res, err := c.uninstallRelease(ctx, name, namespace, opts)
	if err != nil {
		err = fmt.Errorf("release %s (%s): %w", name, namespace, err)
	}
	return res, c.env.Redactor.Error(err)
}

func (c *Client) uninstallRelease(ctx context.Context, name, namespace string, opts UninstallOptions) (UninstallResult, error) {
	defer opts.Run.enter(namespace, name)()
	cfg, err := c.configuration(ctx, namespace)
	if err != nil {
		return UninstallResult{}, err
	}
	res, err := c.uninstall(ctx, cfg, name, namespace, opts, true)
	if err == nil && res.Absent && !opts.IgnoreNotFound {
		return res, ErrReleaseNotFound
	}
	return res, err
}

// uninstall uninstalls a release; guard refuses a pending one that is not
// provably abandoned (Apply's recovery has judged it already).
func (c *Client) uninstall(ctx context.Context, cfg *configuration, name, namespace string, opts UninstallOptions, guard bool) (UninstallResult, error) {
	hist, err := history(cfg, name)
	if err != nil {
		return UninstallResult{}, err
	}
	last := latest(hist)
	res := UninstallResult{Previous: statusOf(last)}
	if p := opts.Planned; p != nil && last != nil && (p.Status == nil || p.Status.Revision != res.Previous.Revision || p.Status.Status != res.Previous.Status) {
		return res, &ChangedError{Was: p.Status, Now: res.Previous}
	}
	if last == nil {
		res.Absent = true
		return res, nil
	}
	if guard && res.Previous.Pending() {
		p := judgePending(last, time.Now(), opts.Timeout, opts.Run)
		if !p.abandoned() {
			return res, p.err()
		}
		c.env.logf("release %s (%s): %s; uninstalling it", name, namespace, p.left())
	}
	timeout := opts.Timeout
	var targets []object
	if last.Info == nil || last.Info.Status != rcommon.StatusUninstalled {
		targets, res.Kept = c.objectsOf(cfg, last)
	}
	if len(targets) > 0 {
		if targets, err = c.withUIDs(ctx, targets); err != nil {
			return res, err
		}
	}
	un := action.NewUninstall(cfg.Configuration)
	un.DeletionPropagation = deletionPropagation
	// Helm waits only for delete hooks; the objects are waited for below
	// by UID
	un.WaitStrategy, un.WaitOptions = cfg.waitStrategy(ctx, false)
	un.Timeout = budget(ctx, timeout) // hooks
	c.env.logf("uninstalling release %s in %s (%s)", name, namespace, res.Previous)
	if _, err := un.Run(name); err != nil {
		if detail := cfg.log.lastError(); detail != "" {
			return res, fmt.Errorf("uninstall failed: %w (%s)", oneLine(err), detail)
		}
		return res, fmt.Errorf("uninstall failed: %w", oneLine(err))
	}
	res.Deleted = len(targets)
	if err := c.waitGone(ctx, name, targets); err != nil {
		return res, err
	}
	return res, nil
}

// deletionPropagation is how an uninstall deletes the release's objects:
// "background", the object goes at once and the garbage collector removes
// its dependents (a Deployment's ReplicaSets and Pods) afterwards. The
// spec promises that the release's objects are gone, which is what is
// waited for; "foreground" would also wait for the dependents, and costs
// seconds of the garbage collector's pace (decision 103 has the figures;
// bench/charts.sh measures both: it sets this with -ldflags -X).
var deletionPropagation = "background"

// object is one object of a release's manifest, with the UID it had
// before the uninstall.
type object struct {
	mapping   *meta.RESTMapping
	namespace string
	name      string
	uid       types.UID
	// release and releaseNamespace: the release whose uninstall deletes it
	release, releaseNamespace string
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
		objs = append(objs, object{mapping: info.Mapping, namespace: info.Namespace, name: info.Name, release: rel.Name, releaseNamespace: rel.Namespace})
	}
	return objs, kept
}

// uidReaders bounds the parallel reads of withUIDs.
const uidReaders = 8

// withUIDs reads the UID of every object before the uninstall deletes it.
// Objects that do not exist, and those Helm 4 will not delete because
// their ownership metadata names another release (or none), are dropped:
// nothing to wait for.
func (c *Client) withUIDs(ctx context.Context, objs []object) ([]object, error) {
	found := make([]object, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(uidReaders)
	for i, o := range objs {
		g.Go(func() error {
			u, err := c.env.Kube.Resource(o.mapping, o.namespace).Get(gctx, o.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return fmt.Errorf("read %s before the uninstall: %w", o, err)
			}
			if !ownedBy(u.GetLabels(), u.GetAnnotations(), o.release, o.releaseNamespace) {
				return nil // Helm 4 does not delete it: not waited for
			}
			o.uid = u.GetUID()
			found[i] = o
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := found[:0]
	for _, o := range found {
		if o.uid != "" {
			out = append(out, o)
		}
	}
	return out, nil
}

// ownedBy reports whether an object's metadata says it belongs to the
// release, as Helm 4's uninstall checks before it deletes the object.
func ownedBy(labels, annotations map[string]string, release, namespace string) bool {
	return labels["app.kubernetes.io/managed-by"] == "Helm" &&
		annotations["meta.helm.sh/release-name"] == release &&
		annotations["meta.helm.sh/release-namespace"] == namespace
}

// waitGone waits, by watches, until every object (of its UID) is gone,
// bounded by ctx.
func (c *Client) waitGone(ctx context.Context, releaseName string, objs []object) error {
	if len(objs) == 0 {
		return nil
	}
	targets := make([]waiter.Target, len(objs))
	for i, o := range objs {
		targets[i] = waiter.Target{Mapping: o.mapping, Namespace: o.namespace, Name: o.name, UID: o.uid}
	}
	progress := func(line string) { c.env.logf("release %s: %s", releaseName, line) }
	if err := waiter.UntilGone(ctx, c.env.Kube, targets, progress); err != nil {
		return fmt.Errorf("uninstalled, but %w", err)
	}
	return nil
}
