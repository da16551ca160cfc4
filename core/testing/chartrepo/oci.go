package chartrepo

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/bcrypt"
	"helm.sh/helm/v4/pkg/registry"

	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"           // the htpasswd access controller
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory" // the inmemory storage driver
)

// Registry is an in-process OCI registry (distribution's), over TLS on
// loopback, storing in memory; with Options.Username it requires basic
// auth checked against an htpasswd file generated in Go.
type Registry struct {
	srv  *httptest.Server
	opts Options
}

// NewRegistry starts a registry; it stops in t.Cleanup.
func NewRegistry(t testing.TB, opts Options) *Registry {
	t.Helper()
	// distribution logs through logrus' standard logger, the 404s of every
	// push included; the tests' own output says what matters.
	logrus.SetOutput(io.Discard)

	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.HTTP.Secret = "khook-test-registry"
	cfg.Log.AccessLog.Disabled = true
	if opts.Username != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatalf("chartrepo: htpasswd: %v", err)
		}
		path := filepath.Join(t.TempDir(), "htpasswd")
		if err := os.WriteFile(path, []byte(opts.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatalf("chartrepo: htpasswd: %v", err)
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "khook-test", "path": path}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	app := handlers.NewApp(ctx, cfg)
	r := &Registry{srv: httptest.NewTLSServer(app), opts: opts}
	t.Cleanup(func() {
		r.srv.Close()
		cancel()
	})
	return r
}

// Host is the registry's host:port.
func (r *Registry) Host() string { return strings.TrimPrefix(r.srv.URL, "https://") }

// Certificate is the server's TLS certificate (see Client).
func (r *Registry) Certificate() *x509.Certificate { return r.srv.Certificate() }

// Ref is the oci:// reference of repository path (charts/demo), without
// tag and credentials.
func (r *Registry) Ref(path string) string { return "oci://" + r.Host() + "/" + path }

// RefWithUserinfo is Ref with user:password@ (URL-encoded) before the host.
func (r *Registry) RefWithUserinfo(path, user, password string) string {
	return "oci://" + userinfo(user, password) + "@" + r.Host() + "/" + path
}

// Push pushes a under dir (charts → <host>/charts/<name>:<version>) with
// helm's registry client and returns the manifest digest.
func (r *Registry) Push(t testing.TB, dir string, a Archive) string {
	t.Helper()
	opts := []registry.ClientOption{
		registry.ClientOptHTTPClient(Client(r.Certificate())),
		registry.ClientOptWriter(io.Discard),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "registry.json")),
	}
	if r.opts.Username != "" {
		opts = append(opts, registry.ClientOptBasicAuth(r.opts.Username, r.opts.Password))
	}
	c, err := registry.NewClient(opts...)
	if err != nil {
		t.Fatalf("chartrepo: registry client: %v", err)
	}
	ref := fmt.Sprintf("%s/%s/%s:%s", r.Host(), dir, a.Name, strings.ReplaceAll(a.Version, "+", "_"))
	res, err := c.Push(a.Data, ref)
	if err != nil {
		t.Fatalf("chartrepo: push %s: %v", ref, err)
	}
	return res.Manifest.Digest
}

func userinfo(user, password string) string {
	return url.UserPassword(user, password).String()
}
