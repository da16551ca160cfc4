package lock

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Read returns the lock's holder; held is false when there is no Lease or
// it is released.
func Read(ctx context.Context, c kubernetes.Interface, loc Location) (h Holder, held bool, err error) {
	lease, err := c.CoordinationV1().Leases(loc.Namespace).Get(ctx, loc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Holder{}, false, nil
	case err != nil:
		return Holder{}, false, fmt.Errorf("run lock of state record %s: read: %w", loc, err)
	}
	h = holderOf(lease)
	return h, h.ID != "", nil
}

// ForceUnlock breaks the lock at loc, only if id holds it: it frees the
// Lease (no holder; the broken run named in an annotation, so the next run
// knows that run is gone and may recover what it left pending) with a
// precondition on the version read: a holder that renews meanwhile keeps
// it. It returns the holder it removed.
func ForceUnlock(ctx context.Context, c kubernetes.Interface, loc Location, id string) (Holder, error) {
	leases := c.CoordinationV1().Leases(loc.Namespace)
	lease, err := leases.Get(ctx, loc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Holder{}, fmt.Errorf("run lock of state record %s: not locked (no Lease %s)", loc, loc)
	case err != nil:
		return Holder{}, fmt.Errorf("run lock of state record %s: read: %w", loc, err)
	}
	h := holderOf(lease)
	switch {
	case h.ID == "":
		return h, fmt.Errorf("run lock of state record %s: not locked (released)", loc)
	case h.ID != id:
		return h, fmt.Errorf("run lock of state record %s is held by %s, not by run %s: nothing was unlocked", loc, h.Describe(), id)
	}
	broken := lease.DeepCopy()
	broken.Spec.HolderIdentity = nil
	if broken.Annotations == nil {
		broken.Annotations = map[string]string{}
	}
	broken.Annotations[annBroken] = id
	_, err = leases.Update(ctx, broken, metav1.UpdateOptions{FieldManager: ManagedBy})
	if apierrors.IsConflict(err) && brokenBy(ctx, leases, loc.Name, id) {
		return h, nil // this break landed; its answer was lost, and the resend conflicted
	}
	switch {
	case apierrors.IsConflict(err):
		return h, fmt.Errorf("run lock of state record %s changed while unlocking (its holder renewed it: it is alive); nothing was unlocked", loc)
	case apierrors.IsNotFound(err):
		return h, nil // released meanwhile
	case err != nil:
		return h, fmt.Errorf("run lock of state record %s: break: %w", loc, err)
	}
	return h, nil
}

// brokenBy reports whether the Lease name is free with the mark of a
// break of run id.
func brokenBy(ctx context.Context, leases coordinationclient.LeaseInterface, name, id string) bool {
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	return err == nil && holderOf(lease).ID == "" && lease.Annotations[annBroken] == id
}
