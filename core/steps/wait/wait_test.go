package wait

import (
	"testing"

	"khook.io/core/spec"
	"khook.io/core/waiter"
)

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		t    waiter.Target
		ref  spec.ResourceRef
		want string
	}{
		{waiter.Target{Namespace: "kube-system"}, spec.ResourceRef{Type: "deployment", Name: "coredns"}, "deployment/coredns in namespace kube-system"},
		{waiter.Target{AllNamespaces: true, LabelSelector: "app=web"}, spec.ResourceRef{Type: "pods"}, "pods in all namespaces (selector app=web)"},
		{waiter.Target{Namespace: "x", FieldSelector: "status.phase=Running", LabelSelector: "a=b"}, spec.ResourceRef{Type: "pods"}, "pods in namespace x (selector a=b, field selector status.phase=Running)"},
		{waiter.Target{}, spec.ResourceRef{Type: "crd", Name: "widgets.example.com"}, "crd/widgets.example.com"},
	} {
		if got := describe(tc.t, tc.ref); got != tc.want {
			t.Errorf("describe = %q, want %q", got, tc.want)
		}
	}
}
