package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// fakeAPI is a transport answering as an API server stores objects
// (optimistic concurrency on resourceVersion, delete preconditions,
// finalizers), reading JSON and protobuf bodies as the API server does,
// whose connections break as cut says: before the server acts on a
// request, or after it acted and before its answer (a lost answer).
type fakeAPI struct {
	mu      sync.Mutex
	objects map[string]map[string]any // by object path
	rv      int
	// cut says how the connection of a request breaks: 0 (it does not),
	// before or after
	cut func(method, path string, n int) int
	// seen counts the requests by "METHOD path"; acted counts the
	// writes that took effect
	seen  map[string]int
	acted int
}

func newFakeAPI(cut func(method, path string, n int) int) *fakeAPI {
	return &fakeAPI{objects: map[string]map[string]any{}, seen: map[string]int{}, cut: cut}
}

// cutFirst breaks the first request of method after the server acted on
// it.
func cutFirst(method string) func(string, string, int) int {
	return func(m, _ string, n int) int {
		if m == method && n == 1 {
			return after
		}
		return 0
	}
}

func (f *fakeAPI) put(path string, obj map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.store(path, obj)
}

func (f *fakeAPI) store(path string, obj map[string]any) map[string]any {
	f.rv++
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	md["resourceVersion"] = strconv.Itoa(f.rv)
	if md["uid"] == nil {
		md["uid"] = fmt.Sprintf("uid-%d", f.rv)
	}
	md["managedFields"] = []any{map[string]any{"manager": "khook", "operation": "Update", "time": time.Unix(int64(f.rv), 0).UTC().Format(time.RFC3339)}}
	f.objects[path] = obj
	return obj
}

func (f *fakeAPI) object(path string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.objects[path]
}

func status(code int, reason string) (int, map[string]any) {
	return code, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code}
}

func (f *fakeAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	var data []byte
	if req.Body != nil {
		data, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := req.Method + " " + req.URL.Path
	f.seen[key]++
	how := 0
	if f.cut != nil {
		how = f.cut(req.Method, req.URL.Path, f.seen[key])
	}
	if how == before {
		return nil, opErr("read", syscall.ECONNRESET)
	}
	code, body := f.act(req, data)
	if how == after {
		return nil, opErr("read", syscall.ECONNRESET)
	}
	out, _ := json.Marshal(body)
	return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(string(out))), Request: req}, nil
}

func (f *fakeAPI) act(req *http.Request, data []byte) (int, map[string]any) {
	p, _ := parseResourcePath(req.URL.Path)
	ct := mediaType(req.Header.Get("Content-Type"))
	path := strings.TrimSuffix(req.URL.Path, "/"+p.sub)
	cur := f.objects[path]
	switch req.Method {
	case http.MethodGet:
		if cur == nil {
			return status(404, "NotFound")
		}
		return 200, cur
	case http.MethodPost:
		obj := decodeObject(ct, data)
		name, _ := obj["metadata"].(map[string]any)["name"].(string)
		path += "/" + name
		if f.objects[path] != nil {
			return status(409, "AlreadyExists")
		}
		f.acted++
		return 201, f.store(path, obj)
	case http.MethodPut:
		obj := decodeObject(ct, data)
		if cur == nil {
			return status(404, "NotFound")
		}
		if rv := resourceVersionOf(obj); rv != "" && rv != resourceVersionOf(cur) {
			return status(409, "Conflict")
		}
		obj["metadata"].(map[string]any)["uid"] = cur["metadata"].(map[string]any)["uid"]
		f.acted++
		return 200, f.store(path, obj)
	case http.MethodPatch:
		if cur == nil {
			return status(404, "NotFound")
		}
		w := classify(req)
		if w.rv != "" && w.rv != resourceVersionOf(cur) {
			return status(409, "Conflict")
		}
		curJSON, _ := json.Marshal(cur)
		var after []byte
		var err error
		switch types.PatchType(ct) {
		case types.MergePatchType:
			after, err = jsonpatch.MergePatch(curJSON, data)
		case types.StrategicMergePatchType:
			after, err = strategicPatch(cur, curJSON, data)
		case types.JSONPatchType:
			var p jsonpatch.Patch
			if p, err = jsonpatch.DecodePatch(data); err == nil {
				after, err = p.Apply(curJSON)
			}
		}
		if err != nil {
			return status(422, "Invalid")
		}
		var obj map[string]any
		_ = json.Unmarshal(after, &obj)
		f.acted++
		return 200, f.store(path, obj)
	case http.MethodDelete:
		if cur == nil {
			return status(404, "NotFound")
		}
		w := classify(req)
		md := cur["metadata"].(map[string]any)
		if (w.uid != "" && w.uid != md["uid"]) || (w.rv != "" && w.rv != md["resourceVersion"]) {
			return status(409, "Conflict")
		}
		f.acted++
		if fin, _ := md["finalizers"].([]any); len(fin) > 0 {
			md["deletionTimestamp"] = "2026-11-01T12:00:00Z"
			return 200, f.store(path, cur)
		}
		delete(f.objects, path)
		return 200, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"}
	}
	return status(405, "MethodNotAllowed")
}

