package kube

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

const fleetKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://10.0.0.1:6443"}
- name: b
  cluster: {server: "https://10.0.0.2:6443"}
contexts:
- name: prod-eu
  context: {cluster: a, user: admin, namespace: eu}
- name: prod-us
  context: {cluster: b, user: admin}
- name: staging-eu
  context: {cluster: b, user: admin}
- name: arn:aws:eks:eu-west-1:123:cluster/prod-x
  context: {cluster: a, user: admin}
current-context: staging-eu
users:
- name: admin
  user: {token: secret-admin-token}
`

// TestSelectContexts: names and path.Match patterns over the kubeconfig's
// contexts; everything that selects nothing is one error, naming each.
func TestSelectContexts(t *testing.T) {
	dir := t.TempDir()
	kc := writeFile(t, dir, "kubeconfig", fleetKubeconfig)
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kc
	names, files, err := Contexts(flags)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"arn:aws:eks:eu-west-1:123:cluster/prod-x", "prod-eu", "prod-us", "staging-eu"}
	if !slices.Equal(names, want) || !slices.Equal(files, []string{kc}) {
		t.Fatalf("Contexts = %q, %q", names, files)
	}
	for _, tc := range []struct {
		name    string
		entries []string
		want    []string
		errHas  []string
	}{
		{"names, in the order given", []string{"staging-eu", "prod-eu"}, []string{"staging-eu", "prod-eu"}, nil},
		{"a pattern, its matches sorted", []string{"prod-*"}, []string{"prod-eu", "prod-us"}, nil},
		{"each context once", []string{"prod-eu", "prod-*", "*-eu"}, []string{"prod-eu", "prod-us", "staging-eu"}, nil},
		{"* does not match a /", []string{"*prod-x"}, nil, []string{`pattern "*prod-x" matches no context`}},
		{"a pattern across a /", []string{"arn:aws:eks:*:*:cluster/prod-*"}, []string{"arn:aws:eks:eu-west-1:123:cluster/prod-x"}, nil},
		{"? and classes", []string{"prod-[eu]?"}, []string{"prod-eu", "prod-us"}, nil},
		{"an unknown name and a pattern matching nothing, at once", []string{"prod-eu", "prod-asia", "dev-*"},
			nil, []string{`context "prod-asia" is not in the kubeconfig`, `pattern "dev-*" matches no context`, kc, "its contexts: arn:aws"}},
		{"a malformed pattern", []string{"prod-[eu"}, nil, []string{`pattern "prod-[eu" is malformed`}},
		{"an empty entry", []string{"prod-eu", ""}, nil, []string{"empty entry"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SelectContexts(tc.entries, names, files)
			if tc.errHas != nil {
				if err == nil {
					t.Fatalf("no error, selected %q", got)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("SelectContexts(%q) = %q, %v; want %q", tc.entries, got, err, tc.want)
			}
		})
	}
}

func TestContextsWithoutAKubeconfig(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &missing
	var me *MissingKubeconfigError
	if _, _, err := Contexts(flags); !errors.As(err, &me) {
		t.Errorf("a missing --kubeconfig: %v", err)
	}
	empty := writeFile(t, dir, "empty", "")
	flags.KubeConfig = &empty
	if _, _, err := Contexts(flags); !errors.Is(err, ErrNoKubeconfig) {
		t.Errorf("a kubeconfig without contexts: %v", err)
	}
}

// TestForContext: a cluster of a fleet is reached through its own context,
// every other connection flag as given.
func TestForContext(t *testing.T) {
	dir := t.TempDir()
	kc := writeFile(t, dir, "kubeconfig", fleetKubeconfig)
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kc
	timeout := "7s"
	flags.Timeout = &timeout
	wrapped := false
	flags.WrapConfigFn = func(c *rest.Config) *rest.Config { wrapped = true; return c }
	for _, tc := range []struct {
		context, host, namespace string
	}{
		{"prod-eu", "https://10.0.0.1:6443", "eu"},
		{"prod-us", "https://10.0.0.2:6443", "default"},
	} {
		g, err := ForContext(flags, tc.context)
		if err != nil {
			t.Fatal(err)
		}
		cfg, id, err := loadConfig(g)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != tc.host || id.Context != tc.context || cfg.Timeout.String() != "7s" || !wrapped {
			t.Errorf("%s: host %s, context %s, timeout %s, wrapped %v", tc.context, cfg.Host, id.Context, cfg.Timeout, wrapped)
		}
		if ns, _, _ := g.ToRawKubeConfigLoader().Namespace(); ns != tc.namespace {
			t.Errorf("%s: namespace %s, want %s", tc.context, ns, tc.namespace)
		}
		if ContextFlag(g) != tc.context {
			t.Errorf("ContextFlag = %q", ContextFlag(g))
		}
	}
	if ContextFlag(flags) != "" {
		t.Errorf("the original flags changed: %q", ContextFlag(flags))
	}
}

// TestForContextCopiesEveryFlag: every exported field of the flags reaches
// the clone (a field cli-runtime adds one day must be copied too).
func TestForContextCopiesEveryFlag(t *testing.T) {
	f := genericclioptions.NewConfigFlags(false)
	v := reflect.ValueOf(f).Elem()
	for i := 0; i < v.NumField(); i++ {
		fv, ft := v.Field(i), v.Type().Field(i)
		if !ft.IsExported() {
			continue
		}
		switch fv.Kind() {
		case reflect.Pointer:
			fv.Set(reflect.New(ft.Type.Elem()))
		case reflect.Func:
			fv.Set(reflect.ValueOf(func(c *rest.Config) *rest.Config { return c }))
		default:
			t.Fatalf("field %s of kind %s: teach this test and ForContext about it", ft.Name, fv.Kind())
		}
	}
	g, err := ForContext(f, "x")
	if err != nil {
		t.Fatal(err)
	}
	c := reflect.ValueOf(g).Elem()
	for i := 0; i < v.NumField(); i++ {
		ft := v.Type().Field(i)
		if !ft.IsExported() || ft.Name == "Context" {
			continue
		}
		if c.Field(i).Pointer() != v.Field(i).Pointer() {
			t.Errorf("ForContext does not copy %s", ft.Name)
		}
	}
}

// TestSameCluster: kube-system UIDs decide when both are known; else the
// URL and certificate authority do.
func TestSameCluster(t *testing.T) {
	a := ClusterID{UID: "u1", Server: "https://a", CA: "x"}
	for _, tc := range []struct {
		name string
		b    ClusterID
		want bool
	}{
		{"one UID, another URL", ClusterID{UID: "u1", Server: "https://proxy", CA: "y"}, true},
		{"two UIDs, one URL (a proxy routing by credentials)", ClusterID{UID: "u2", Server: "https://a", CA: "x"}, false},
		{"no UID, one URL and CA", ClusterID{NoUID: "forbidden", Server: "https://a", CA: "x"}, true},
		{"no UID, one URL, another CA", ClusterID{NoUID: "forbidden", Server: "https://a", CA: "y"}, false},
		{"no UID, another URL", ClusterID{NoUID: "forbidden", Server: "https://b", CA: "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameCluster(a, tc.b); got != tc.want {
				t.Errorf("SameCluster(a, b) = %v, want %v", got, tc.want)
			}
			if got := SameCluster(tc.b, a); got != tc.want {
				t.Errorf("SameCluster(b, a) = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCADigest(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := caDigest(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("PEM")}})
	for _, tc := range []struct {
		name string
		cfg  *rest.Config
		want string
	}{
		{"a file holding the same CA as data", &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: file}}, data},
		{"none", &rest.Config{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := caDigest(tc.cfg); got != tc.want {
				t.Errorf("caDigest = %q, want %q", got, tc.want)
			}
		})
	}
	if data == "" || data == caDigest(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("other")}}) {
		t.Errorf("digests do not tell CAs apart: %q", data)
	}
}
