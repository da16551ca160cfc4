// Package chartrepo holds the chart sources khook's helm tests run against,
// all real and on loopback, started by the tests: an HTTP chart repository
// (index.yaml plus packaged charts, optionally behind basic auth) and an
// in-process OCI registry (distribution's, optionally behind htpasswd basic
// auth), both over TLS. The charts they serve are packaged at test time
// from the charts in testdata/charts; no .tgz is committed.
package chartrepo

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// Archive is a packaged chart.
type Archive struct {
	Name    string
	Version string
	// Data is the .tgz.
	Data []byte
	// Metadata is the chart's Chart.yaml.
	Metadata *chart.Metadata
}

// Filename is the archive's conventional name, name-version.tgz.
func (a Archive) Filename() string { return a.Name + "-" + a.Version + ".tgz" }

// Digest is the sha256 of the archive, hex encoded.
func (a Archive) Digest() string {
	sum := sha256.Sum256(a.Data)
	return hex.EncodeToString(sum[:])
}

// ChartDir returns the absolute path of the test chart name
// (testdata/charts/<name>): demo (a ConfigMap echoing its values) or deploy
// (one Deployment).
func ChartDir(name string) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("chartrepo: cannot locate the package directory")
	}
	return filepath.Join(filepath.Dir(file), "testdata", "charts", name)
}

// Package loads the chart directory dir and packages it, with its version
// replaced by version when that is not empty.
func Package(t testing.TB, dir, version string) Archive {
	t.Helper()
	a, err := PackageE(dir, version)
	if err != nil {
		t.Fatalf("chartrepo: %v", err)
	}
	return a
}

// PackageE is Package returning an error.
func PackageE(dir, version string) (Archive, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return Archive{}, fmt.Errorf("load chart %s: %w", dir, err)
	}
	if version != "" {
		ch.Metadata.Version = version
	}
	tmp, err := os.MkdirTemp("", "khook-chartrepo-")
	if err != nil {
		return Archive{}, err
	}
	defer os.RemoveAll(tmp)
	file, err := chartutil.Save(ch, tmp)
	if err != nil {
		return Archive{}, fmt.Errorf("package chart %s: %w", dir, err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return Archive{}, err
	}
	return Archive{Name: ch.Metadata.Name, Version: ch.Metadata.Version, Data: data, Metadata: ch.Metadata}, nil
}

// Options configure a repository or registry.
type Options struct {
	// Username and Password, when set, require HTTP basic auth.
	Username, Password string
}

// Client returns an HTTP client that trusts the TLS certificates of the
// given servers (each fixture's Certificate), like the client a run
// shares (fetch.NewClient) otherwise.
func Client(certs ...*x509.Certificate) *http.Client {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.RootCAs = pool
	t.ResponseHeaderTimeout = 30 * time.Second
	return &http.Client{Transport: t}
}