// clientsOver are a typed (protobuf) and a dynamic (JSON) client whose
// requests go through the connection retries to api.
func clientsOver(t *testing.T, api http.RoundTripper) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	var slept []time.Duration
	hc := &http.Client{Transport: newTestRetry(api, &slept)}
	cfg := &rest.Config{Host: "https://10.0.0.1:6443"}
	typed, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return typed, dyn
}

const leasePath = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lock"

func lease(holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock", Namespace: "ns", Labels: map[string]string{"app.kubernetes.io/managed-by": "khook"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
}

// The typed clientsets speak protobuf: a create, a conditional update and
// a conditional delete whose answers were lost are each sent again and
// recognised as the first attempt's work, as JSON ones are.
func TestLostAnswersOfProtobufWrites(t *testing.T) {
	ctx := context.Background()
	t.Run("a Lease create", func(t *testing.T) {
		api := newFakeAPI(cutFirst(http.MethodPost))
		typed, _ := clientsOver(t, api)
		got, err := typed.CoordinationV1().Leases("ns").Create(ctx, lease("run-1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the create whose answer was lost: %v", err)
		}
		if got.ResourceVersion == "" || *got.Spec.HolderIdentity != "run-1" {
			t.Errorf("the answer is not the Lease created: %+v", got)
		}
		if api.acted != 1 || api.seen["POST /apis/coordination.k8s.io/v1/namespaces/ns/leases"] != 2 {
			t.Errorf("%d writes acted on, requests %v: want the create sent twice, acted once", api.acted, api.seen)
		}
	})
	t.Run("another run's Lease is not taken for this create's", func(t *testing.T) {
		api := newFakeAPI(func(m, _ string, n int) int {
			if m == http.MethodPost && n == 1 {
				return before // the first never landed: the Lease is another's
			}
			return 0
		})
		api.put(leasePath, map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": map[string]any{"name": "lock", "namespace": "ns"}, "spec": map[string]any{"holderIdentity": "run-2"}})
		typed, _ := clientsOver(t, api)
		_, err := typed.CoordinationV1().Leases("ns").Create(ctx, lease("run-1"), metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			t.Fatalf("want AlreadyExists, got %v", err)
		}
	})
	t.Run("a conditional Lease delete", func(t *testing.T) {
		api := newFakeAPI(cutFirst(http.MethodDelete))
		api.put(leasePath, map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": map[string]any{"name": "lock", "namespace": "ns"}})
		md := api.object(leasePath)["metadata"].(map[string]any)
		uid, rv := types.UID(md["uid"].(string)), md["resourceVersion"].(string)
		typed, _ := clientsOver(t, api)
		err := typed.CoordinationV1().Leases("ns").Delete(ctx, "lock", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		if err != nil {
			t.Fatalf("the delete whose answer was lost: %v", err)
		}
		if api.acted != 1 || api.seen["DELETE "+leasePath] != 2 || api.object(leasePath) != nil {
			t.Errorf("%d writes acted on, requests %v", api.acted, api.seen)
		}
	})
	t.Run("a helm release Secret create (helm's storage driver)", func(t *testing.T) {
		api := newFakeAPI(cutFirst(http.MethodPost))
		typed, _ := clientsOver(t, api)
		rel := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.app.v1", Labels: map[string]string{
				"name": "app", "owner": "helm", "status": "pending-install", "version": "1", "khook.io/run": "r1", "khook.io/run-revision": "1"}},
			Type: "helm.sh/release.v1",
			Data: map[string][]byte{"release": []byte("H4sIAAAAAAAA/6pWKkktLlGyUlAqSy0qzszPU7JSMlSqBQQAAP//")},
		}
		if _, err := typed.CoreV1().Secrets("ns").Create(ctx, rel, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the create whose answer was lost: %v", err)
		}
		if api.acted != 1 || api.seen["POST /api/v1/namespaces/ns/secrets"] != 2 {
			t.Errorf("%d writes acted on, requests %v", api.acted, api.seen)
		}
	})
	t.Run("a conditional update of a Secret (the state record)", func(t *testing.T) {
		path := "/api/v1/namespaces/ns/secrets/record"
		api := newFakeAPI(cutFirst(http.MethodPut))
		api.put(path, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "record", "namespace": "ns"}, "data": map[string]any{"r": "MQ=="}})
		typed, _ := clientsOver(t, api)
		sec, err := typed.CoreV1().Secrets("ns").Get(ctx, "record", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sec.Data["r"] = []byte("2")
		got, err := typed.CoreV1().Secrets("ns").Update(ctx, sec, metav1.UpdateOptions{FieldManager: "khook"})
		if err != nil {
			t.Fatalf("the update whose answer was lost: %v", err)
		}
		if got.ResourceVersion == sec.ResourceVersion || string(got.Data["r"]) != "2" {
			t.Errorf("the answer is not the Secret as updated: %+v", got)
		}
		if api.acted != 1 || api.seen["PUT "+path] != 2 {
			t.Errorf("%d writes acted on, requests %v", api.acted, api.seen)
		}
	})
}

