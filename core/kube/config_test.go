package kube

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.0.0.2:6443"}
contexts:
- name: prod
  context: {cluster: c, user: admin}
- name: ci
  context: {cluster: c, user: robot}
current-context: %s
users:
- name: admin
  user: {token: secret-admin-token}
- name: robot
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: get-robot-token
      interactiveMode: Never
`

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadConfig: what counts as nothing configured (an offline plan), what
// is configured but unusable (an error naming what is wrong), and whom the
// clients act as.
func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty", "")
	valid := writeFile(t, dir, "valid", strings.Replace(twoContexts, "%s", "prod", 1))
	noCurrent := writeFile(t, dir, "no-current", strings.Replace(twoContexts, "%s", `""`, 1))
	staleCurrent := writeFile(t, dir, "stale-current", strings.Replace(twoContexts, "%s", "gone", 1))
	broken := writeFile(t, dir, "broken", "apiVersion: v1\nkind: Config\nclusters: {{{\n")
	missing, missing2 := filepath.Join(dir, "missing"), filepath.Join(dir, "missing2")
	list := func(files ...string) string { return strings.Join(files, string(os.PathListSeparator)) }

	for _, tc := range []struct {
		name       string
		kubeconfig string // KUBECONFIG
		flags      func(f *genericclioptions.ConfigFlags)
		nothing    bool     // ErrNoKubeconfig
		missing    []string // a MissingKubeconfigError naming these
		errHas     []string // another error holding these
		want       Identity
	}{
		{name: "empty kubeconfig", kubeconfig: empty, nothing: true},
		{name: "KUBECONFIG names a missing file", kubeconfig: missing, missing: []string{missing}, errHas: []string{"KUBECONFIG", missing, "no cluster configured"}},
		{name: "KUBECONFIG names only missing files", kubeconfig: list(missing, missing2), missing: []string{missing, missing2}, errHas: []string{missing, missing2}},
		{name: "missing files of a KUBECONFIG list are skipped, as kubectl does", kubeconfig: list(missing, valid),
			want: Identity{Context: "prod", User: "admin", Files: []string{valid}}},
		{name: "--kubeconfig names a missing file", kubeconfig: valid,
			flags:   func(f *genericclioptions.ConfigFlags) { f.KubeConfig = &missing },
			missing: []string{missing}, errHas: []string{"--kubeconfig", missing}},
		{name: "unknown --context", kubeconfig: valid,
			flags:  func(f *genericclioptions.ConfigFlags) { s := "staging"; f.Context = &s },
			errHas: []string{`context "staging" is not in the kubeconfig`, valid, "ci, prod"}},
		{name: "--context without any kubeconfig", kubeconfig: empty,
			flags:  func(f *genericclioptions.ConfigFlags) { s := "staging"; f.Context = &s },
			errHas: []string{`context "staging" is not in the kubeconfig`, "it has no contexts"}},
		{name: "current-context names a context that is gone", kubeconfig: staleCurrent,
			errHas: []string{`context "gone" is not in the kubeconfig`}},
		{name: "contexts but none current", kubeconfig: noCurrent,
			errHas: []string{"has no current context", "(ci, prod)"}},
		{name: "contexts but none current, --context given", kubeconfig: noCurrent,
			flags: func(f *genericclioptions.ConfigFlags) { s := "ci"; f.Context = &s },
			want:  Identity{Context: "ci", User: "robot", Plugin: "get-robot-token", Files: []string{noCurrent}}},
		{name: "unreadable kubeconfig", kubeconfig: broken, errHas: []string{broken}},
		{name: "--server without a kubeconfig", kubeconfig: empty,
			flags: func(f *genericclioptions.ConfigFlags) { s := "https://10.0.0.9:6443"; f.APIServer = &s },
			want:  Identity{Files: []string{empty}}},
		{name: "--user", kubeconfig: valid,
			flags: func(f *genericclioptions.ConfigFlags) { s := "robot"; f.AuthInfoName = &s },
			want:  Identity{Context: "prod", User: "robot", Plugin: "get-robot-token", Files: []string{valid}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfig)
			f := genericclioptions.NewConfigFlags(false)
			if tc.flags != nil {
				tc.flags(f)
			}
			cfg, id, err := loadConfig(f)
			var miss *MissingKubeconfigError
			switch {
			case tc.nothing:
				if !errors.Is(err, ErrNoKubeconfig) {
					t.Fatalf("want ErrNoKubeconfig, got %v", err)
				}
				if Configured(f) {
					t.Error("Configured must be false")
				}
				return
			case tc.missing != nil:
				if !errors.As(err, &miss) || strings.Join(miss.Files, ",") != strings.Join(tc.missing, ",") {
					t.Fatalf("want a MissingKubeconfigError naming %v, got %v", tc.missing, err)
				}
			case tc.errHas != nil:
				if err == nil {
					t.Fatalf("want an error, got a config for %s", cfg.Host)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Host == "" {
					t.Error("no host")
				}
				if id.Context != tc.want.Context || id.User != tc.want.User || id.Plugin != tc.want.Plugin ||
					strings.Join(id.Files, ",") != strings.Join(tc.want.Files, ",") {
					t.Errorf("identity %+v, want %+v", id, tc.want)
				}
				return
			}
			t.Log(err)
			if errors.Is(err, ErrNoKubeconfig) || !Configured(f) {
				t.Errorf("a configuration that cannot be used is not \"nothing configured\": %v", err)
			}
			for _, want := range tc.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "secret-admin-token") {
				t.Errorf("the error leaks the token: %v", err)
			}
		})
	}
}

func TestCredentialsSentence(t *testing.T) {
	for _, tc := range []struct {
		id   Identity
		want string
	}{
		{Identity{Context: "prod", User: "admin"}, `the credentials of user "admin" in context "prod"`},
		{Identity{User: "admin"}, `the credentials of user "admin"`},
		{Identity{Context: "prod"}, `the credentials of context "prod"`},
		{Identity{}, "the credentials given"},
	} {
		if got := tc.id.credentials(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.id, got, tc.want)
		}
	}
}

func TestExpiredClientCert(t *testing.T) {
	now := time.Now()
	certPEM := func(notAfter time.Time) []byte {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "u"}, NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	expired := now.Add(-48 * time.Hour).Truncate(time.Second)
	if when, ok := expiredClientCert(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: certPEM(expired)}}, now); !ok || !when.Equal(expired) {
		t.Errorf("an expired certificate: %v %v", when, ok)
	}
	file := writeFile(t, t.TempDir(), "cert.pem", string(certPEM(expired)))
	if _, ok := expiredClientCert(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CertFile: file}}, now); !ok {
		t.Error("an expired certificate file")
	}
	if _, ok := expiredClientCert(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: certPEM(now.Add(time.Hour))}}, now); ok {
		t.Error("a valid certificate reported expired")
	}
	if _, ok := expiredClientCert(&rest.Config{}, now); ok {
		t.Error("no certificate reported expired")
	}
}
