package waiter

import (
	"context"

	"khook.io/core/kube"
)

// UntilGone blocks until every target is gone, ctx ends, or an API error
// makes waiting pointless (forbidden, unknown type). It follows watch
// events, so it returns within milliseconds of the last deletion.
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
	return Wait(ctx, c, Options{Targets: targets, Gone: true, What: "deletion", Progress: progress})
}
