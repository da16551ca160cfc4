//go:build integration

package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	helmkube "helm.sh/helm/v4/pkg/kube"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"

	"khook.io/core/redact"
	"khook.io/core/testing/testcluster"
)

// createCase is one Create of TestCreateAsHelms, made the same way by
// both sides.
type createCase struct {
	name string
	// files are a chart's rendered templates; {{NS}} is the side's
	// namespace (cluster-scoped objects are named after it). They are
	// sorted in Helm's install order and built as Helm's install builds
	// its manifest, without client-side validation (as khook installs).
	files map[string]string
	// existing objects, created in the side's namespace before the Create
	// (by another field manager).
	existing []string
	// conflicts: how many times a POST of an object ("configmaps/a") is
	// answered 409 Conflict before it reaches the API server.
	conflicts map[string]int
	opts      []helmkube.ClientCreateOption
	// refused: the options are refused, nothing is sent.
	refused bool
}

var (
	createInstall = helmkube.ClientCreateOptionServerSideApply(false, false) // what helm's install passes, client-side

	createSA = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: app
  labels: {app.kubernetes.io/managed-by: Helm}
  annotations: {meta.helm.sh/release-name: r, meta.helm.sh/release-namespace: "{{NS}}"}
`
	createSecret = `apiVersion: v1
kind: Secret
metadata: {name: creds, labels: {app.kubernetes.io/managed-by: Helm}}
stringData: {password: hunter2}
`
	createConfigMaps = `apiVersion: v1
kind: ConfigMap
metadata: {name: a, labels: {app.kubernetes.io/managed-by: Helm}, annotations: {meta.helm.sh/release-name: r}}
data: {k: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b}
data: {k: b}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
binaryData: {k: Yw==}
`
	createRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "{{NS}}-reader", labels: {app.kubernetes.io/managed-by: Helm}}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "{{NS}}-reader"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "{{NS}}-reader"}
subjects: [{kind: ServiceAccount, name: app, namespace: "{{NS}}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: app}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: app}
subjects: [{kind: ServiceAccount, name: app}]
`
	createService = `apiVersion: v1
kind: Service
metadata: {name: app}
spec:
  clusterIP: None
  selector: {app: app}
  ports: [{port: 80}]
`
)

var createCases = []createCase{
	{
		name: "namespaced and cluster-scoped, in install order",
		// the files' order is not the install order: SortManifests makes it
		files: map[string]string{"templates/svc.yaml": createService, "templates/rbac.yaml": createRBAC,
			"templates/cm.yaml": createConfigMaps, "templates/secret.yaml": createSecret, "templates/sa.yaml": createSA},
		opts: []helmkube.ClientCreateOption{createInstall},
	},
	{
		name: "objects that already exist",
		files: map[string]string{"templates/sa.yaml": createSA + "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default}\n",
			"templates/cm.yaml": createConfigMaps, "templates/svc.yaml": createService},
		existing: []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, labels: {owner: someone-else}}\ndata: {k: theirs}\n"},
		opts:     []helmkube.ClientCreateOption{createInstall},
	},
	{
		name: "objects the API server rejects",
		files: map[string]string{
			"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: tls}\ntype: kubernetes.io/tls\ndata: {}\n",
			"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {'not a key!': x}\n" +
				"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name}\n" +
				"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: good}\n",
			"templates/svc.yaml": createService,
		},
		opts: []helmkube.ClientCreateOption{createInstall},
	},
	{
		name:      "conflicts retried, and given up on",
		files:     map[string]string{"templates/cm.yaml": createConfigMaps + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: stuck}\n", "templates/svc.yaml": createService},
		conflicts: map[string]int{"configmaps/a": 2, "configmaps/stuck": 1000, "services/app": 1},
		opts:      []helmkube.ClientCreateOption{createInstall},
	},
	{
		name:  "an unknown field, strict field validation asked",
		files: map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: odd}\ndata: {k: v}\nspec: {x: 1}\n"},
		opts:  []helmkube.ClientCreateOption{createInstall, helmkube.ClientCreateOptionFieldValidationDirective(helmkube.FieldValidationDirectiveStrict)},
	},
	{
		name: "no objects",
		opts: []helmkube.ClientCreateOption{createInstall},
	},
	{
		name:    "forced conflicts without server-side apply",
		files:   map[string]string{"templates/cm.yaml": createConfigMaps},
		opts:    []helmkube.ClientCreateOption{helmkube.ClientCreateOptionServerSideApply(false, true)},
		refused: true,
	},
	{
		name:  "server-side apply",
		files: map[string]string{"templates/cm.yaml": createConfigMaps, "templates/sa.yaml": createSA},
		opts:  []helmkube.ClientCreateOption{helmkube.ClientCreateOptionServerSideApply(true, false)},
	},
	{
		name:  "no options (helm's default)",
		files: map[string]string{"templates/cm.yaml": createConfigMaps},
	},
}

