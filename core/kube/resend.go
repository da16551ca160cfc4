package kube

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// The resend rule (docs/spec.md decisions 63, 206 and 240): a request
// whose answer was lost (its connection broke after it may have reached
// the server) is sent again only when a second copy cannot do what the
// first did not, and a refusal of the second copy that the first one's
// landing explains is resolved by reading the object:
//
//   - reads, replacements and apply or merge patches are idempotent: sent
//     again;
//   - a create of a named object is sent again; AlreadyExists is read: the
//     object holding everything the create sent is the create's own;
//   - a write conditioned on a resourceVersion (an update or patch that
//     pins metadata.resourceVersion, a JSON patch that replaces or tests
//     it, a delete with preconditions) is a compare-and-swap: sent again;
//     its Conflict (or, for a delete, NotFound) is read: an object that
//     already holds what the write sent (an update), that the patch would
//     not change (a patch), or that is gone or being deleted (a delete),
//     is the write's own work;
//   - a delete without preconditions is never sent twice (a second could
//     delete a newcomer of the same name): after a break the object is
//     read, and gone or being deleted means the delete was done;
//   - anything else (a create with generateName, a JSON patch that does
//     not pin the version) is sent again only when it never left.
//
// The rule reads bodies in every encoding client-go sends: JSON, the
// patch types, YAML apply configurations and protobuf (the typed
// clientsets' default for built-in kinds: the run lock's Lease, the state
// record, namespaces, Jobs, helm's release Secrets), which the scheme of
// client-go decodes. A body it cannot read makes the write one it cannot
// resend. No caller needs to know that a request was sent twice.

// retryPolicy is what may be done with one request whose answer was lost.
type retryPolicy int

const (
	// retryUnsent: sent again only when it provably never left (the
	// connection could not be made).
	retryUnsent retryPolicy = iota
	// retryAny: sending it twice has the effect of sending it once.
	retryAny
	// retryCreate: a create of a named object; AlreadyExists after a
	// break is read (sameAsSent).
	retryCreate
	// retryConditional: an update, patch or delete conditioned on the
	// object's resourceVersion or uid; its Conflict (a delete's NotFound)
	// after a break is read (write.landed).
	retryConditional
	// retryRead: a delete without preconditions: never sent twice; after
	// a break the object is read (write.deleted).
	retryRead
)

// maxCompared bounds the bodies the rule reads and compares (the API
// server's own limit on a request is 3 MiB).
const maxCompared = 4 << 20

// write is what a request sends, as the resend rule reads it.
type write struct {
	policy retryPolicy
	method string
	// object is the URL of the object the request acts on (a create's:
	// its collection's and the name), "" when it names none
	object string
	// raw and contentType are the request's body; sent decodes it
	raw         []byte
	contentType string
	ops         []any // a JSON patch's operations
	patchType   types.PatchType
	// sub is the subresource written ("status"), "" for the object
	sub string
	// rv and uid are what a conditional write is conditioned on
	rv, uid string
	// resource (plural) and name are what is written, for a delete's
	// answer
	resource, name string
}

// sent is the request's body as JSON (the object of a create or update,
// a patch); nil when it cannot be read. It is decoded only when a lost
// answer is to be resolved: classifying a request reads only what peek
// reads.
func (w write) sent() map[string]any {
	data := w.raw
	if w.patchType == types.ApplyPatchType {
		var err error
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return nil
		}
		return decodeObject("application/json", data)
	}
	if w.patchType != "" {
		return decodeObject("application/json", data)
	}
	return decodeObject(w.contentType, data)
}

