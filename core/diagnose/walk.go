package diagnose

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// walk is one diagnosis.
type walk struct {
	d        *Diagnoser
	ctx      context.Context
	budget   int
	findings []finding
}

func (w *walk) add(f finding) { w.findings = append(w.findings, f) }

// spend takes one request from the budget; false when it is spent.
func (w *walk) spend() bool {
	if w.budget <= 0 || w.ctx.Err() != nil {
		return false
	}
	w.budget--
	if w.d.requests != nil {
		w.d.requests()
	}
	return true
}

// object diagnoses one waited-on object.
func (w *walk) object(u *unstructured.Unstructured) {
	switch u.GroupVersionKind().GroupKind() {
	case deploymentKind:
		as(u, w.deployment)
	case replicaSetKind:
		as(u, func(rs *appsv1.ReplicaSet) { w.replicaSet(rs, 0) })
	case statefulSetKind:
		as(u, func(s *appsv1.StatefulSet) {
			w.controller(kindName("StatefulSet", s.Namespace, s.Name), s.Namespace, s.UID, s.Spec.Selector, false, 0)
		})
	case daemonSetKind:
		as(u, func(s *appsv1.DaemonSet) {
			w.controller(kindName("DaemonSet", s.Namespace, s.Name), s.Namespace, s.UID, s.Spec.Selector, false, 0)
		})
	case jobKind:
		as(u, w.job)
	case podKind:
		as(u, func(p *corev1.Pod) { w.pods([]corev1.Pod{*p}, false, 0, false) })
	case claimKind:
		as(u, func(pvc *corev1.PersistentVolumeClaim) { w.claim(pvc, 0) })
	default:
		w.generic(u)
	}
}

// as reads u as a T and diagnoses it with diagnose; an object that does
// not convert is left out.
func as[T any](u *unstructured.Unstructured, diagnose func(*T)) {
	var v T
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v) == nil {
		diagnose(&v)
	}
}

// kindName names an object in causes: "Pod ns/name".
func kindName(kind, ns, name string) string {
	if ns == "" {
		return kind + " " + name
	}
	return kind + " " + ns + "/" + name
}

// deployment: its ReplicaFailure and progress deadline, then its current
// ReplicaSet.
func (w *walk) deployment(d *appsv1.Deployment) {
	name := kindName("Deployment", d.Namespace, d.Name)
	w.conditions(deploymentKind, name, conditionsOf(d.Status.Conditions, func(c appsv1.DeploymentCondition) condition {
		return condition{string(c.Type), string(c.Status), c.Reason, c.Message}
	}), 0)
	rs := w.currentReplicaSet(d)
	if rs == nil {
		w.events(name, d.Namespace, d.UID, 0)
		return
	}
	w.replicaSet(rs, 1)
}