// A resent write whose first attempt did not land, or was overtaken by
// another writer, keeps the refusal the API server gave it.
func TestLostAnswerRefusalsThatStand(t *testing.T) {
	ctx := context.Background()
	path := "/api/v1/namespaces/ns/secrets/record"
	seed := func(api *fakeAPI) {
		api.put(path, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "record", "namespace": "ns"}, "data": map[string]any{"r": "MQ=="}})
	}
	t.Run("another writer changed the object after this update landed", func(t *testing.T) {
		api := newFakeAPI(nil)
		seed(api)
		typed, _ := clientsOver(t, api)
		sec, _ := typed.CoreV1().Secrets("ns").Get(ctx, "record", metav1.GetOptions{})
		sec.Data["r"] = []byte("2")
		// the other writer acts between this run's two attempts
		api.cut = func(m, _ string, n int) int {
			if m == http.MethodPut && n == 1 {
				return after
			}
			if m == http.MethodPut && n == 2 {
				obj := api.objects[path]
				obj["data"] = map[string]any{"r": "Mw=="}
				api.store(path, obj)
			}
			return 0
		}
		_, err := typed.CoreV1().Secrets("ns").Update(ctx, sec, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			t.Fatalf("want the conflict to stand, got %v", err)
		}
	})
	t.Run("a delete without preconditions is never sent twice", func(t *testing.T) {
		api := newFakeAPI(func(m, _ string, n int) int {
			if m == http.MethodDelete {
				return before // it never acts: the object stays
			}
			return 0
		})
		seed(api)
		typed, _ := clientsOver(t, api)
		err := typed.CoreV1().Secrets("ns").Delete(ctx, "record", metav1.DeleteOptions{})
		if err == nil || !strings.Contains(err.Error(), "reset") {
			t.Fatalf("want the broken connection's error, got %v", err)
		}
		if api.seen["DELETE "+path] != 1 {
			t.Errorf("the delete was sent %d times, want once", api.seen["DELETE "+path])
		}
	})
}

