package diagnose

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"khook.io/core/kube"
)

// podState is what a Pod's status says.
type podState struct {
	rank    int
	reason  string
	text    string
	warning bool
	logs    *container
	// claims: the scheduler waits for a claim to be bound.
	claims bool
}

// pods diagnoses Pods of one owner (or one Pod) and counts the Pods that
// share each cause. Pods whose status says nothing specific have their
// events read, a few of them; the first of those that says nothing still
// has its claims and references checked.
func (w *walk) pods(pods []corev1.Pod, cut bool, depth int, jobFailed bool) {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	type group struct {
		f    finding
		pods int
	}
	groups := map[string]*group{}
	var order []string
	add := func(f finding) {
		key := fmt.Sprintf("%d\x00%s\x00%s", f.rank, f.cause.Reason, f.cause.Text)
		if !strings.HasPrefix(f.cause.Object, "Pod ") {
			key += "\x00" + f.cause.Object // a claim several Pods wait for
		}
		g := groups[key]
		if g == nil {
			g = &group{f: f}
			groups[key] = g
			order = append(order, key)
		}
		g.pods++
	}
	var quiet []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		st, ok := podStatus(p, jobFailed)
		if !ok {
			continue // ready, done, or going away
		}
		f := finding{cause: Cause{Object: kindName("Pod", p.Namespace, p.Name), Reason: st.reason, Text: st.text, Warning: st.warning}, rank: st.rank, depth: depth, logs: st.logs}
		if st.rank <= rankNotReady || st.claims {
			quiet = append(quiet, p)
			if st.claims {
				add(f)
			}
			continue
		}
		add(f)
	}
	// the Pods that say nothing specific: the events of a few of them
	// (and their claims); then what they reference, checked once for
	// every Pod of the same references (the Pods of one owner share them)
	refs := map[string]*finding{}
	for i, p := range quiet {
		name := kindName("Pod", p.Namespace, p.Name)
		st, _ := podStatus(p, jobFailed)
		found := false
		if i < maxEventPods {
			// the scheduler waits for claims: its events say no more
			if !st.claims {
				if ev, ok := w.warning(p.Namespace, p.UID); ok {
					found = true
					add(finding{cause: Cause{Object: name, Reason: ev.Reason, Text: ReasonMessage(ev.Reason, ev.Message), Warning: failing(p, ev)}, rank: eventRank(ev.Reason), depth: depth})
				}
			}
			if st.claims || p.Status.Phase == corev1.PodPending {
				if f, ok := w.podClaims(p, depth+1); ok {
					found = true
					add(f)
				}
			}
		}
		if !found {
			pr := podRefs(p)
			key := refsKey(pr)
			f, checked := refs[key]
			if !checked && len(refs) < maxEventPods {
				if rf, ok := w.references(p, pr, depth); ok {
					f = &rf
				}
				refs[key] = f
			}
			if f != nil {
				found = true
				rf := *f
				rf.cause.Object = name
				add(rf)
			}
		}
		if !found && !st.claims {
			add(finding{cause: Cause{Object: name, Reason: st.reason, Text: st.text, Warning: st.warning}, rank: st.rank, depth: depth})
		}
	}
	for _, key := range order {
		g := groups[key]
		f := g.f
		f.cause.Pods, f.cause.Of, f.cause.Cut = g.pods, len(pods), cut
		w.add(f)
	}
}

// podStatus reads a Pod's status: false for a Pod that is ready, has
// completed, or is being deleted.
func podStatus(p *corev1.Pod, jobFailed bool) (podState, bool) {
	if p.DeletionTimestamp != nil {
		return podState{}, false
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		if !jobFailed {
			return podState{}, false
		}
	case corev1.PodFailed:
		if st, ok := containers(p, jobFailed); ok {
			return st, true
		}
		text := "Failed"
		if m := ReasonMessage(p.Status.Reason, p.Status.Message); m != "" {
			text = m
		}
		return podState{rank: rankProbe, reason: p.Status.Reason, text: text, warning: true}, true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			st := podState{rank: rankRefused, reason: c.Reason, text: ReasonMessage(c.Reason, c.Message), warning: c.Reason != ""}
			st.claims = strings.Contains(c.Message, "PersistentVolumeClaim")
			return st, true
		}
	}
	if st, ok := containers(p, jobFailed); ok {
		return st, true
	}
	if p.Status.Phase == corev1.PodSucceeded {
		return podState{}, false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return podState{}, false
			}
			text := ReasonMessage(c.Reason, c.Message)
			if text == "" {
				text = "not ready"
			}
			return podState{rank: rankNotReady, reason: c.Reason, text: text}, true
		}
	}
	if p.Status.Phase == corev1.PodPending || p.Status.Phase == "" {
		return podState{rank: rankNotReady, text: "Pending"}, true
	}
	return podState{}, false
}

