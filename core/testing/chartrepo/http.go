package chartrepo

import (
	"crypto/subtle"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

// HTTPRepo is an HTTP(S) chart repository: GET /index.yaml and
// GET /charts/<name>-<version>.tgz. The index lists charts by relative URL,
// as `helm repo index` writes it.
type HTTPRepo struct {
	srv  *httptest.Server
	opts Options

	mu       sync.Mutex
	charts   map[string]Archive // by file name
	index    *repo.IndexFile
	requests []Request
}

// Request is one request the repository served.
type Request struct {
	Path string
	// Authorization is the request's Authorization header, as sent.
	Authorization string
	Status        int
}

// NewHTTPRepo starts a repository serving archives; it stops in t.Cleanup.
func NewHTTPRepo(t testing.TB, opts Options, archives ...Archive) *HTTPRepo {
	t.Helper()
	r := &HTTPRepo{opts: opts, charts: map[string]Archive{}, index: repo.NewIndexFile()}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	for _, a := range archives {
		r.Add(t, a)
	}
	return r
}

// Add publishes an archive.
func (r *HTTPRepo) Add(t testing.TB, a Archive) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.index.MustAdd(a.Metadata, "charts/"+a.Filename(), "", "sha256:"+a.Digest()); err != nil {
		t.Fatalf("chartrepo: index %s: %v", a.Filename(), err)
	}
	r.index.SortEntries()
	r.charts[a.Filename()] = a
}

// URL is the repository URL (https://127.0.0.1:port), without credentials.
func (r *HTTPRepo) URL() string { return r.srv.URL }

// URLWithUserinfo is the repository URL with user:password@ (URL-encoded).
func (r *HTTPRepo) URLWithUserinfo(user, password string) string {
	return "https://" + userinfo(user, password) + "@" + strings.TrimPrefix(r.srv.URL, "https://")
}

// Certificate is the server's TLS certificate (see Client).
func (r *HTTPRepo) Certificate() *x509.Certificate { return r.srv.Certificate() }

// Requests returns the requests served so far.
func (r *HTTPRepo) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

func (r *HTTPRepo) serve(w http.ResponseWriter, req *http.Request) {
	status := r.handle(w, req)
	r.mu.Lock()
	r.requests = append(r.requests, Request{Path: req.URL.Path, Authorization: req.Header.Get("Authorization"), Status: status})
	r.mu.Unlock()
}

func (r *HTTPRepo) handle(w http.ResponseWriter, req *http.Request) int {
	if r.opts.Username != "" {
		u, p, ok := req.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(r.opts.Username)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(r.opts.Password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return http.StatusUnauthorized
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case req.URL.Path == "/index.yaml":
		data, err := yaml.Marshal(r.index)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "application/x-yaml")
		_, _ = w.Write(data)
		return http.StatusOK
	case strings.HasPrefix(req.URL.Path, "/charts/"):
		a, ok := r.charts[strings.TrimPrefix(req.URL.Path, "/charts/")]
		if !ok {
			http.NotFound(w, req)
			return http.StatusNotFound
		}
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(a.Data)
		return http.StatusOK
	}
	http.NotFound(w, req)
	return http.StatusNotFound
}
