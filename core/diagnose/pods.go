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
	g := &podGroups{groups: map[string]*podGroup{}}
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
				g.add(f)
			}
			continue
		}
		g.add(f)
	}
	w.quietPods(quiet, g, depth, jobFailed)
	for _, key := range g.order {
		pg := g.groups[key]
		f := pg.f
		f.cause.Pods, f.cause.Of, f.cause.Cut = pg.pods, len(pods), cut
		w.add(f)
	}
}

// podGroups counts the Pods that share each cause, in the order the
// causes were first found.
type podGroups struct {
	groups map[string]*podGroup
	order  []string
}

type podGroup struct {
	f    finding
	pods int
}

func (g *podGroups) add(f finding) {
	key := fmt.Sprintf("%d\x00%s\x00%s", f.rank, f.cause.Reason, f.cause.Text)
	if !strings.HasPrefix(f.cause.Object, "Pod ") {
		key += "\x00" + f.cause.Object // a claim several Pods wait for
	}
	pg := g.groups[key]
	if pg == nil {
		pg = &podGroup{f: f}
		g.groups[key] = pg
		g.order = append(g.order, key)
	}
	pg.pods++
}

// quietPods reads more of the Pods that say nothing specific: the events
// of a few of them (and their claims); then what they reference, checked
// once for every Pod of the same references (the Pods of one owner share
// them).
func (w *walk) quietPods(quiet []*corev1.Pod, g *podGroups, depth int, jobFailed bool) {
	refs := map[string]*finding{}
	for i, p := range quiet {
		name := kindName("Pod", p.Namespace, p.Name)
		st, _ := podStatus(p, jobFailed)
		found := i < maxEventPods && w.podEvents(p, st, g, depth)
		if !found {
			found = w.podReferences(p, refs, g, depth)
		}
		if !found && !st.claims {
			g.add(finding{cause: Cause{Object: name, Reason: st.reason, Text: st.text, Warning: st.warning}, rank: st.rank, depth: depth})
		}
	}
}

// podEvents adds a quiet Pod's most telling Warning event and what its
// claims say; false when neither says anything.
func (w *walk) podEvents(p *corev1.Pod, st podState, g *podGroups, depth int) bool {
	found := false
	// the scheduler waits for claims: its events say no more
	if !st.claims {
		if ev, ok := w.warning(p.Namespace, p.UID); ok {
			found = true
			g.add(finding{cause: Cause{Object: kindName("Pod", p.Namespace, p.Name), Reason: ev.Reason, Text: ReasonMessage(ev.Reason, ev.Message), Warning: failing(p, ev)}, rank: eventRank(ev.Reason), depth: depth})
		}
	}
	if st.claims || p.Status.Phase == corev1.PodPending {
		if f, ok := w.podClaims(p, depth+1); ok {
			found = true
			g.add(f)
		}
	}
	return found
}

// podReferences adds the object a quiet Pod references that is missing,
// if any; refs holds what was found of each set of references checked
// (nil: nothing), and the first maxEventPods sets are checked.
func (w *walk) podReferences(p *corev1.Pod, refs map[string]*finding, g *podGroups, depth int) bool {
	pr := podRefs(p)
	key := refsKey(pr)
	f, checked := refs[key]
	if !checked && len(refs) < maxEventPods {
		if rf, ok := w.references(p, pr, depth); ok {
			f = &rf
		}
		refs[key] = f
	}
	if f == nil {
		return false
	}
	rf := *f
	rf.cause.Object = kindName("Pod", p.Namespace, p.Name)
	g.add(rf)
	return true
}

// podStatus reads a Pod's status (podCauses): false for a Pod that is
// ready, has completed, or is being deleted.
func podStatus(p *corev1.Pod, jobFailed bool) (podState, bool) {
	for _, read := range podCauses {
		if st, v := read(p, jobFailed); v != podNext {
			return st, v == podPending
		}
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
