package image

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"khook.io/core/manifest"
	"khook.io/dev/e2e"
	"khook.io/dev/packaging"
)

// example is examples/in-cluster as `kubectl apply -k` installs it.
type example struct {
	Namespaces     []*corev1.Namespace
	ServiceAccount *corev1.ServiceAccount
	Roles          []*rbacv1.Role
	RoleBindings   []*rbacv1.RoleBinding
	ConfigMap      *corev1.ConfigMap
	Secret         *corev1.Secret
	Job            *batchv1.Job
}

// The files of the example's spec in the ConfigMap, and where the Job
// mounts them.
const (
	specKey   = "platform.yaml"
	valuesKey = "values.yaml"
	specMount = "/spec"
)

// loadExample builds examples/in-cluster with kustomize (as kubectl apply
// -k does) and decodes every object strictly (an unknown field fails).
func loadExample(t *testing.T) *example {
	t.Helper()
	objs, out := kustomizeStrict(t, "in-cluster")
	var ex example
	for _, obj := range objs {
		switch o := obj.(type) {
		case *corev1.Namespace:
			ex.Namespaces = append(ex.Namespaces, o)
		case *corev1.ServiceAccount:
			once(t, &ex.ServiceAccount, o)
		case *rbacv1.Role:
			ex.Roles = append(ex.Roles, o)
		case *rbacv1.RoleBinding:
			ex.RoleBindings = append(ex.RoleBindings, o)
		case *corev1.ConfigMap:
			once(t, &ex.ConfigMap, o)
		case *corev1.Secret:
			once(t, &ex.Secret, o)
		case *batchv1.Job:
			once(t, &ex.Job, o)
		default:
			t.Fatalf("examples/in-cluster: unexpected %T", obj)
		}
	}
	if ex.ServiceAccount == nil || ex.ConfigMap == nil || ex.Secret == nil || ex.Job == nil || len(ex.Roles) == 0 || len(ex.Namespaces) == 0 {
		t.Fatalf("examples/in-cluster: want namespaces, a ServiceAccount, Roles, a ConfigMap, a Secret and a Job; kustomize gave\n%s", out)
	}
	return &ex
}

// kustomizeStrict builds examples/<dir> with kustomize (as kubectl apply
// -k does) and decodes every object strictly (an unknown field fails); it
// also returns the build's output.
func kustomizeStrict(t *testing.T, dir string) ([]runtime.Object, []byte) {
	t.Helper()
	out, err := manifest.Kustomize(t.Context(), filepath.Join(repoRoot(t), "examples", filepath.FromSlash(dir)))
	if err != nil {
		t.Fatal(err)
	}
	strict := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	var objs []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, out
		}
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("examples/%s: %v\n%s", dir, err, doc)
		}
		objs = append(objs, obj)
	}
}

func once[T runtime.Object](t *testing.T, dst *T, o T) {
	t.Helper()
	var zero T
	if any(*dst) != any(zero) {
		t.Fatalf("examples/in-cluster: two %T", o)
	}
	*dst = o
}

// container is the Job's one container.
func (ex *example) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := ex.Job.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("the Job has %d containers, want 1", len(cs))
	}
	return cs[0]
}

