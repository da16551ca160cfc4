package waiter

import (
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// KStatus is a CheckFunc that judges an object as kstatus does (the
// library Flux, Helm 4 and kpt use): ready when its status is Current.
// InProgress and Terminating are "not yet" (current says which, and
// kstatus's message: "Deployment is available. Replicas: 0/1"); Failed
// ends the wait at once with kstatus's reason, as Helm 4's status watcher
// does, since only a change of the object can cure it.
func KStatus(obj *unstructured.Unstructured) (bool, string, error) {
	res, err := status.Compute(obj)
	if err != nil {
		return false, "", fmt.Errorf("%s: compute its status: %w", objectName(obj.GetKind(), obj), err)
	}
	current := string(res.Status)
	if res.Message != "" {
		current += ": " + res.Message
	}
	switch res.Status {
	case status.CurrentStatus:
		return true, current, nil
	case status.FailedStatus:
		return false, current, fmt.Errorf("%s failed: %s", objectName(obj.GetKind(), obj), res.Message)
	}
	return false, current, nil
}