// TestCreateAsHelms is the differential test of khook's copy of Helm's
// client-side create (create.go, decision 105): each case creates the same
// objects on the test cluster once through khook's Create, in a namespace
// of its own, and once through Helm's own kube.Client.Create with the same
// options, in another, and compares what each did once the namespace
// names are normalised: the requests sent (method, path, query: the field
// manager, the field validation, a dry run; status; as many retries), the
// order of kinds, the Result, the errors (text and API reason, each), the
// objects read back into the ResourceList, and the objects as stored
// (their managedFields included). A Helm upgrade that changes what its
// Create does fails here.
func TestCreateAsHelms(t *testing.T) {
	for _, tc := range createCases {
		t.Run(tc.name, func(t *testing.T) {
			khook := newCreateSide(t, "khook", tc)
			helm := newCreateSide(t, "helm", tc)
			khook.run(func(l helmkube.ResourceList, o ...helmkube.ClientCreateOption) (*helmkube.Result, error) {
				khook.cfg.kube.clientSideCreates = true // as Client.install sets it
				return khook.cfg.kube.Create(l, o...)
			})
			helm.run(helm.cfg.kube.Client.Create)
			t.Logf("helm's create: %v\n%s", helm.err, strings.Join(helm.requests(), "\n"))
			for _, d := range []struct {
				what        string
				khook, helm any
			}{
				{"requests (sorted)", khook.requests(), helm.requests()},
				{"result", khook.result(), helm.result()},
				{"errors (sorted)", khook.errors(), helm.errors()},
				{"objects read back", khook.readBack(), helm.readBack()},
				{"objects stored", khook.stored(), helm.stored()},
			} {
				k, h := pretty(d.khook), pretty(d.helm)
				if k != h {
					t.Errorf("%s differ:\nkhook's create: %s\nhelm's create:  %s", d.what, k, h)
				}
			}
			khook.checkKindOrder()
			helm.checkKindOrder()
			// the comparison is not of nothing: every object of the list was
			// sent, and every conflict answered
			if len(tc.conflicts) > 0 && !strings.Contains(strings.Join(helm.requests(), "\n"), "injected conflict") {
				t.Errorf("no conflict was injected: %q", helm.requests())
			}
			if n := len(helm.requests()); !tc.refused && n < len(helm.list) {
				t.Errorf("helm's create sent %d requests for %d objects: %q", n, len(helm.list), helm.requests())
			}
		})
	}
}

// TestHelmClientSideCreateIgnoresDryRun: Helm's client-side create ignores
// a dry run and creates the objects, which is why khook's copy refuses
// one (create.go). If a Helm upgrade honours it, this fails: khook's copy
// may then implement it as Helm does.
func TestHelmClientSideCreateIgnoresDryRun(t *testing.T) {
	tc := createCase{files: map[string]string{"templates/cm.yaml": createConfigMaps},
		opts: []helmkube.ClientCreateOption{createInstall, helmkube.ClientCreateOptionDryRun(true)}}
	helm := newCreateSide(t, "helm", tc)
	helm.run(helm.cfg.kube.Client.Create)
	if helm.err != nil {
		t.Fatal(helm.err)
	}
	for _, obj := range helm.stored() {
		if obj == "absent" {
			t.Errorf("helm's client-side create honoured the dry run: khook's copy may implement it (create.go)")
		}
	}
	if s := strings.Join(helm.requests(), "\n"); strings.Contains(s, "dryRun") {
		t.Errorf("helm's client-side create sent a dry run: %s", s)
	}
	khook := newCreateSide(t, "khook", tc)
	khook.cfg.kube.clientSideCreates = true
	khook.run(khook.cfg.kube.Create)
	if khook.err == nil || !strings.Contains(khook.err.Error(), "dry run refused") || len(khook.requests()) != 0 {
		t.Errorf("khook's create: %v, requests %q; want the dry run refused and nothing sent", khook.err, khook.requests())
	}
}

// createSide is one side of TestCreateAsHelms: a namespace, a helm
// configuration over clients whose transport records every write (and
// answers the case's conflicts), and what its Create did.
type createSide struct {
	t    *testing.T
	name string
	ns   string
	cfg  *configuration
	wire *createWire
	list helmkube.ResourceList
	opts []helmkube.ClientCreateOption
	res  *helmkube.Result
	err  error
}