// secretEnv is the environment the Job's container gets from the Secret,
// with values (the Secret's stringData, or values set by the test).
func (ex *example) secretEnv(t *testing.T, values map[string]string) []string {
	t.Helper()
	c := ex.container(t)
	var env []string
	for _, from := range c.EnvFrom {
		if from.SecretRef == nil || from.SecretRef.Name != ex.Secret.Name {
			t.Fatalf("envFrom %+v: want the Secret %s", from, ex.Secret.Name)
		}
		for k := range values {
			env = append(env, from.Prefix+k+"="+values[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			t.Fatalf("env %s: valueFrom is not followed by the test", e.Name)
		}
		env = append(env, e.Name+"="+e.Value)
	}
	slices.Sort(env)
	return env
}

// writeSpec writes the ConfigMap's spec files into dir (as the Job's
// volume mounts them), values changed by set.
func (ex *example) writeSpec(t *testing.T, dir string, set map[string]string) {
	t.Helper()
	values := map[string]any{}
	if err := yaml.Unmarshal([]byte(ex.ConfigMap.Data[valuesKey]), &values); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		values[k] = v
	}
	out, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{specKey: []byte(ex.ConfigMap.Data[specKey]), valuesKey: out} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hostArgs are the Job's args with the mount path replaced by dir.
func (ex *example) hostArgs(t *testing.T, dir string) []string {
	t.Helper()
	var args []string
	for _, a := range ex.container(t).Args {
		if strings.HasPrefix(a, specMount+"/") {
			a = filepath.Join(dir, strings.TrimPrefix(a, specMount+"/"))
		}
		args = append(args, a)
	}
	return args
}

func secretValues(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.StringData {
		out[k] = v
	}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

// TestInClusterExample checks examples/in-cluster without a cluster: the
// objects decode strictly, hang together (the Job runs as the
// ServiceAccount the RoleBindings bind, mounts the ConfigMap where its
// args read the spec, takes the Secret as KHOOK_SECRET_* variables, sets no
// kubeconfig, runs the image's user, uses this release's image), and the
// spec in the ConfigMap validates with khook, its values and the Secret's
// keys as secret variables. The cluster half is
// TestInClusterExampleRBAC.
func TestInClusterExample(t *testing.T) {
	ex := loadExample(t)
	pod := ex.Job.Spec.Template.Spec
	c := ex.container(t)
	runner := ex.Job.Namespace

	if pod.ServiceAccountName != ex.ServiceAccount.Name || ex.ServiceAccount.Namespace != runner {
		t.Errorf("the Job runs as %s in %s, the ServiceAccount is %s/%s", pod.ServiceAccountName, runner, ex.ServiceAccount.Namespace, ex.ServiceAccount.Name)
	}
	if pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken {
		t.Error("the Job turns off the service account token: khook would have no credentials")
	}
	for _, rb := range ex.RoleBindings {
		if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != ex.ServiceAccount.Name || rb.Subjects[0].Namespace != runner {
			t.Errorf("RoleBinding %s/%s binds %+v, want the ServiceAccount %s/%s", rb.Namespace, rb.Name, rb.Subjects, runner, ex.ServiceAccount.Name)
		}
		if !slices.ContainsFunc(ex.Roles, func(r *rbacv1.Role) bool {
			return rb.RoleRef.Kind == "Role" && r.Name == rb.RoleRef.Name && r.Namespace == rb.Namespace
		}) {
			t.Errorf("RoleBinding %s/%s refers to %s %s, not a Role of the example in its namespace", rb.Namespace, rb.Name, rb.RoleRef.Kind, rb.RoleRef.Name)
		}
	}
	if len(ex.RoleBindings) != len(ex.Roles) {
		t.Errorf("%d Roles, %d RoleBindings", len(ex.Roles), len(ex.RoleBindings))
	}
	for _, o := range []interface{ GetNamespace() string }{ex.ConfigMap, ex.Secret} {
		if o.GetNamespace() != runner {
			t.Errorf("%T in %s, the Job in %s", o, o.GetNamespace(), runner)
		}
	}
	var nsNames []string
	for _, ns := range ex.Namespaces {
		nsNames = append(nsNames, ns.Name)
	}
	for _, r := range ex.Roles {
		if !slices.Contains(nsNames, r.Namespace) {
			t.Errorf("Role %s is in %s, which the example does not create", r.Name, r.Namespace)
		}
	}

	// the spec's mount and args
	var mounted string
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == ex.ConfigMap.Name {
				mounted = m.MountPath
			}
		}
	}
	if mounted != specMount {
		t.Errorf("the ConfigMap %s is mounted at %q, want %s", ex.ConfigMap.Name, mounted, specMount)
	}
	wantArgs := []string{"apply", "-f", path.Join(specMount, specKey), "--var-file", path.Join(specMount, valuesKey)}
	if !slices.Equal(c.Args, wantArgs) || len(c.Command) != 0 {
		t.Errorf("command %q args %q, want the image's entrypoint with %q", c.Command, c.Args, wantArgs)
	}
	for _, k := range []string{specKey, valuesKey} {
		if ex.ConfigMap.Data[k] == "" {
			t.Errorf("the ConfigMap has no %s", k)
		}
	}
	// in-cluster credentials: no kubeconfig anywhere
	for _, e := range c.Env {
		if e.Name == "KUBECONFIG" {
			t.Error("the Job sets KUBECONFIG: khook should use its in-cluster credentials")
		}
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].Prefix != "KHOOK_SECRET_" {
		t.Errorf("envFrom %+v: want the Secret with the prefix KHOOK_SECRET_", c.EnvFrom)
	}
	// the image: this release's, run as its user, read-only root, writable home
	version, err := packaging.PluginVersion(readFile(t, filepath.Join(repoRoot(t), packaging.PluginYAML)))
	if err != nil {
		t.Fatal(err)
	}
	repo := regexp.MustCompile(`(?m)^IMAGE_REPO\s*\?=\s*(\S+)$`).FindSubmatch(readFile(t, filepath.Join(repoRoot(t), "hack", "image.mk")))
	if repo == nil {
		t.Fatal("hack/image.mk: no IMAGE_REPO ?= ...")
	}
	if want := string(repo[1]) + ":v" + version; c.Image != want {
		t.Errorf("image %s, want %s (IMAGE_REPO and plugin.yaml's release)", c.Image, want)
	}
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != UID || sc.RunAsGroup == nil || *sc.RunAsGroup != GID {
		t.Errorf("pod securityContext %+v: want runAsNonRoot as %d:%d (the image's user)", sc, UID, GID)
	}
	if csc := c.SecurityContext; csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v: want a read-only root and no privilege escalation", csc)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == Home && !m.ReadOnly }) {
		t.Errorf("no writable volume at %s (helm's caches; the root file system is read-only)", Home)
	}
	if ex.Job.Spec.BackoffLimit == nil || *ex.Job.Spec.BackoffLimit != 0 || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("backoffLimit %v, restartPolicy %s: want 0 and Never (khook retries steps itself)", ex.Job.Spec.BackoffLimit, pod.RestartPolicy)
	}

	// khook validate, as the Job would see the files
	bins, err := e2e.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ex.writeSpec(t, dir, nil)
	env := ex.secretEnv(t, secretValues(ex.Secret))
	args := ex.hostArgs(t, dir)
	args[0] = "validate"
	res, err := e2e.Run(t.Context(), t.TempDir(), bins.Kubectl, env, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 0 || !strings.Contains(res.Stdout, "is valid") {
		t.Fatalf("kubectl-khook %q: exit %d\n%s%s", args, res.Code, res.Stdout, res.Stderr)
	}
	// and without the Secret it is not: the spec really takes it
	res, err = e2e.Run(t.Context(), t.TempDir(), bins.Kubectl, nil, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	for k := range secretValues(ex.Secret) {
		if res.Code != 2 || !strings.Contains(res.Stderr, "variable "+k+" is not set") {
			t.Errorf("validate without KHOOK_SECRET_%s: exit %d\n%s", k, res.Code, res.Stderr)
		}
	}
}