// classify reads req as the resend rule does.
func classify(req *http.Request) write {
	w := write{method: req.Method}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		w.policy = retryAny
		return w
	}
	p, ok := parseResourcePath(req.URL.Path)
	if !ok {
		return w
	}
	w.resource, w.name, w.sub = p.resource, p.name, p.sub
	w.contentType = mediaType(req.Header.Get("Content-Type"))
	data, readable := bodyOf(req)
	w.raw = data
	switch req.Method {
	case http.MethodPost:
		if p.name == "" && isReview(p.resource) {
			w.policy = retryAny // a question to the API server: it writes nothing
			return w
		}
		if p.name != "" || !readable {
			return w // a subresource (an eviction), or an unreadable body
		}
		m, ok := peek(w.contentType, data)
		if !ok || m.Metadata.Name == "" || m.Metadata.GenerateName != "" {
			return w
		}
		w.policy, w.name = retryCreate, m.Metadata.Name
		w.object = p.objectURL(req, w.name)
	case http.MethodPut:
		w.policy = retryAny // a replacement
		if p.name == "" || !readable {
			return w
		}
		w.object = p.objectURL(req, p.name)
		if m, ok := peek(w.contentType, data); ok && m.Metadata.ResourceVersion != "" {
			w.policy, w.rv = retryConditional, m.Metadata.ResourceVersion
		}
	case http.MethodPatch:
		if p.name == "" {
			return w
		}
		w.object, w.patchType = p.objectURL(req, p.name), types.PatchType(w.contentType)
		switch w.patchType {
		case types.ApplyCBORPatchType:
			w.policy = retryAny // cannot read it: an apply is idempotent all the same
			return w
		case types.ApplyPatchType, types.StrategicMergePatchType, types.MergePatchType:
			w.policy = retryAny // they set fields to values
			if !readable {
				return w
			}
			if m, ok := peek("application/json", data); ok && m.Metadata.ResourceVersion != "" {
				w.policy, w.rv = retryConditional, m.Metadata.ResourceVersion
			}
		case types.JSONPatchType:
			// a JSON patch may add to a list twice: sent again only when
			// it pins the object's version
			if readable && json.Unmarshal(data, &w.ops) == nil {
				if w.rv = pinnedVersion(w.ops); w.rv != "" {
					w.policy = retryConditional
				}
			}
		}
	case http.MethodDelete:
		if p.name == "" || p.sub != "" {
			return w // a collection: delete by selector
		}
		w.object = p.objectURL(req, p.name)
		w.policy = retryRead
		if m, ok := peek(w.contentType, data); readable && len(data) > 0 && ok {
			if pre := m.Preconditions; pre != nil {
				w.uid, w.rv = pre.UID, pre.ResourceVersion
			}
			if w.uid != "" || w.rv != "" {
				w.policy = retryConditional
			}
			if len(m.DryRun) > 0 {
				w.policy = retryAny // changes nothing
			}
		}
	}
	return w
}

// bodyMeta is what classify reads of a body: an object's name and
// version, a DeleteOptions' preconditions.
type bodyMeta struct {
	Metadata struct {
		Name            string `json:"name"`
		GenerateName    string `json:"generateName"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Preconditions *struct {
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"preconditions"`
	DryRun []string `json:"dryRun"`
}

// peek reads a body's bodyMeta without decoding the rest: JSON (or YAML
// written as JSON) into the struct, protobuf through client-go's scheme.
func peek(contentType string, data []byte) (bodyMeta, bool) {
	var m bodyMeta
	switch contentType {
	case "application/json", "", string(types.ApplyPatchType):
		data = bytes.TrimSpace(data)
		if len(data) > 0 && data[0] != '{' {
			var err error
			if data, err = yaml.YAMLToJSON(data); err != nil { // a YAML apply configuration
				return m, false
			}
		}
		return m, json.Unmarshal(data, &m) == nil
	case "application/vnd.kubernetes.protobuf":
		if !bytes.HasPrefix(data, protobufMagic) {
			return m, false
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
		if err != nil {
			return m, false
		}
		if opts, ok := obj.(*metav1.DeleteOptions); ok {
			if p := opts.Preconditions; p != nil {
				m.Preconditions = &struct {
					UID             string `json:"uid"`
					ResourceVersion string `json:"resourceVersion"`
				}{}
				if p.UID != nil {
					m.Preconditions.UID = string(*p.UID)
				}
				if p.ResourceVersion != nil {
					m.Preconditions.ResourceVersion = *p.ResourceVersion
				}
			}
			m.DryRun = opts.DryRun
			return m, true
		}
		acc, err := meta.Accessor(obj)
		if err != nil {
			return m, false
		}
		m.Metadata.Name, m.Metadata.GenerateName, m.Metadata.ResourceVersion = acc.GetName(), acc.GetGenerateName(), acc.GetResourceVersion()
		return m, true
	}
	return m, false
}

// resourcePath is a resource URL path read: /api/v1/... or
// /apis/GROUP/VERSION/..., then [namespaces/NS/]RESOURCE[/NAME[/SUB]].
type resourcePath struct {
	prefix    string // up to the version: /api/v1, /apis/apps/v1
	namespace string
	resource  string
	name      string
	sub       string
}

func parseResourcePath(path string) (resourcePath, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var p resourcePath
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		p.prefix, parts = "/"+strings.Join(parts[:2], "/"), parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		p.prefix, parts = "/"+strings.Join(parts[:3], "/"), parts[3:]
	default:
		return p, false
	}
	// namespaces/NS/RESOURCE...: a namespaced resource, unless RESOURCE is
	// a subresource of the namespace itself
	if len(parts) >= 3 && parts[0] == "namespaces" && !(len(parts) == 3 && (parts[2] == "status" || parts[2] == "finalize")) {
		p.namespace, parts = parts[1], parts[2:]
	}
	p.resource = parts[0]
	if len(parts) >= 2 {
		p.name = parts[1]
	}
	if len(parts) >= 3 {
		p.sub = strings.Join(parts[2:], "/")
	}
	return p, p.resource != ""
}

// objectURL is the URL of the object name of p's resource, on req's
// server.
func (p resourcePath) objectURL(req *http.Request, name string) string {
	path := p.prefix
	if p.namespace != "" {
		path += "/namespaces/" + p.namespace
	}
	path += "/" + p.resource + "/" + name
	u := *req.URL
	u.Path, u.RawPath, u.RawQuery, u.Fragment = path, "", "", ""
	return u.String()
}

func isReview(resource string) bool {
	switch resource {
	case "selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews", "subjectaccessreviews", "localsubjectaccessreviews", "tokenreviews":
		return true
	}
	return false
}

func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return contentType
	}
	return mt
}

