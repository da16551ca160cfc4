package testcluster

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/keyutil"
)

func TestPKIChainsAndIdentities(t *testing.T) {
	p, err := newPKI(net.ParseIP(advertiseIP))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	fpRoots := x509.NewCertPool()
	fpRoots.AddCert(p.FrontProxyCA.Cert)

	if !p.CA.Cert.IsCA || !p.FrontProxyCA.Cert.IsCA {
		t.Error("CAs must be CA certificates")
	}

	// Serving certificate: every name clients and in-cluster pods use.
	for _, name := range []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "127.0.0.1", serviceIP, advertiseIP} {
		if _, err := p.APIServer.Cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("apiserver certificate for %q: %v", name, err)
		}
	}

	clients := []struct {
		name   string
		kp     *keyPair
		pool   *x509.CertPool
		cn     string
		groups []string
	}{
		{"admin", p.Admin, roots, adminUser, []string{"system:masters"}},
		{"controller-manager", p.ControllerMgr, roots, "system:kube-controller-manager", nil},
		{"scheduler", p.Scheduler, roots, "system:kube-scheduler", nil},
		{"kwok", p.Kwok, roots, kwokUser, []string{"system:masters"}},
		{"limited", p.Limited, roots, "khook-limited", nil},
		{"front-proxy-client", p.FrontProxyClient, fpRoots, "front-proxy-client", nil},
	}
	for _, c := range clients {
		if _, err := c.kp.Cert.Verify(x509.VerifyOptions{Roots: c.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.kp.Cert.Subject.CommonName != c.cn {
			t.Errorf("%s: CN %q, want %q", c.name, c.kp.Cert.Subject.CommonName, c.cn)
		}
		if !slices.Equal(c.kp.Cert.Subject.Organization, c.groups) {
			t.Errorf("%s: O %q, want %q", c.name, c.kp.Cert.Subject.Organization, c.groups)
		}
		if _, err := c.kp.Cert.Verify(x509.VerifyOptions{Roots: c.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
			t.Errorf("%s: a client certificate must not be valid for serving", c.name)
		}
	}
	if _, err := p.FrontProxyClient.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the front-proxy client must not chain to the cluster CA")
	}
	if p.CA.Cert.NotBefore.After(time.Now()) || p.CA.Cert.NotAfter.Before(time.Now().Add(300*24*time.Hour)) {
		t.Errorf("CA validity %v..%v", p.CA.Cert.NotBefore, p.CA.Cert.NotAfter)
	}
}

func TestPKIWriteParsesLikeKubernetes(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := p.write(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fileCAKey, fileAPIServerKey, fileFrontProxyClientKey, fileSAKey} {
		key, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, ok := key.(*ecdsa.PrivateKey); !ok {
			t.Errorf("%s: %T, want an ECDSA key", f, key)
		}
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode())
		}
	}
	pubs, err := keyutil.PublicKeysFromFile(filepath.Join(dir, fileSAPub))
	if err != nil || len(pubs) != 1 {
		t.Fatalf("sa.pub: %v (%d keys)", err, len(pubs))
	}
	if !pubs[0].(*ecdsa.PublicKey).Equal(p.ServiceAccount.Key.Public()) {
		t.Error("sa.pub does not match sa.key")
	}
	for _, f := range []string{fileCACert, fileAPIServerCert, fileFrontProxyCACert, fileFrontProxyClientCert} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil || block.Type != "CERTIFICATE" {
			t.Errorf("%s: not a PEM certificate", f)
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