func newCreateSide(t *testing.T, name string, tc createCase) *createSide {
	t.Helper()
	c := testcluster.Get(t)
	s := &createSide{t: t, name: name, ns: c.NewNamespace(t, "create-"+name)}
	s.wire = &createWire{conflicts: maps.Clone(tc.conflicts)}
	rc := c.RESTConfig(t)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &createRecorder{w: s.wire, next: rt} })
	clients := clientsFor(t, rc)
	cfg, err := NewClient(Env{Kube: clients, Redactor: redact.New(), Log: t.Logf}).configuration(context.Background(), s.ns)
	if err != nil {
		t.Fatal(err)
	}
	s.cfg = cfg
	for _, y := range tc.existing {
		for _, info := range s.build(y) {
			if _, err := resource.NewHelper(info.Client, info.Mapping).WithFieldManager("someone-else").
				Create(info.Namespace, true, info.Object); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(tc.files) > 0 {
		_, manifests, err := releaseutil.SortManifests(tc.files, nil, releaseutil.InstallOrder)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, m := range manifests { // as helm's install writes its manifest
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
		}
		s.list = s.build(b.String())
	}
	s.opts = tc.opts
	t.Cleanup(s.deleteClusterScoped)
	return s
}

// build is Helm's Build of y, in the side's namespace, without
// client-side validation.
func (s *createSide) build(y string) helmkube.ResourceList {
	s.t.Helper()
	list, err := s.cfg.kube.Build(strings.NewReader(strings.ReplaceAll(y, "{{NS}}", s.ns)), false)
	if err != nil {
		s.t.Fatal(err)
	}
	return list
}

func (s *createSide) run(create func(helmkube.ResourceList, ...helmkube.ClientCreateOption) (*helmkube.Result, error)) {
	s.wire.reset()
	s.res, s.err = create(s.list, s.opts...)
}

// deleteClusterScoped deletes what the side created outside its namespace.
func (s *createSide) deleteClusterScoped() {
	for _, info := range s.list {
		if info.Namespaced() {
			continue
		}
		_, err := resource.NewHelper(info.Client, info.Mapping).Delete("", info.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			s.t.Errorf("delete %s %s: %v", info.Mapping.GroupVersionKind.Kind, info.Name, err)
		}
	}
}

// normal is text with the side's namespace replaced by NS.
func (s *createSide) normal(text string) string { return strings.ReplaceAll(text, s.ns, "NS") }

func (s *createSide) requests() []string {
	var out []string
	for _, r := range s.wire.log() {
		out = append(out, s.normal(r.String()))
	}
	slices.Sort(out)
	return out
}

func (s *createSide) result() any {
	if s.res == nil {
		return nil
	}
	names := func(l helmkube.ResourceList) []string {
		out := []string{}
		for _, info := range l {
			out = append(out, s.normal(info.Mapping.GroupVersionKind.Kind+" "+info.Namespace+"/"+info.Name))
		}
		return out
	}
	return map[string][]string{"created": names(s.res.Created), "updated": names(s.res.Updated), "deleted": names(s.res.Deleted)}
}

// errors are the leaves of the error (errors.Join nests in helm's
// Create, not in khook's), each with its API reason, sorted: the order of
// the failures of one kind is the order they end in.
func (s *createSide) errors() []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		out = append(out, fmt.Sprintf("%s (reason %q, no objects visited %t)", s.normal(err.Error()),
			apierrors.ReasonForError(err), errors.Is(err, helmkube.ErrNoObjectsVisited)))
	}
	if s.err != nil {
		walk(s.err)
	}
	slices.Sort(out)
	return out
}

// readBack are the list's objects after the Create: read back from the API
// server when created.
func (s *createSide) readBack() []string {
	var out []string
	for _, info := range s.list {
		out = append(out, s.object(info.Object)+fmt.Sprintf(" (resourceVersion set: %t)", info.ResourceVersion != ""))
	}
	return out
}

// stored are the list's objects as the API server holds them, "absent"
// for those it does not.
func (s *createSide) stored() []string {
	var out []string
	for _, info := range s.list {
		obj, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
		switch {
		case apierrors.IsNotFound(err):
			out = append(out, "absent")
		case err != nil:
			s.t.Fatal(err)
		default:
			out = append(out, s.object(obj))
		}
	}
	return out
}

