package fetch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		switch {
		case r.URL.Path == "/private" && (!ok || u != "ci" || p != "p@ss w0rd"):
			http.Error(w, "nope", http.StatusUnauthorized)
		case r.URL.Path == "/missing":
			http.NotFound(w, r)
		default:
			_, _ = w.Write([]byte("kind: ConfigMap\n"))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	host := strings.TrimPrefix(srv.URL, "http://")

	if got, err := Get(ctx, nil, srv.URL+"/public"); err != nil || string(got) != "kind: ConfigMap\n" {
		t.Fatalf("public: %q %v", got, err)
	}
	if _, err := Get(ctx, nil, "http://ci:p%40ss%20w0rd@"+host+"/private"); err != nil {
		t.Fatalf("userinfo should become basic auth: %v", err)
	}
	_, err := Get(ctx, nil, "http://ci:wrong-secret@"+host+"/private")
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("want a 401 without the password, got %v", err)
	}
	if _, err := Get(ctx, nil, srv.URL+"/missing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("want 404, got %v", err)
	}
	_, err = Get(ctx, nil, "http://u:hunter2@127.0.0.1:1/x")
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("want a refused connection without the password, got %v", err)
	}
}
