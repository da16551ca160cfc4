package objects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Where khook's record of what it overwrote (decision 210) is kept when
// the object's annotations are no place for it (decision 260): a
// companion Secret beside the object, owned by it.
const (
	// companionPrefix begins a companion's name; a hash of the object's
	// group, kind, namespace and name ends it.
	companionPrefix = "khook-previous-"
	// companionKey is the companion's data key holding the record.
	companionKey = "record"
	// CompanionType is a companion Secret's type.
	CompanionType corev1.SecretType = "khook.io/previous"
	// AnnotationPreviousOf names, on a companion, the object whose record
	// it keeps ("Deployment.apps web"), for people.
	AnnotationPreviousOf = "khook.io/previous-of"
	// companionClusterNamespace keeps the companions of cluster-scoped
	// objects.
	companionClusterNamespace = metav1.NamespaceDefault
)

// Bounds of the record.
const (
	// maxAnnotationRecord bounds a record kept in the object's
	// annotation: a larger one is kept in a companion.
	maxAnnotationRecord = 64 << 10
	// maxRecordValues bounds the values any record keeps (a companion
	// Secret holds at most 1 MiB); values beyond it are "large".
	maxRecordValues = 512 << 10
	// totalAnnotationBytes is what the API server allows an object's
	// annotations in all, keys and values counted
	// (apimachinery's TotalAnnotationSizeLimitB).
	totalAnnotationBytes = 256 << 10
)

// copiedKinds are the kinds whose annotations a controller copies onto
// other objects and never removes there: a record on them would outlive
// khook on objects khook never touched (decision 260). Found in the
// controllers of k8s.io/kubernetes v1.35: the deployment controller
// copies a Deployment's annotations (all but its skip list, which has the
// last-applied one) onto its new ReplicaSet at every sync; the DaemonSet
// and StatefulSet controllers copy theirs onto every ControllerRevision
// they make. (A CronJob's Jobs take the annotations of its jobTemplate,
// not the CronJob's; Services' Endpoints and EndpointSlices take no
// annotations of the Service.)
var copiedKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "DaemonSet"}:   true,
	{Group: "apps", Kind: "StatefulSet"}: true,
}

// annotationsCopied reports whether a controller copies obj's
// annotations onto other objects.
func annotationsCopied(obj *unstructured.Unstructured) bool {
	return copiedKinds[obj.GroupVersionKind().GroupKind()]
}

// companionRef is where obj's companion is: its namespace (obj's, or
// companionClusterNamespace for a cluster-scoped object) and name.
func companionRef(obj *unstructured.Unstructured) (namespace, name string) {
	gk := obj.GroupVersionKind().GroupKind()
	sum := sha256.Sum256([]byte(gk.Group + "/" + gk.Kind + "/" + obj.GetNamespace() + "/" + obj.GetName()))
	namespace = obj.GetNamespace()
	if namespace == "" {
		namespace = companionClusterNamespace
	}
	return namespace, companionPrefix + hex.EncodeToString(sum[:])[:20]
}

// companionName says which companion keeps obj's record, for people.
func companionName(obj *unstructured.Unstructured) string {
	ns, name := companionRef(obj)
	return "Secret " + ns + "/" + name
}

// readCompanion reads obj's companion: nil when there is none, or when
// it is another object's of the same name (its owner's UID differs: one
// deleted since, whose companion the garbage collector removes).
func (m *Manager) readCompanion(ctx context.Context, obj *unstructured.Unstructured) (*corev1.Secret, error) {
	ns, name := companionRef(obj)
	s, err := m.kube.Typed.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read khook's record of previous values (%s): %w", companionName(obj), err)
	}
	for _, o := range s.OwnerReferences {
		if o.UID == obj.GetUID() {
			return s, nil
		}
	}
	return nil, nil
}