// object is obj as JSON without what differs between any two creates
// (uid, resourceVersion, times), namespace normalised.
func (s *createSide) object(obj runtime.Object) string {
	s.t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		s.t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetUID("")
	u.SetResourceVersion("")
	u.SetCreationTimestamp(metav1.Time{})
	fields := u.GetManagedFields()
	for i := range fields {
		fields[i].Time = nil
	}
	u.SetManagedFields(fields)
	b, err := json.Marshal(u.Object)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.normal(string(b))
}

// checkKindOrder: every request for an object of one kind ended before the
// first request for an object of a later kind of the list began (helm
// creates kind after kind, in the list's order).
func (s *createSide) checkKindOrder() {
	s.t.Helper()
	batch := map[string]int{} // object ("configmaps/a") to its kind's place in the list
	b := 0
	for i, info := range s.list {
		if i > 0 && info.Mapping.GroupVersionKind.Kind != s.list[i-1].Mapping.GroupVersionKind.Kind {
			b++
		}
		batch[info.Mapping.Resource.Resource+"/"+info.Name] = b
	}
	log := s.wire.log()
	for _, early := range log {
		for _, late := range log {
			if batch[early.object()] < batch[late.object()] && early.end > late.start {
				s.t.Errorf("%s's create: %s was sent before %s ended", s.name, s.normal(late.String()), s.normal(early.String()))
			}
		}
	}
}

// createWire records a side's writes (every request but GET), in the order
// they begin and end, and answers the conflicts it is told to.
type createWire struct {
	mu        sync.Mutex
	clock     int
	reqs      []*createRequest
	conflicts map[string]int
}

type createRequest struct {
	method, path, query, name string
	status                    int
	injected                  bool
	start, end                int
}

func (r *createRequest) String() string {
	s := fmt.Sprintf("%s %s?%s (%s): %d", r.method, r.path, r.query, r.name, r.status)
	if r.injected {
		s += " (injected conflict)"
	}
	return s
}

// object is the request's object: "configmaps/a".
func (r *createRequest) object() string {
	gr := schemaGroupResource(r.path)
	if gr.Resource == r.name { // a PATCH's path ends with the name
		parts := strings.Split(strings.Trim(r.path, "/"), "/")
		gr.Resource = parts[len(parts)-2]
	}
	return gr.Resource + "/" + r.name
}

func (w *createWire) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs = nil
}

func (w *createWire) log() []createRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []createRequest
	for _, r := range w.reqs {
		out = append(out, *r)
	}
	return out
}

type createRecorder struct {
	w    *createWire
	next http.RoundTripper
}

func (c *createRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return c.next.RoundTrip(req)
	}
	r := &createRequest{method: req.Method, path: req.URL.Path, query: req.URL.Query().Encode()}
	if req.Body != nil && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		var obj metav1.PartialObjectMetadata
		data, _ := io.ReadAll(body)
		if json.Unmarshal(data, &obj) == nil {
			r.name = obj.Name
		}
	}
	w := c.w
	w.mu.Lock()
	w.clock++
	r.start = w.clock
	w.reqs = append(w.reqs, r)
	inject := req.Method == http.MethodPost && w.conflicts[r.object()] > 0
	if inject {
		w.conflicts[r.object()]--
	}
	w.mu.Unlock()
	var resp *http.Response
	var err error
	if inject {
		resp = conflictResponse(req, r.name)
	} else {
		resp, err = c.next.RoundTrip(req)
	}
	w.mu.Lock()
	w.clock++
	r.end = w.clock
	r.injected = inject
	if resp != nil {
		r.status = resp.StatusCode
	}
	w.mu.Unlock()
	return resp, err
}

// conflictResponse is the API server's answer to a write that lost a race.
func conflictResponse(req *http.Request, name string) *http.Response {
	status := apierrors.NewConflict(schemaGroupResource(req.URL.Path), name, errors.New("the object has been modified; please apply your changes to the latest version and try again")).Status()
	status.Kind, status.APIVersion = "Status", "v1"
	body, _ := json.Marshal(status)
	return &http.Response{
		StatusCode: http.StatusConflict,
		Status:     "409 Conflict",
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    req,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

// schemaGroupResource is the group and resource of an API path:
// /api/v1/namespaces/ns/configmaps, /apis/rbac.authorization.k8s.io/v1/clusterroles.
func schemaGroupResource(path string) schema.GroupResource {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	gr := schema.GroupResource{Resource: parts[len(parts)-1]}
	if parts[0] == "apis" && len(parts) > 1 {
		gr.Group = parts[1]
	}
	return gr
}

func pretty(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