// Writes of every kind whose answers were lost, as the dynamic client
// (JSON) sends them: each is resolved without the caller seeing the
// lost answer.
func TestLostAnswersResolved(t *testing.T) {
	ctx := context.Background()
	cmPath := "/api/v1/namespaces/ns/configmaps/cm"
	cm := func() map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": "ns",
			"annotations": map[string]any{"khook.io/previous": `{"data":{"k":"old"}}`}}, "data": map[string]any{"k": "new", "x": "1"}}
	}
	rvOf := func(api *fakeAPI) string { return resourceVersionOf(api.object(cmPath)) }
	for _, tc := range []struct {
		name   string
		method string
		send   func(typed kubernetes.Interface, dyn dynamic.Interface, rv string) error
		check  func(t *testing.T, obj map[string]any)
		sent   int // requests of method sent
	}{
		{"a revert patch (strategic merge) carrying the version", http.MethodPatch, func(typed kubernetes.Interface, _ dynamic.Interface, rv string) error {
			patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"annotations":{"khook.io/previous":null}},"data":{"k":"old"}}`, rv)
			_, err := typed.CoreV1().ConfigMaps("ns").Patch(ctx, "cm", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}, func(t *testing.T, obj map[string]any) {
			if obj["data"].(map[string]any)["k"] != "old" || obj["metadata"].(map[string]any)["annotations"] != nil && obj["metadata"].(map[string]any)["annotations"].(map[string]any)["khook.io/previous"] != nil {
				t.Errorf("the revert did not land: %v", obj)
			}
		}, 2},
		{"a merge patch carrying the version", http.MethodPatch, func(_ kubernetes.Interface, dyn dynamic.Interface, rv string) error {
			patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"data":{"x":null,"k":"v2"}}`, rv)
			_, err := dyn.Resource(cmGVR).Namespace("ns").Patch(ctx, "cm", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}, nil, 2},
		{"a JSON patch that pins the version", http.MethodPatch, func(_ kubernetes.Interface, dyn dynamic.Interface, rv string) error {
			patch := fmt.Sprintf(`[{"op":"replace","path":"/metadata/resourceVersion","value":%q},{"op":"replace","path":"/data/k","value":"v3"}]`, rv)
			_, err := dyn.Resource(cmGVR).Namespace("ns").Patch(ctx, "cm", types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}, nil, 2},
		{"a delete without preconditions is resolved by reading", http.MethodDelete, func(_ kubernetes.Interface, dyn dynamic.Interface, _ string) error {
			return dyn.Resource(cmGVR).Namespace("ns").Delete(ctx, "cm", metav1.DeleteOptions{})
		}, func(t *testing.T, obj map[string]any) {
			if obj != nil {
				t.Errorf("the object is still there: %v", obj)
			}
		}, 1},
		{"a delete with a uid precondition", http.MethodDelete, func(typed kubernetes.Interface, _ dynamic.Interface, _ string) error {
			uid := types.UID("uid-1")
			return typed.CoreV1().ConfigMaps("ns").Delete(ctx, "cm", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		}, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(cutFirst(tc.method))
			api.put(cmPath, cm())
			typed, dyn := clientsOver(t, api)
			if err := tc.send(typed, dyn, rvOf(api)); err != nil {
				t.Fatalf("the write whose answer was lost: %v", err)
			}
			if api.acted != 1 || api.seen[tc.method+" "+cmPath] != tc.sent {
				t.Errorf("%d writes acted on, requests %v: want %d %s sent, acted on once", api.acted, api.seen, tc.sent, tc.method)
			}
			if tc.check != nil {
				tc.check(t, api.object(cmPath))
			}
		})
	}
	t.Run("a delete of an object with finalizers is being deleted", func(t *testing.T) {
		api := newFakeAPI(cutFirst(http.MethodDelete))
		obj := cm()
		obj["metadata"].(map[string]any)["finalizers"] = []any{"example.com/hold"}
		api.put(cmPath, obj)
		_, dyn := clientsOver(t, api)
		if err := dyn.Resource(cmGVR).Namespace("ns").Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

var cmGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// BenchmarkClassify: what the resend rule costs a request before it is
// sent (reading its body: a JSON patch of a ConfigMap, a protobuf update
// of a 64 KiB Secret).
func BenchmarkClassify(b *testing.B) {
	patch := `{"metadata":{"labels":{"a":"b"}},"data":{"k":"v","x":"y"}}`
	sec := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", ResourceVersion: "7"},
		Data: map[string][]byte{"record.json.gz": make([]byte, 64<<10)}}
	for _, tc := range []struct {
		name, method, url, ct string
		body                  []byte
	}{
		{"strategic patch", http.MethodPatch, "https://h/api/v1/namespaces/ns/configmaps/cm", string(types.StrategicMergePatchType), []byte(patch)},
		{"protobuf update of a 64KiB Secret", http.MethodPut, "https://h/api/v1/namespaces/ns/secrets/s", "application/vnd.kubernetes.protobuf", protobufOf(b, sec)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest(tc.method, tc.url, bytes.NewReader(tc.body))
				req.Header.Set("Content-Type", tc.ct)
				if classify(req).policy == retryUnsent {
					b.Fatal("not classified")
				}
			}
		})
	}
}

func protobufOf(b *testing.B, obj runtime.Object) []byte {
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}
