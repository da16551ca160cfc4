package helm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"
)

// createServer is an API server for client-side creates: it answers a
// POST with the object it was sent, given a resourceVersion, and holds
// every ConfigMap create until `together` of them are in flight at once
// (or a generous guard passes, which the test then reports), so that a
// test sees which creates are sent in parallel without timing anything.
type createServer struct {
	*httptest.Server
	together int
	guard    time.Duration

	mu       sync.Mutex
	inFlight int
	released chan struct{}
	timedOut bool
	// log is the order of events: "POST ConfigMap a", "done ConfigMap a".
	log      []string
	managers []string
	// queries are the POSTs' query strings.
	queries []string
	// fail names objects whose create is refused (422).
	fail map[string]bool
}

func newCreateServer(t *testing.T, together int) *createServer {
	s := &createServer{together: together, guard: 10 * time.Second, released: make(chan struct{}), fail: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *createServer) record(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, line)
}

func (s *createServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	u := unstructured.Unstructured{Object: obj}
	what := u.GetKind() + " " + u.GetName()
	if r.Method != http.MethodPost {
		s.record(r.Method + " " + what)
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.log = append(s.log, "POST "+what)
	s.managers = append(s.managers, r.URL.Query().Get("fieldManager"))
	s.queries = append(s.queries, r.URL.RawQuery)
	s.mu.Unlock()
	if u.GetKind() == "ConfigMap" {
		s.hold()
	}
	defer s.record("done " + what)
	if s.fail[u.GetName()] {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,"message":"%s is invalid"}`, u.GetName())
		return
	}
	u.SetResourceVersion("7")
	u.SetUID(types.UID("uid-" + u.GetName()))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(u.Object)
}

// hold returns when `together` ConfigMap creates are in flight, or the
// guard passed.
func (s *createServer) hold() {
	s.mu.Lock()
	s.inFlight++
	if s.inFlight == s.together {
		close(s.released)
	}
	s.mu.Unlock()
	select {
	case <-s.released:
	case <-time.After(s.guard):
		s.mu.Lock()
		s.timedOut = true
		s.mu.Unlock()
	}
}

// info is a namespaced v1 object of kind for s, as Helm's Build makes it.
func (s *createServer) info(t *testing.T, kind, name string) *resource.Info {
	t.Helper()
	gv := schema.GroupVersion{Version: "v1"}
	cc := resource.UnstructuredPlusDefaultContentConfig()
	cc.GroupVersion = &gv
	client, err := rest.RESTClientFor(&rest.Config{Host: s.URL, APIPath: "/api", ContentConfig: cc})
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind(kind)
	obj.SetName(name)
	obj.SetNamespace("ns")
	return &resource.Info{
		Client:    client,
		Mapping:   &meta.RESTMapping{Resource: gv.WithResource(strings.ToLower(kind) + "s"), GroupVersionKind: gv.WithKind(kind), Scope: meta.RESTScopeNamespace},
		Namespace: "ns",
		Name:      name,
		Object:    obj,
	}
}

// installOption is the option Helm's install passes to Create when it
// applies client-side.
var installOption = helmkube.ClientCreateOptionServerSideApply(false, false)

// TestCreatesOfParallelReleasesAreConcurrent: two installs running at once
// send their creates at once. Helm 4's own Create holds one process-wide
// lock around every create, so the second would wait for the first: here
// the server holds both until they are in flight together.
func TestCreatesOfParallelReleasesAreConcurrent(t *testing.T) {
	s := newCreateServer(t, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"left", "right"} {
		k := &kubeClient{clientSideCreates: true}
		list := helmkube.ResourceList{s.info(t, "ConfigMap", name)}
		wg.Go(func() { _, errs[i] = k.Create(list, installOption) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if s.timedOut {
		t.Errorf("the two releases' creates were not in flight together: %q", s.log)
	}
}

// TestCreateKindAfterKind: within one Create, the resources of one kind go
// at once, and the next kind only after all of them, as Helm's client
// orders them; every object is read back, and every write carries Helm's
// field manager.
func TestCreateKindAfterKind(t *testing.T) {
	s := newCreateServer(t, 2)
	list := helmkube.ResourceList{s.info(t, "ConfigMap", "a"), s.info(t, "ConfigMap", "b"), s.info(t, "Secret", "c")}
	res, err := (&kubeClient{clientSideCreates: true}).Create(list, installOption)
	if err != nil {
		t.Fatal(err)
	}
	if s.timedOut {
		t.Fatalf("the ConfigMaps were not created together: %q", s.log)
	}
	if len(res.Created) != 3 {
		t.Errorf("created %d, want 3", len(res.Created))
	}
	secret := indexOf(s.log, "POST Secret c")
	for _, cm := range []string{"done ConfigMap a", "done ConfigMap b"} {
		if i := indexOf(s.log, cm); i < 0 || i > secret {
			t.Errorf("the Secret was sent before %q ended: %q", cm, s.log)
		}
	}
	for _, info := range list {
		if info.ResourceVersion != "7" {
			t.Errorf("%s: not read back (resourceVersion %q)", info.Name, info.ResourceVersion)
		}
	}
	want := filepath.Base(os.Args[0])
	for _, m := range s.managers {
		if m != want {
			t.Errorf("field manager %q, want Helm's %q", m, want)
		}
	}
}

// TestCreateReportsEveryFailure: a refused create fails the Create, the
// others are still made, and each failure is named.
func TestCreateReportsEveryFailure(t *testing.T) {
	s := newCreateServer(t, 2)
	s.fail["a"], s.fail["c"] = true, true
	list := helmkube.ResourceList{s.info(t, "ConfigMap", "a"), s.info(t, "ConfigMap", "b"), s.info(t, "Secret", "c")}
	_, err := (&kubeClient{clientSideCreates: true}).Create(list, installOption)
	if err == nil {
		t.Fatal("no error")
	}
	for _, name := range []string{"a is invalid", "c is invalid"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %q", err, name)
		}
	}
	if indexOf(s.log, "done ConfigMap b") < 0 {
		t.Errorf("b was not created: %q", s.log)
	}
	if _, err := (&kubeClient{clientSideCreates: true}).Create(nil, installOption); err != helmkube.ErrNoObjectsVisited {
		t.Errorf("empty list: %v, want Helm's ErrNoObjectsVisited", err)
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// TestReadCreateOptions: Create's options are resolved as Helm's Create
// resolves them, Helm's defaults first.
func TestReadCreateOptions(t *testing.T) {
	ssa := helmkube.ClientCreateOptionServerSideApply
	fv := helmkube.ClientCreateOptionFieldValidationDirective
	dry := helmkube.ClientCreateOptionDryRun
	for _, tc := range []struct {
		name string
		opts []helmkube.ClientCreateOption
		want createOptions
		err  string
	}{
		{name: "none: Helm's defaults", want: createOptions{serverSideApply: true, fieldValidation: "Strict"}},
		{name: "install, client-side", opts: []helmkube.ClientCreateOption{ssa(false, false)}, want: createOptions{fieldValidation: "Strict"}},
		{name: "server-side, forced", opts: []helmkube.ClientCreateOption{ssa(true, true)}, want: createOptions{serverSideApply: true, forceConflicts: true, fieldValidation: "Strict"}},
		{name: "the last wins", opts: []helmkube.ClientCreateOption{ssa(false, false), ssa(true, false)}, want: createOptions{serverSideApply: true, fieldValidation: "Strict"}},
		{name: "dry run", opts: []helmkube.ClientCreateOption{ssa(false, false), dry(true)}, want: createOptions{dryRun: true, fieldValidation: "Strict"}},
		{name: "field validation", opts: []helmkube.ClientCreateOption{fv(helmkube.FieldValidationDirectiveIgnore), ssa(false, false)}, want: createOptions{fieldValidation: "Ignore"}},
		{name: "forced without server-side", opts: []helmkube.ClientCreateOption{ssa(false, true), dry(true)},
			err: "invalid client create option(s): forceConflicts enabled when serverSideApply disabled"},
		{name: "nil", opts: []helmkube.ClientCreateOption{nil}, err: "client-side create: nil create option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readCreateOptions(tc.opts)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCreateOptionsKnowHelms: khook's copy knows every field of Helm's
// create options; a Helm upgrade that adds one fails here (and every
// client-side Create refuses it) until the copy implements or refuses it.
func TestCreateOptionsKnowHelms(t *testing.T) {
	typ := reflect.TypeFor[helmkube.ClientCreateOption]().In(0).Elem()
	var fields []string
	for f := range typ.Fields() {
		fields = append(fields, f.Name+" "+f.Type.String())
	}
	want := []string{"serverSideApply bool", "forceConflicts bool", "dryRun bool", "fieldValidationDirective kube.FieldValidationDirective"}
	if !slices.Equal(fields, want) {
		t.Errorf("Helm's create options are %q, khook's copy knows %q", fields, want)
	}
}

// TestCreateOptions: what a client-side Create does with each option, as
// seen by the API server.
func TestCreateOptions(t *testing.T) {
	ssa := helmkube.ClientCreateOptionServerSideApply
	for _, tc := range []struct {
		name string
		opts []helmkube.ClientCreateOption
		log  []string // the requests the server saw
		err  string   // the error, "" for none
	}{
		{name: "client-side", opts: []helmkube.ClientCreateOption{installOption},
			log: []string{"POST ConfigMap a", "done ConfigMap a"}},
		{name: "field validation: not sent, as Helm's client-side create",
			opts: []helmkube.ClientCreateOption{installOption, helmkube.ClientCreateOptionFieldValidationDirective(helmkube.FieldValidationDirectiveIgnore)},
			log:  []string{"POST ConfigMap a", "done ConfigMap a"}},
		{name: "dry run: refused", opts: []helmkube.ClientCreateOption{installOption, helmkube.ClientCreateOptionDryRun(true)},
			err: "client-side create: dry run refused: Helm's client-side create ignores it and creates the objects, and khook's copy does not implement it"},
		{name: "no dry run", opts: []helmkube.ClientCreateOption{installOption, helmkube.ClientCreateOptionDryRun(false)},
			log: []string{"POST ConfigMap a", "done ConfigMap a"}},
		{name: "forced without server-side: Helm's error", opts: []helmkube.ClientCreateOption{ssa(false, true)},
			err: "invalid client create option(s): forceConflicts enabled when serverSideApply disabled"},
		{name: "server-side: Helm's own Create", opts: []helmkube.ClientCreateOption{ssa(true, false)},
			log: []string{"PATCH ConfigMap a"}, err: "server-side apply failed for object ns/a"},
		{name: "no options: Helm's default, server-side", log: []string{"PATCH ConfigMap a"}, err: "server-side apply failed for object ns/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newCreateServer(t, 1)
			k := &kubeClient{Client: helmkube.New(nil), clientSideCreates: true}
			_, err := k.Create(helmkube.ResourceList{s.info(t, "ConfigMap", "a")}, tc.opts...)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one holding %q", err, tc.err)
			}
			if !slices.Equal(s.log, tc.log) {
				t.Errorf("requests %q, want %q", s.log, tc.log)
			}
			for _, q := range s.queries { // Helm's client-side create sends its field manager only
				if q != "fieldManager="+filepath.Base(os.Args[0]) {
					t.Errorf("POST query %q, want Helm's field manager only", q)
				}
			}
		})
	}
}