// podClaims reads the claims of a Pod whose status says nothing specific
// (or that waits for them to be bound): a missing claim, or one that
// cannot be provisioned.
func (w *walk) podClaims(p *corev1.Pod, depth int) (finding, bool) {
	var best *finding
	n := 0
	for _, v := range p.Spec.Volumes {
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claim = p.Name + "-" + v.Name
		default:
			continue
		}
		if n == maxRefs || !w.spend() {
			break
		}
		n++
		pvc, err := w.d.c.Typed.CoreV1().PersistentVolumeClaims(p.Namespace).Get(w.ctx, claim, metav1.GetOptions{})
		var f finding
		switch {
		case apierrors.IsNotFound(err):
			f = finding{cause: Cause{Object: kindName("Pod", p.Namespace, p.Name), Reason: "NotFound", Text: "volume " + v.Name + ": " + kube.Reason(err), Warning: true}, rank: rankMissing, depth: depth}
		case err != nil || pvc.Status.Phase == corev1.ClaimBound:
			continue
		default:
			sub := &walk{d: w.d, ctx: w.ctx, budget: w.budget}
			sub.claim(pvc, depth+1)
			w.budget = sub.budget
			if b := sub.best(); b != nil {
				f = *b
			} else {
				continue
			}
		}
		if best == nil || f.rank > best.rank {
			best = &f
		}
	}
	if best == nil {
		return finding{}, false
	}
	return *best, true
}

// ref is an object a Pod references.
type ref struct {
	gvr      schema.GroupVersionResource
	kind     string
	name     string
	where    string // "volume cfg", "container app"
	optional bool
}

// references checks, by their metadata only, the ServiceAccount,
// ConfigMaps and Secrets a Pod references (not optionally): the first that
// does not exist.
func (w *walk) references(p *corev1.Pod, refs []ref, depth int) (finding, bool) {
	if len(refs) == 0 {
		return finding{}, false
	}
	mc, err := w.d.meta()
	if err != nil {
		return finding{}, false
	}
	for i, r := range refs {
		if i == maxRefs || !w.spend() {
			break
		}
		_, err := mc.Resource(r.gvr).Namespace(p.Namespace).Get(w.ctx, r.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return finding{cause: Cause{Object: kindName("Pod", p.Namespace, p.Name), Reason: "NotFound", Text: r.where + ": " + kube.Reason(err), Warning: true}, rank: rankMissing, depth: depth}, true
		}
	}
	return finding{}, false
}

// refsKey identifies a Pod's references.
func refsKey(refs []ref) string {
	var b strings.Builder
	for _, r := range refs {
		b.WriteString(r.gvr.Resource + "/" + r.name + "/" + r.where + "\x00")
	}
	return b.String()
}

var (
	configMaps      = corev1.SchemeGroupVersion.WithResource("configmaps")
	secrets         = corev1.SchemeGroupVersion.WithResource("secrets")
	serviceAccounts = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
)

// podRefs lists what a Pod references, each once, in the order a kubelet
// needs them: the ServiceAccount, the volumes, the containers'
// environment.
func podRefs(p *corev1.Pod) []ref {
	var out []ref
	seen := map[string]bool{}
	add := func(r ref) {
		key := r.gvr.Resource + "/" + r.name
		if r.optional || r.name == "" || seen[key] {
			return
		}
		seen[key] = true
		out = append(out, r)
	}
	if sa := p.Spec.ServiceAccountName; sa != "" {
		add(ref{gvr: serviceAccounts, kind: "ServiceAccount", name: sa, where: "service account " + sa})
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add(ref{gvr: configMaps, kind: "ConfigMap", name: v.ConfigMap.Name, where: "volume " + v.Name, optional: v.ConfigMap.Optional != nil && *v.ConfigMap.Optional})
		case v.Secret != nil:
			add(ref{gvr: secrets, kind: "Secret", name: v.Secret.SecretName, where: "volume " + v.Name, optional: v.Secret.Optional != nil && *v.Secret.Optional})
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add(ref{gvr: configMaps, kind: "ConfigMap", name: s.ConfigMap.Name, where: "volume " + v.Name, optional: s.ConfigMap.Optional != nil && *s.ConfigMap.Optional})
				}
				if s.Secret != nil {
					add(ref{gvr: secrets, kind: "Secret", name: s.Secret.Name, where: "volume " + v.Name, optional: s.Secret.Optional != nil && *s.Secret.Optional})
				}
			}
		}
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		where := "container " + c.Name
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add(ref{gvr: configMaps, kind: "ConfigMap", name: e.ConfigMapRef.Name, where: where, optional: e.ConfigMapRef.Optional != nil && *e.ConfigMapRef.Optional})
			}
			if e.SecretRef != nil {
				add(ref{gvr: secrets, kind: "Secret", name: e.SecretRef.Name, where: where, optional: e.SecretRef.Optional != nil && *e.SecretRef.Optional})
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				add(ref{gvr: configMaps, kind: "ConfigMap", name: r.Name, where: where + " env " + e.Name, optional: r.Optional != nil && *r.Optional})
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				add(ref{gvr: secrets, kind: "Secret", name: r.Name, where: where + " env " + e.Name, optional: r.Optional != nil && *r.Optional})
			}
		}
	}
	return out
}
