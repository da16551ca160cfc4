//go:build integration

package testcluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/testing/testcluster"
)

// The lossy link forwards every request and loses the answers it is told
// to: client-go (which resends nothing but reads) sees its connection
// break while the write landed; a request held past its client's
// deadline is never forwarded.
func TestLossyLink(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t, "lossy")
	link := c.NewLossyLink(t, testcluster.LossyOptions{Seed: 1})
	cs, err := kubernetes.NewForConfig(link.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := kubernetes.NewForConfig(c.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
	}

	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm("through"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a create through the link: %v", err)
	}
	link.CutNext(testcluster.WriteTo("/configmaps"))
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, cm("cut"), metav1.CreateOptions{})
	if err == nil || apierrors.IsAlreadyExists(err) {
		t.Fatalf("the create whose answer was cut: %v, want a broken connection", err)
	}
	t.Logf("the client saw: %v", err)
	if _, err := direct.CoreV1().ConfigMaps(ns).Get(ctx, "cut", metav1.GetOptions{}); err != nil {
		t.Fatalf("the create whose answer was cut did not land: %v", err)
	}

	release := link.Hold(testcluster.WriteTo("/configmaps"), time.Minute)
	defer release()
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = cs.CoreV1().ConfigMaps(ns).Create(hctx, cm("held"), metav1.CreateOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a held create: %v, want its deadline", err)
	}
	for deadline := time.Now().Add(time.Minute); link.Counts().Dropped == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the link never noticed that the held create's client gave up: %s", link.Counts())
		}
	}
	release()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := direct.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the held create that its client gave up landed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	link.SetLoss(1)
	if err := cs.CoreV1().RESTClient().Get().AbsPath("/version").MaxRetries(0).Do(ctx).Error(); err == nil {
		t.Fatal("a read through a link that loses every answer got one")
	}
	n := link.Counts()
	if n.Cut < 2 || n.CutWrites != 1 || n.Held != 1 || n.Dropped != 1 {
		t.Errorf("counts: %s", n)
	}
}
