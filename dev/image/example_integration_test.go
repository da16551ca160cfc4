//go:build integration

package image

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"khook.io/core/testing/testcluster"
	"khook.io/dev/e2e"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// installExample creates examples/in-cluster on the test cluster as an
// admin would, in two fresh namespaces standing for the example's (the
// names get a random suffix, so runs never collide), without the Job (kwok
// runs no containers): the ServiceAccount, Roles and RoleBindings, the
// ConfigMap, and the Secret with secret planted in place of each
// placeholder. It returns the renaming.
func installExample(t *testing.T, c *testcluster.Cluster, cs kubernetes.Interface, ex *example, secret string) map[string]string {
	t.Helper()
	ctx := t.Context()
	rename := map[string]string{}
	for _, ns := range ex.Namespaces {
		rename[ns.Name] = c.NewNamespace(t, ns.Name)
	}
	ns := func(name string) string {
		if n, ok := rename[name]; ok {
			return n
		}
		t.Fatalf("%s is not a namespace of the example", name)
		return ""
	}
	sa := ex.ServiceAccount.DeepCopy()
	sa.Namespace = ns(sa.Namespace)
	if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range ex.Roles {
		r = r.DeepCopy()
		r.Namespace = ns(r.Namespace)
		if _, err := cs.RbacV1().Roles(r.Namespace).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, rb := range ex.RoleBindings {
		rb = rb.DeepCopy()
		rb.Namespace = ns(rb.Namespace)
		for i := range rb.Subjects {
			rb.Subjects[i].Namespace = ns(rb.Subjects[i].Namespace)
		}
		if _, err := cs.RbacV1().RoleBindings(rb.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm := ex.ConfigMap.DeepCopy()
	cm.Namespace = ns(cm.Namespace)
	if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := ex.Secret.DeepCopy()
	s.Namespace = ns(s.Namespace)
	for k := range s.StringData {
		s.StringData[k] = secret
	}
	if _, err := cs.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return rename
}

// clusterCA is the test cluster's CA certificate (PEM).
func clusterCA(t *testing.T, c *testcluster.Cluster) []byte {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var ca []byte
	for _, cl := range admin.Clusters {
		ca = cl.CertificateAuthorityData
	}
	if len(ca) == 0 {
		t.Fatalf("%s: no CA data", c.Kubeconfig)
	}
	return ca
}

// tokenKubeconfig writes a kubeconfig that authenticates with token.
func tokenKubeconfig(t *testing.T, c *testcluster.Cluster, token, namespace string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: clusterCA(t, c)}
	cfg.AuthInfos["khook"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["khook"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "khook", Namespace: namespace}
	cfg.CurrentContext = "khook"
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestInClusterExampleRBAC runs examples/in-cluster's spec with exactly the
// example's RBAC, as its ServiceAccount (a token from the TokenRequest
// API): with a kubeconfig of that token through bin/kubectl-khook, and,
// when the test runs as root, as the Job would in a Pod: the image
// unpacked and run as its user, the token, CA and namespace where the
// kubelet mounts them, the KUBERNETES_SERVICE_* variables, no kubeconfig.
// Every run succeeds and prints no secret; a step outside the RBAC is
// refused by the API server.
func TestInClusterExampleRBAC(t *testing.T) {
	c := testcluster.Get(t)
	cs, err := kubernetes.NewForConfig(c.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ex := loadExample(t)
	secret := "planted-registry-token-7f3a91c2"
	rename := installExample(t, c, cs, ex, secret)
	runner, target := rename[ex.Job.Namespace], ""
	for from, to := range rename {
		if from != ex.Job.Namespace {
			target = to
		}
	}
	saName := ex.ServiceAccount.Name
	tr, err := cs.CoreV1().ServiceAccounts(runner).CreateToken(ctx, saName, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token
	kubeconfig := tokenKubeconfig(t, c, token, runner)

	// the spec and values as the ConfigMap mounts them, the namespaces
	// renamed
	specDir := filepath.Join(t.TempDir(), "spec")
	ex.writeSpec(t, specDir, valuesRenamed(t, ex, rename))
	secretEnv := ex.secretEnv(t, map[string]string{"REGISTRY_TOKEN": secret})
	bins, err := e2e.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	apply := func(t *testing.T, want string) {
		t.Helper()
		res, err := e2e.Run(ctx, t.TempDir(), bins.Kubectl, append([]string{"KUBECONFIG=" + kubeconfig}, secretEnv...), "", ex.hostArgs(t, specDir)...)
		if err != nil {
			t.Fatal(err)
		}
		noSecret(t, secret, token, res.Stdout, res.Stderr)
		if res.Code != 0 || !strings.Contains(res.Stdout, want) {
			t.Fatalf("kubectl-khook %q as %s: exit %d, want %q\n%s%s", ex.hostArgs(t, specDir), saName, res.Code, want, res.Stdout, res.Stderr)
		}
	}
	stateName := "khook-state-platform"
	deleteState := func(t *testing.T) {
		t.Helper()
		if err := cs.CoreV1().Secrets(runner).Delete(ctx, stateName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	checkObjects := func(t *testing.T) {
		t.Helper()
		s, err := cs.CoreV1().Secrets(target).Get(ctx, "registry-credentials", metav1.GetOptions{})
		if err != nil || string(s.Data["token"]) != secret {
			t.Fatalf("Secret registry-credentials: %v, token %q: want the Secret's value", err, s.Data["token"])
		}
		d, err := cs.AppsV1().Deployments(target).Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Replicas == nil || d.Status.AvailableReplicas != *d.Spec.Replicas {
			t.Fatalf("Deployment api: %d of %v replicas available", d.Status.AvailableReplicas, d.Spec.Replicas)
		}
		if _, err := cs.CoreV1().ConfigMaps(target).Get(ctx, "platform-settings", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		st, err := cs.CoreV1().Secrets(runner).Get(ctx, stateName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("state record: %v", err)
		}
		for k, v := range st.Data {
			if strings.Contains(string(v), secret) {
				t.Fatalf("the state record's %s holds the secret", k)
			}
		}
	}

	t.Run("token kubeconfig", func(t *testing.T) {
		apply(t, "3 ok, 0 failed, 0 skipped")
		checkObjects(t)
	})

	t.Run("in the image, in-cluster credentials", func(t *testing.T) {
		needRoot(t)
		if runtime.GOOS != "linux" {
			t.Skip("the image is a linux image")
		}
		// every step again (no state record: nothing resumes; the objects
		// exist), as the Job runs it
		deleteState(t)
		m := testMeta(t)
		out := filepath.Join(t.TempDir(), "image")
		buildImage(t, buildTool(t), m, out, bins.Kubectl)
		_, _, img := builtImage(t, out)
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		rootfs := t.TempDir()
		unpack(t, img, rootfs)
		// what the kubelet mounts: the spec volume, the service account
		mount(t, rootfs, specMount, map[string][]byte{
			specKey:   readFile(t, filepath.Join(specDir, specKey)),
			valuesKey: readFile(t, filepath.Join(specDir, valuesKey)),
		})
		mount(t, rootfs, "/var/run/secrets/kubernetes.io/serviceaccount", map[string][]byte{
			"token": []byte(token), "ca.crt": clusterCA(t, c), "namespace": []byte(runner),
		})
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		// without the service variables there is no cluster (nothing else
		// in the image could give one): the run below used the mounted
		// service account
		if _, stderr, code := runImage(t, rootfs, cf.Config, secretEnv, ex.container(t).Args...); code != 1 || !strings.Contains(stderr, "no cluster configured") {
			t.Fatalf("without KUBERNETES_SERVICE_HOST: exit %d, want no cluster\n%s", code, stderr)
		}
		env := append([]string{"KUBERNETES_SERVICE_HOST=" + u.Hostname(), "KUBERNETES_SERVICE_PORT=" + u.Port()}, secretEnv...)
		stdout, stderr, code := runImage(t, rootfs, cf.Config, env, ex.container(t).Args...)
		noSecret(t, secret, token, stdout, stderr)
		if code != 0 || !strings.Contains(stdout, "3 ok, 0 failed, 0 skipped") {
			t.Fatalf("the Job's command in the image: exit %d\n%s%s", code, stdout, stderr)
		}
		checkObjects(t)
	})

	t.Run("resumed from the state record", func(t *testing.T) {
		apply(t, "0 ok, 0 failed, 3 skipped")
	})

	t.Run("outside the RBAC", func(t *testing.T) {
		// the same ServiceAccount, a step into a namespace and a kind
		// the Roles do not grant
		spec := filepath.Join(t.TempDir(), "outside.yaml")
		body := `apiVersion: khook.io/v1
kind: Khook
metadata: {name: outside}
defaults: {onError: continue}
steps:
  - name: other-namespace
    apply:
      namespace: ` + runner + `
      manifests:
        - inline: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: not-granted}
  - name: cluster-scoped
    apply:
      manifests:
        - inline: |
            apiVersion: rbac.authorization.k8s.io/v1
            kind: ClusterRole
            metadata: {name: khook-example-not-granted}
            rules: []
`
		if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := e2e.Run(ctx, t.TempDir(), bins.Kubectl, []string{"KUBECONFIG=" + kubeconfig}, "", "apply", "-f", spec)
		if err != nil {
			t.Fatal(err)
		}
		user := "system:serviceaccount:" + runner + ":" + saName
		if res.Code != 1 || strings.Count(res.Stdout, "forbidden") != 2 || !strings.Contains(res.Stdout, user) ||
			!strings.Contains(res.Stdout, "0 ok, 2 failed") {
			t.Fatalf("want both steps forbidden for %s; exit %d\n%s%s", user, res.Code, res.Stdout, res.Stderr)
		}
		if _, err := cs.CoreV1().ConfigMaps(runner).Get(ctx, "not-granted", metav1.GetOptions{}); err == nil {
			t.Error("the ConfigMap outside the RBAC was created")
		}
	})
}

// valuesRenamed maps the values that name one of the example's namespaces
// to the test's.
func valuesRenamed(t *testing.T, ex *example, rename map[string]string) map[string]string {
	t.Helper()
	values := map[string]any{}
	if err := yaml.Unmarshal([]byte(ex.ConfigMap.Data[valuesKey]), &values); err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	for k, v := range values {
		if n, ok := rename[fmt.Sprint(v)]; ok {
			set[k] = n
		}
	}
	if len(set) != len(rename) {
		t.Fatalf("values.yaml names %d of the example's %d namespaces", len(set), len(rename))
	}
	return set
}

// mount writes files into dir of the root file system, read-only to
// everyone but root (as the kubelet's volumes are to a non-root user).
func mount(t *testing.T, rootfs, dir string, files map[string][]byte) {
	t.Helper()
	d := filepath.Join(rootfs, filepath.FromSlash(dir))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// noSecret: neither the planted secret nor the token in any output.
func noSecret(t *testing.T, secret, token string, outputs ...string) {
	t.Helper()
	for _, o := range outputs {
		if strings.Contains(o, secret) || strings.Contains(o, token) {
			t.Fatalf("a secret value in the output:\n%s", o)
		}
	}
}