// bodyOf reads a copy of req's body; readable is false when it cannot be
// read again (no GetBody) or is too large to compare.
func bodyOf(req *http.Request) (data []byte, readable bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	defer body.Close()
	data, err = io.ReadAll(io.LimitReader(body, maxCompared))
	if err != nil || len(data) == maxCompared {
		return nil, false
	}
	return data, true
}

// decodeObject reads an object's body as JSON: JSON as it is, protobuf
// through client-go's scheme (the kinds the typed clientsets send). Nil
// when it cannot.
func decodeObject(contentType string, data []byte) map[string]any {
	if len(data) == 0 {
		return nil
	}
	switch contentType {
	case "application/json", "":
	case "application/vnd.kubernetes.protobuf", "application/yaml":
		if contentType != "application/yaml" && !bytes.HasPrefix(data, protobufMagic) {
			return nil
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
		if err != nil {
			return nil
		}
		if data, err = json.Marshal(obj); err != nil {
			return nil
		}
	default:
		return nil
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m
}

// protobufMagic begins every protobuf-encoded Kubernetes object.
var protobufMagic = []byte("k8s\x00")

func resourceVersionOf(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	return rv
}

// pinnedVersion is the resourceVersion a JSON patch sets or tests (the API
// server refuses the patch when the object's is another), "" when none.
func pinnedVersion(ops []any) string {
	for _, o := range ops {
		op, _ := o.(map[string]any)
		if op["path"] != "/metadata/resourceVersion" {
			continue
		}
		switch op["op"] {
		case "replace", "add", "test":
			if v, ok := op["value"].(string); ok && v != "" {
				return v
			}
		}
	}
	return ""
}

// recognise resolves the refusal of a resent write whose first attempt
// may have landed: it reads the object, and when what it finds is what
// the write itself would have left, returns the answer the first attempt
// would have had. It returns nil when the refusal stands (the object is
// another writer's, or cannot be read).
func (t *retryTransport) recognise(req *http.Request, w write, refused *http.Response) *http.Response {
	switch {
	case w.policy == retryCreate && refused.StatusCode == http.StatusConflict:
	case w.policy == retryConditional && refused.StatusCode == http.StatusConflict:
	case w.policy == retryConditional && w.method == http.MethodDelete && refused.StatusCode == http.StatusNotFound:
		return t.deletedAnswer(req, w, nil)
	default:
		return nil
	}
	existing, got, ok := t.readObject(req, w)
	if !ok {
		return nil
	}
	var mine bool
	switch {
	case w.method == http.MethodDelete:
		return t.deletedAnswer(req, w, existing)
	case w.policy == retryCreate:
		mine = sameAsSent(w.sent(), existing)
	case w.method == http.MethodPut:
		mine = resourceVersionOf(existing) != w.rv && updated(w.sent(), existing, w.sub)
	case w.method == http.MethodPatch:
		mine = resourceVersionOf(existing) != w.rv && patched(w, existing)
	}
	if !mine {
		return nil
	}
	klog.Background().V(6).Info("A resent write found its first attempt's work", "verb", req.Method, "url", req.URL.String())
	if got == nil {
		return nil
	}
	code := http.StatusOK
	if w.policy == retryCreate {
		code = http.StatusCreated
	}
	return answer(req, got, code)
}

// resolveDelete resolves a delete without preconditions whose connection
// broke: it is never sent twice, but the object read says whether it was
// done: gone, or being deleted. Otherwise (or when it cannot be read) the
// broken connection's error stands.
func (t *retryTransport) resolveDelete(req *http.Request, w write, broken error) (*http.Response, error) {
	existing, _, ok := t.readObject(req, w)
	if !ok && existing == nil {
		return nil, broken
	}
	if resp := t.deletedAnswer(req, w, existing); resp != nil {
		return resp, nil
	}
	return nil, broken
}

// deletedAnswer is the answer of a delete that was done, given the object
// as it exists now (nil: gone): a Success status when it is gone or is
// another object now (another uid), the object when it is being deleted;
// nil when it exists and is not being deleted.
func (t *retryTransport) deletedAnswer(req *http.Request, w write, existing map[string]any) *http.Response {
	md, _ := existing["metadata"].(map[string]any)
	uid, _ := md["uid"].(string)
	switch {
	case existing == nil, w.uid != "" && uid != w.uid:
		status, _ := json.Marshal(map[string]any{
			"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Success",
			"details": map[string]any{"name": w.name, "kind": w.resource, "uid": w.uid},
		})
		klog.Background().V(6).Info("A delete whose answer was lost found its object gone", "url", req.URL.String())
		return answer(req, status, http.StatusOK)
	case md["deletionTimestamp"] != nil:
		data, _ := json.Marshal(existing)
		klog.Background().V(6).Info("A delete whose answer was lost found its object being deleted", "url", req.URL.String())
		return answer(req, data, http.StatusOK)
	}
	return nil
}

// readObject reads the object w acts on as JSON: existing is nil when it
// is gone (ok) or could not be read (not ok); raw is the answer's body.
func (t *retryTransport) readObject(req *http.Request, w write) (existing map[string]any, raw []byte, ok bool) {
	if w.object == "" {
		return nil, nil, false
	}
	get, err := http.NewRequestWithContext(req.Context(), http.MethodGet, w.object, nil)
	if err != nil {
		return nil, nil, false
	}
	get.Header = req.Header.Clone()
	for _, h := range []string{"Content-Type", "Content-Length", "Content-Encoding"} {
		get.Header.Del(h)
	}
	get.Header.Set("Accept", "application/json")
	resp, err := t.RoundTrip(get) // a read: sent again while the connection breaks
	if err != nil {
		return nil, nil, false
	}
	raw, err = io.ReadAll(io.LimitReader(resp.Body, maxCompared))
	_ = resp.Body.Close()
	switch {
	case err != nil:
		return nil, nil, false
	case resp.StatusCode == http.StatusNotFound:
		return nil, nil, true
	case resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &existing) != nil:
		return nil, nil, false
	}
	return existing, raw, true
}

// answer is a JSON answer to req.
func answer(req *http.Request, body []byte, code int) *http.Response {
	return &http.Response{
		Status: http.StatusText(code), StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}
}

// sameAsSent reports whether the object existing (as the API server
// returns it) holds everything a create sent: every field sent has the
// value sent, apart from what the server itself sets or drops on a create
// (status, empty values it omits; a Secret's stringData, which it moves
// to data). Defaults and fields the server adds do not matter; a value
// the server rewrote (a quantity written "0.5" stored as "500m") makes the
// create another's, which errs on the safe side: the create then fails
// with AlreadyExists, as it would without the resend.
func sameAsSent(sent, existing map[string]any) bool {
	if sent == nil || existing == nil {
		return false
	}
	s := normalSent(sent)
	if s == nil {
		return false
	}
	delete(s, "status")
	return contains(existing, s)
}

// updated reports whether existing holds everything an update (a PUT)
// sent, apart from what the server sets on every write (the
// resourceVersion, managedFields, generation): a PUT of the object
// ignores its status, a PUT of its status everything else.
func updated(sent, existing map[string]any, sub string) bool {
	if sent == nil || existing == nil {
		return false
	}
	s := normalSent(sent)
	if s == nil {
		return false
	}
	if sub == "status" {
		return contains(existing["status"], s["status"])
	}
	delete(s, "status")
	if md, ok := s["metadata"].(map[string]any); ok {
		for _, k := range []string{"resourceVersion", "managedFields", "generation"} {
			delete(md, k)
		}
	}
	return contains(existing, s)
}

// normalSent is a deep copy of a sent object, a Secret's stringData moved
// to data as the server stores it; nil when it cannot be.
func normalSent(sent map[string]any) map[string]any {
	var s map[string]any
	data, err := json.Marshal(sent)
	if err != nil || json.Unmarshal(data, &s) != nil {
		return nil
	}
	if sd, ok := s["stringData"].(map[string]any); ok && s["kind"] == "Secret" {
		data, _ := s["data"].(map[string]any)
		if data == nil {
			data = map[string]any{}
		}
		for k, v := range sd {
			str, ok := v.(string)
			if !ok {
				return nil
			}
			data[k] = base64.StdEncoding.EncodeToString([]byte(str))
		}
		s["data"] = data
		delete(s, "stringData")
	}
	return s
}

// patched reports whether the patch w sent is already in effect on
// existing: applying it again (without its resourceVersion) changes
// nothing, as the API server applies it. A server-side apply is in
// effect when the object holds every field it sets.
func patched(w write, existing map[string]any) bool {
	cur, err := json.Marshal(existing)
	if err != nil {
		return false
	}
	var after []byte
	switch w.patchType {
	case types.ApplyPatchType:
		s := normalSent(w.sent())
		if s == nil {
			return false
		}
		if md, ok := s["metadata"].(map[string]any); ok {
			delete(md, "resourceVersion")
			delete(md, "managedFields")
		}
		return contains(existing, s)
	case types.MergePatchType, types.StrategicMergePatchType:
		p := normalSent(w.sent())
		if md, ok := p["metadata"].(map[string]any); ok {
			delete(md, "resourceVersion")
		}
		patch, err := json.Marshal(p)
		if err != nil {
			return false
		}
		if w.patchType == types.MergePatchType {
			after, err = jsonpatch.MergePatch(cur, patch)
		} else {
			after, err = strategicPatch(existing, cur, patch)
		}
		if err != nil {
			return false
		}
	case types.JSONPatchType:
		var ops []any
		for _, o := range w.ops {
			if op, _ := o.(map[string]any); op["path"] != "/metadata/resourceVersion" {
				ops = append(ops, o)
			}
		}
		data, err := json.Marshal(ops)
		if err != nil {
			return false
		}
		p, err := jsonpatch.DecodePatch(data)
		if err != nil {
			return false
		}
		if after, err = p.Apply(cur); err != nil {
			return false
		}
	default:
		return false
	}
	var a map[string]any
	if json.Unmarshal(after, &a) != nil {
		return false
	}
	// equal but for empty values, which the server drops when it stores
	// (a patch deleting an object's last annotation leaves annotations {}
	// when applied again)
	return contains(a, existing) && contains(existing, a)
}

// strategicPatch applies a strategic merge patch to cur as the API server
// would, with the schema of the object's kind (built-in kinds only: the
// API server refuses strategic patches of custom resources).
func strategicPatch(existing map[string]any, cur, patch []byte) ([]byte, error) {
	apiVersion, _ := existing["apiVersion"].(string)
	kind, _ := existing["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	obj, err := scheme.Scheme.New(gv.WithKind(kind))
	if err != nil {
		return nil, err
	}
	return strategicpatch.StrategicMergePatch(cur, patch, obj)
}

// contains reports whether got holds want: maps key by key (keys of got
// that want lacks do not matter, and an empty or null value in want
// matches a missing key), lists element by element, scalars by value.
func contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got == nil && emptyValue(w)
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				if emptyValue(v) {
					continue
				}
				return false
			}
			if !contains(gv, v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return got == nil && len(w) == 0
		}
		if len(g) != len(w) {
			return false
		}
		for i := range w {
			if !contains(g[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	default:
		return got == want
	}
}

// emptyValue: what the API server may omit when it stores it (null, "",
// false, 0, [], and maps of nothing else).
func emptyValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case float64:
		return v == 0
	case map[string]any:
		for _, e := range v {
			if !emptyValue(e) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	}
	return false
}
