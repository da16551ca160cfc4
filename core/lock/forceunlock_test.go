package lock

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A break whose answer is lost is sent again by the connection retries;
// the resend conflicts with the break itself. ForceUnlock then finds its
// own mark on the free Lease and reports success, not a live holder. A
// conflict with a holder's renewal stays an error.
func TestForceUnlockWhoseAnswerWasLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lands   bool // the break lands before the conflict
		wantErr bool
	}{
		{"the break landed", true, false},
		{"the holder renewed", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "aaaa"
			lease := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: testLoc.Namespace, Name: testLoc.Name},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &id},
			}
			c := fake.NewClientset(lease)
			c.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if tc.lands {
					obj := a.(k8stesting.UpdateAction).GetObject()
					if err := c.Tracker().Update(a.GetResource(), obj, testLoc.Namespace); err != nil {
						return true, nil, err
					}
				}
				return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, testLoc.Name, nil)
			})
			h, err := ForceUnlock(context.Background(), c, testLoc, id)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ForceUnlock: %v, want an error: %v", err, tc.wantErr)
			}
			if h.ID != id {
				t.Errorf("the broken holder %q, want %q", h.ID, id)
			}
		})
	}
}
