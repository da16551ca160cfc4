package testcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Names of the cluster's identities. The least-privilege user has no group
// beyond system:authenticated; its rights come from one RoleBinding.
const (
	adminUser       = "khook-admin"
	limitedUser     = "khook-limited"
	kcmUser         = "system:kube-controller-manager"
	schedulerUser   = "system:kube-scheduler"
	kwokUser        = "kwok"
	frontProxyUser  = "front-proxy-client"
	mastersGroup    = "system:masters"
	serviceCIDR     = "10.96.0.0/16"
	serviceIP       = "10.96.0.1" // first address of serviceCIDR: the `kubernetes` Service
	advertiseIP     = "10.255.0.1"
	certValidity    = 365 * 24 * time.Hour
	clockSkewMargin = time.Hour
)

// keyPair is a certificate and its private key, both parsed and PEM-encoded.
type keyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// pki holds every certificate and key a cluster needs. Client identities are
// only ever embedded in kubeconfigs; the rest is written under <dir>/pki for
// the components' flags.
type pki struct {
	CA               *keyPair
	APIServer        *keyPair
	FrontProxyCA     *keyPair
	FrontProxyClient *keyPair
	ServiceAccount   *keyPair // Cert is nil: only a key pair
	SAPublicPEM      []byte
	Admin            *keyPair
	ControllerMgr    *keyPair
	Scheduler        *keyPair
	Kwok             *keyPair
	Limited          *keyPair
}

// newPKI generates a fresh PKI with ECDSA P-256 keys (fast: well under a
// second for all of it). extraIPs are added to the apiserver's SANs (the
// advertise address).
func newPKI(extraIPs ...net.IP) (*pki, error) {
	var p pki
	var err error
	if p.CA, err = newCA("khook-testcluster-ca"); err != nil {
		return nil, err
	}
	if p.FrontProxyCA, err = newCA("khook-testcluster-front-proxy-ca"); err != nil {
		return nil, err
	}
	ips := append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}, extraIPs...)
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if p.APIServer, err = newLeaf(p.CA, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth, dns, ips); err != nil {
		return nil, err
	}
	if p.FrontProxyClient, err = newClientCert(p.FrontProxyCA, frontProxyUser); err != nil {
		return nil, err
	}
	clients := []struct {
		dst    **keyPair
		user   string
		groups []string
	}{
		{&p.Admin, adminUser, []string{mastersGroup}},
		{&p.ControllerMgr, kcmUser, nil},
		{&p.Scheduler, schedulerUser, nil},
		{&p.Kwok, kwokUser, []string{mastersGroup}},
		{&p.Limited, limitedUser, nil},
	}
	for _, c := range clients {
		if *c.dst, err = newClientCert(p.CA, c.user, c.groups...); err != nil {
			return nil, err
		}
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	p.ServiceAccount = &keyPair{Key: saKey}
	if p.ServiceAccount.KeyPEM, err = encodeKey(saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("encode service-account public key: %w", err)
	}
	p.SAPublicPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	return &p, nil
}

// Files written by (*pki).write, relative to the cluster directory.
const (
	fileCACert               = "pki/ca.crt"
	fileCAKey                = "pki/ca.key"
	fileAPIServerCert        = "pki/apiserver.crt"
	fileAPIServerKey         = "pki/apiserver.key"
	fileFrontProxyCACert     = "pki/front-proxy-ca.crt"
	fileFrontProxyClientCert = "pki/front-proxy-client.crt"
	fileFrontProxyClientKey  = "pki/front-proxy-client.key"
	fileSAKey                = "pki/sa.key"
	fileSAPub                = "pki/sa.pub"
)

// write stores the files the components read (the file* constants) under dir.
func (p *pki) write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o700); err != nil {
		return fmt.Errorf("create pki directory: %w", err)
	}
	files := []struct {
		name string
		data []byte
	}{
		{fileCACert, p.CA.CertPEM},
		{fileCAKey, p.CA.KeyPEM},
		{fileAPIServerCert, p.APIServer.CertPEM},
		{fileAPIServerKey, p.APIServer.KeyPEM},
		{fileFrontProxyCACert, p.FrontProxyCA.CertPEM},
		{fileFrontProxyClientCert, p.FrontProxyClient.CertPEM},
		{fileFrontProxyClientKey, p.FrontProxyClient.KeyPEM},
		{fileSAKey, p.ServiceAccount.KeyPEM},
		{fileSAPub, p.SAPublicPEM},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}

func newCA(cn string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", cn, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-clockSkewMargin),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, key, nil)
}

func newClientCert(ca *keyPair, user string, groups ...string) (*keyPair, error) {
	return newLeaf(ca, pkix.Name{CommonName: user, Organization: groups}, x509.ExtKeyUsageClientAuth, nil, nil)
}

func newLeaf(ca *keyPair, subject pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", subject.CommonName, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:               subject,
		NotBefore:             now.Add(-clockSkewMargin),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	return sign(tmpl, key, ca)
}

// sign issues tmpl for key, signed by ca (self-signed when ca is nil).
func sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey, ca *keyPair) (*keyPair, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		parent, signer = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  keyPEM,
	}, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
