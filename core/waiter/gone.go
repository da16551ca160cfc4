package waiter

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"khook.io/core/kube"
)

// goneReaders bounds the parallel reads of UntilGone's first look.
const goneReaders = 8

// UntilGone blocks until every target is gone, ctx ends, or an API error
// makes waiting pointless (forbidden, unknown type). It first reads each
// named target once (present): an object deleted without finalizers is
// gone by the time its delete is answered, and a read answers from etcd
// at once, where a watch's first list waits until the API server's watch
// cache has caught up (on a quiet cluster, up to its progress interval,
// 100 ms: deletes would end in waves of that pace). What is still there
// is then followed by watch events, so it returns within milliseconds of
// the last deletion.
//
// A named target with a UID is gone once no object of that name has that
// UID: an object re-created under the same name meanwhile is another
// object and is not waited for. A named target without a UID waits until
// no object of that name exists; a target by type until none matches.
//
// On expiry the error names the objects still present and why they stay
// (being deleted, their finalizers). progress, when not nil, receives a
// line when the set of objects still present changes.
func UntilGone(ctx context.Context, c *kube.Clients, targets []Target, progress func(string)) error {
	targets = present(ctx, c, targets)
	if len(targets) == 0 {
		return nil
	}
	return Wait(ctx, c, Options{Targets: targets, Gone: true, What: "deletion", Progress: progress})
}

// present returns the targets that are still there: each named target is
// read once (a target by type is kept); one that is not found, or found
// with another UID, is gone. A read that fails keeps its target: the
// watch reports what it meets.
func present(ctx context.Context, c *kube.Clients, targets []Target) []Target {
	keep := make([]bool, len(targets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, goneReaders)
	for i, t := range targets {
		keep[i] = true
		if t.Name == "" || t.Mapping == nil || t.LabelSelector != "" || t.FieldSelector != "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			n := normalize(t)
			u, err := c.Resource(n.Mapping, n.Namespace).Get(ctx, n.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				keep[i] = false
			case err == nil && t.UID != "" && u.GetUID() != t.UID:
				keep[i] = false // re-created: the object waited for is gone
			}
		}()
	}
	wg.Wait()
	var out []Target
	for i, t := range targets {
		if keep[i] {
			out = append(out, t)
		}
	}
	return out
}