// currentReplicaSet is the ReplicaSet of the Deployment's current
// revision, else its newest; nil when it has none (or it cannot be read).
func (w *walk) currentReplicaSet(d *appsv1.Deployment) *appsv1.ReplicaSet {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !w.spend() {
		return nil
	}
	list, err := w.d.c.Typed.AppsV1().ReplicaSets(d.Namespace).List(w.ctx, metav1.ListOptions{LabelSelector: sel.String(), Limit: maxPods})
	if err != nil {
		return nil
	}
	const revision = "deployment.kubernetes.io/revision"
	var current *appsv1.ReplicaSet
	for i := range list.Items {
		rs := &list.Items[i]
		if !ownedBy(rs.OwnerReferences, d.UID) {
			continue
		}
		if rev := d.Annotations[revision]; rev != "" && rs.Annotations[revision] == rev {
			return rs
		}
		if current == nil || current.CreationTimestamp.Before(&rs.CreationTimestamp) {
			current = rs
		}
	}
	return current
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// replicaSet: its ReplicaFailure (the Pods it cannot create, in the
// admission's words), then its Pods.
func (w *walk) replicaSet(rs *appsv1.ReplicaSet, depth int) {
	name := kindName("ReplicaSet", rs.Namespace, rs.Name)
	failed := w.conditions(replicaSetKind, name, conditionsOf(rs.Status.Conditions, func(c appsv1.ReplicaSetCondition) condition {
		return condition{string(c.Type), string(c.Status), c.Reason, c.Message}
	}), depth)
	w.controller(name, rs.Namespace, rs.UID, rs.Spec.Selector, failed, depth)
}

// controller: the Pods an owner made; with none (and no condition saying
// why), its Warning events (FailedCreate).
func (w *walk) controller(name, ns string, uid types.UID, selector *metav1.LabelSelector, explained bool, depth int) {
	n := len(w.findings)
	if pods, cut, ok := w.ownedPods(ns, uid, selector); ok && len(pods) > 0 {
		w.pods(pods, cut, depth+1, false)
	}
	// no Pod, or none that says why: the owner's own events (a
	// StatefulSet that cannot create its next Pod while the others run)
	if !explained && !w.failureSince(n) {
		w.events(name, ns, uid, depth)
	}
}

// failureSince reports whether a finding added after the first n is a
// failure the cluster reports.
func (w *walk) failureSince(n int) bool {
	for _, f := range w.findings[n:] {
		if f.cause.Warning {
			return true
		}
	}
	return false
}

// ownedPods lists the Pods of selector in ns that uid owns, at most
// maxPods; cut says the list stopped there.
func (w *walk) ownedPods(ns string, uid types.UID, selector *metav1.LabelSelector) ([]corev1.Pod, bool, bool) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || sel.Empty() || !w.spend() {
		return nil, false, false
	}
	list, err := w.d.c.Typed.CoreV1().Pods(ns).List(w.ctx, metav1.ListOptions{LabelSelector: sel.String(), Limit: maxPods})
	if err != nil {
		return nil, false, false
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if ownedBy(p.OwnerReferences, uid) {
			pods = append(pods, p)
		}
	}
	return pods, list.Continue != "", true
}

// job: its Failed condition, then its Pods (how each container ended, for
// a failed Job); with no Pod, its FailedCreate events.
func (w *walk) job(j *batchv1.Job) {
	name := kindName("Job", j.Namespace, j.Name)
	failed := w.conditions(jobKind, name, conditionsOf(j.Status.Conditions, func(c batchv1.JobCondition) condition {
		return condition{string(c.Type), string(c.Status), c.Reason, c.Message}
	}), 0)
	pods, cut, ok := w.ownedPods(j.Namespace, j.UID, j.Spec.Selector)
	if ok && len(pods) > 0 {
		w.pods(pods, cut, 1, failed)
		return
	}
	w.events(name, j.Namespace, j.UID, 0)
}

// claim: a claim that is not bound, and its Warning events
// (ProvisioningFailed: the storage class does not exist).
func (w *walk) claim(pvc *corev1.PersistentVolumeClaim, depth int) {
	if pvc.Status.Phase == corev1.ClaimBound {
		return
	}
	name := kindName("PersistentVolumeClaim", pvc.Namespace, pvc.Name)
	if w.events(name, pvc.Namespace, pvc.UID, depth) {
		return
	}
	phase := string(pvc.Status.Phase)
	if phase == "" {
		phase = string(corev1.ClaimPending)
	}
	w.add(finding{cause: Cause{Object: name, Reason: phase, Text: phase}, rank: rankPending, depth: depth})
}

// generic: any other kind: a condition that says it failed or is not
// ready, with a message; else its Warning events.
func (w *walk) generic(u *unstructured.Unstructured) {
	name := kindName(u.GetKind(), u.GetNamespace(), u.GetName())
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	w.conditions(schema.GroupKind{}, name, conditionsOf(raw, func(r any) condition {
		c, _ := r.(map[string]any)
		typ, _ := c["type"].(string)
		status, _ := c["status"].(string)
		reason, _ := c["reason"].(string)
		msg, _ := c["message"].(string)
		return condition{typ, status, reason, msg}
	}), 0)
	w.events(name, u.GetNamespace(), u.GetUID(), 0)
}

// conditions adds the causes conds report of the object name of kind gk
// (conditionCauses); it reports whether any did.
func (w *walk) conditions(gk schema.GroupKind, name string, conds []condition, depth int) bool {
	found := false
	for _, c := range conds {
		if f, ok := c.cause(gk, name); ok {
			f.depth = depth
			w.add(f)
			found = true
		}
	}
	return found
}
