//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"khook.io/core/testing/testcluster"
)

var listAll = metav1.ListOptions{}

// startPrivateCluster starts a cluster of the test's own: stopping its API
// server must not disturb the tests that share the common one.
func startPrivateCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.Keep()
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop the private cluster: %v", err)
		}
	})
	return c
}

func privateClient(t *testing.T, c *testcluster.Cluster) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// hookLabel marks the objects the holding webhook holds.
const hookLabel = "khook.test/hold"

// holdingWebhook is a validating admission webhook that holds the next
// create of an object labelled hookLabel once armed.
type holdingWebhook struct {
	mu      sync.Mutex
	held    chan struct{} // closed when the armed hold caught a create
	release chan struct{} // closed to let it through
	probed  chan struct{} // closed when the probe (a dry run) arrived
}

// arm makes the webhook hold the next labelled create: held is closed when
// one arrived, release lets it (and any that follow) through.
func (h *holdingWebhook) arm() (held <-chan struct{}, release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.release = make(chan struct{}), make(chan struct{})
	rel := h.release
	var once sync.Once
	return h.held, func() { once.Do(func() { close(rel) }) }
}

func (h *holdingWebhook) hold(ctx context.Context) {
	h.mu.Lock()
	held, release := h.held, h.release
	h.mu.Unlock()
	if held == nil {
		return
	}
	select {
	case <-held:
	default:
		close(held)
	}
	select {
	case <-release:
	case <-ctx.Done():
	}
}

func newHoldingWebhook(t *testing.T, c *testcluster.Cluster) *holdingWebhook {
	t.Helper()
	h := &holdingWebhook{probed: make(chan struct{})}
	var probeOnce sync.Once
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		if review.Request.DryRun != nil && *review.Request.DryRun {
			probeOnce.Do(func() { close(h.probed) })
		} else {
			h.hold(r.Context())
			if r.Context().Err() != nil {
				return
			}
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/validate"
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	timeout := int32(30)
	cs := privateClient(t, c)
	ctx := context.Background()
	_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "khook-test-hold"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "hold.khook.test",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{hookLabel: "true"}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// the API server applies a new webhook configuration within moments:
	// probe with dry runs until the webhook sees one
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default", Labels: map[string]string{hookLabel: "true"}}}
	deadline := time.Now().Add(failAfter)
	for {
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		select {
		case <-h.probed:
			return h
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook never became active (last dry run: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRefused waits until nothing listens on the loopback port any more.
func waitRefused(port int) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(failAfter)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s still accepts connections after %s", addr, failAfter)
}