// writeCompanion keeps record (encoded) in obj's companion: it creates
// it, or replaces the record of the one read (cur, which it updates with
// its resourceVersion: another writer meanwhile is a conflict). It
// returns what it wrote.
func (m *Manager) writeCompanion(ctx context.Context, obj *unstructured.Unstructured, cur *corev1.Secret, record string) (*corev1.Secret, error) {
	ns, name := companionRef(obj)
	secrets := m.kube.Typed.CoreV1().Secrets(ns)
	opts := metav1.CreateOptions{FieldManager: m.recordManager()}
	if cur != nil {
		s := cur.DeepCopy()
		s.Data = map[string][]byte{companionKey: []byte(record)}
		out, err := secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: m.recordManager()})
		if apierrors.IsConflict(err) {
			// sent again after a lost answer, the update meets itself
			if now, gerr := secrets.Get(ctx, name, metav1.GetOptions{}); gerr == nil && now.UID == cur.UID && string(now.Data[companionKey]) == record {
				return now, nil
			}
		}
		if err != nil {
			return nil, fmt.Errorf("record the values khook overwrites (%s): %w", companionName(obj), err)
		}
		return out, nil
	}
	gvk := obj.GroupVersionKind()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      map[string]string{LabelManagedBy: ManagedBy},
			Annotations: map[string]string{AnnotationPreviousOf: strings.TrimSuffix(gvk.Kind+"."+gvk.Group, ".") + " " + strings.TrimPrefix(obj.GetNamespace()+"/"+obj.GetName(), "/")},
			// the record goes with its object, khook or not
			OwnerReferences: []metav1.OwnerReference{{APIVersion: obj.GetAPIVersion(), Kind: gvk.Kind, Name: obj.GetName(), UID: obj.GetUID()}},
		},
		Type: CompanionType,
		Data: map[string][]byte{companionKey: []byte(record)},
	}
	out, err := secrets.Create(ctx, s, opts)
	if apierrors.IsAlreadyExists(err) {
		// another object's, of a name the garbage collector has yet to
		// free (its owner's UID differs): replace it
		old, gerr := secrets.Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			return nil, fmt.Errorf("record the values khook overwrites (%s): %w", companionName(obj), gerr)
		}
		s.ResourceVersion = old.ResourceVersion
		out, err = secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: m.recordManager()})
	}
	if err != nil {
		return nil, fmt.Errorf("record the values khook overwrites (%s): %w", companionName(obj), err)
	}
	return out, nil
}

// deleteCompanion deletes the companion s (as read or written: its UID
// and resourceVersion are preconditions, so one written since is kept);
// one already gone is no error.
func (m *Manager) deleteCompanion(ctx context.Context, obj *unstructured.Unstructured, s *corev1.Secret) error {
	uid, rv := s.UID, s.ResourceVersion
	err := m.kube.Typed.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove khook's record of previous values (%s): %w", companionName(obj), err)
	}
	return nil
}

// restoreCompanion puts the companion back as it was before a record
// written for a write that was refused: deleted when it held no record
// before (existed false), holding before again otherwise; wrote is what
// was written (a companion written since is kept).
func (m *Manager) restoreCompanion(ctx context.Context, obj *unstructured.Unstructured, wrote *corev1.Secret, before string, existed bool) error {
	if !existed {
		return m.deleteCompanion(ctx, obj, wrote)
	}
	s := wrote.DeepCopy()
	s.Data = map[string][]byte{companionKey: []byte(before)}
	_, err := m.kube.Typed.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: m.recordManager()})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("take back khook's record of previous values (%s), written before the refused write (destroy removes it): %w", companionName(obj), err)
	}
	return nil
}

// annotationBytes is what the API server would count of obj's
// annotations after khook's write of o (keys and values: each key with
// the longer of its two values, the last-applied annotation with conf,
// what khook's apply keeps there, when the longer), record being the
// record's value; the record's own current value is not counted.
func annotationBytes(live, o *unstructured.Unstructured, conf, record string) int {
	lengths := map[string]int{}
	for _, a := range []map[string]string{live.GetAnnotations(), o.GetAnnotations()} {
		for k, v := range a {
			lengths[k] = max(lengths[k], len(v))
		}
	}
	if _, ok := lengths[corev1.LastAppliedConfigAnnotation]; ok || conf != "" {
		lengths[corev1.LastAppliedConfigAnnotation] = max(lengths[corev1.LastAppliedConfigAnnotation], len(conf))
	}
	lengths[AnnotationPrevious] = len(record)
	n := 0
	for k, l := range lengths {
		n += len(k) + l
	}
	return n
}

// pointer is the annotation's value when the record is in a companion
// while the object's annotations are not copied: it says where to look.
func pointer(obj *unstructured.Unstructured) string {
	_, name := companionRef(obj)
	b, _ := json.Marshal(previousJSON{In: "Secret/" + name})
	return string(b)
}

// annotationPointer is an annotation's JSON pointer.
func annotationPointer(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// removeAnnotationRecord removes the record annotation holding value
// from obj (swapRecord: a record written since stays); an object gone is
// no error.
func (m *Manager) removeAnnotationRecord(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, value string) error {
	if err := m.swapRecord(ctx, ri, obj, value, "", false); err != nil {
		return fmt.Errorf("move khook's record of previous values off the object (%s): %w", AnnotationPrevious, err)
	}
	return nil
}
