package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// Contexts returns the names of the contexts of the kubeconfig getter
// reads (its files merged as kubectl merges them), sorted, and the files
// read. A kubeconfig file named by --kubeconfig or KUBECONFIG that does not
// exist is a *MissingKubeconfigError; no kubeconfig at all, or one without
// contexts, is ErrNoKubeconfig. Nothing contacts a cluster.
func Contexts(getter genericclioptions.RESTClientGetter) (names, files []string, err error) {
	loader := getter.ToRawKubeConfigLoader()
	if files, err = kubeconfigFiles(loader.ConfigAccess()); err != nil {
		return nil, nil, err
	}
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, files, fmt.Errorf("kubeconfig (%s): %w", describeFiles(files), err)
	}
	for n := range raw.Contexts {
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, files, ErrNoKubeconfig
	}
	slices.Sort(names)
	return names, files, nil
}

// IsContextPattern reports whether a --contexts entry is a glob pattern
// (it holds one of path.Match's special characters *, ?, [ or \) rather
// than a context's name.
func IsContextPattern(entry string) bool { return strings.ContainsAny(entry, `*?[\`) }

// SelectContexts resolves --contexts entries against the kubeconfig's
// contexts (available): a name selects that context and must be one of
// them; a pattern selects every context it matches with path.Match (the
// same on every platform: * and ? do not match a /, \ escapes) and must
// match at least one. The contexts come in the order of the entries, a
// pattern's matches sorted, each once. The error lists every entry that
// selects nothing, and the contexts there are.
func SelectContexts(entries, available []string, files []string) ([]string, error) {
	known := make(map[string]bool, len(available))
	for _, n := range available {
		known[n] = true
	}
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	var problems []string
	for _, e := range entries {
		switch {
		case e == "":
			problems = append(problems, "an empty entry (two commas, or a comma at an end)")
		case !IsContextPattern(e):
			if !known[e] {
				problems = append(problems, fmt.Sprintf("context %q is not in the kubeconfig", e))
				continue
			}
			add(e)
		default:
			if _, err := path.Match(e, ""); err != nil {
				problems = append(problems, fmt.Sprintf("pattern %q is malformed (%v)", e, err))
				continue
			}
			matched := false
			for _, n := range available {
				if ok, _ := path.Match(e, n); ok {
					matched = true
					add(n)
				}
			}
			if !matched {
				problems = append(problems, fmt.Sprintf("pattern %q matches no context", e))
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s (kubeconfig: %s; its contexts: %s)", strings.Join(problems, "; "), describeFiles(files), strings.Join(available, ", "))
	}
	if len(out) == 0 {
		return nil, errors.New("no context named")
	}
	return out, nil
}

// ContextFlag is the context a getter's flags name (kubectl's --context,
// helm's --kube-context or HELM_KUBECONTEXT), "" when none.
func ContextFlag(getter genericclioptions.RESTClientGetter) string {
	if f, ok := getter.(*genericclioptions.ConfigFlags); ok {
		return deref(f.Context)
	}
	return ""
}

// ForContext returns a getter for the kubeconfig context name, with every
// other connection flag of getter as given (the kubeconfig files, -n,
// --user, --request-timeout, impersonation, helm's client settings, ...):
// the connection of one cluster of a fleet. getter must be the flags
// kubectl and helm both build (*genericclioptions.ConfigFlags).
func ForContext(getter genericclioptions.RESTClientGetter, name string) (genericclioptions.RESTClientGetter, error) {
	f, ok := getter.(*genericclioptions.ConfigFlags)
	if !ok {
		return nil, fmt.Errorf("this connection (%T) cannot select a kubeconfig context", getter)
	}
	// a new set of flags: each caches its own client configuration
	c := genericclioptions.NewConfigFlags(false)
	c.CacheDir, c.KubeConfig = f.CacheDir, f.KubeConfig
	c.ClusterName, c.AuthInfoName, c.Namespace, c.APIServer = f.ClusterName, f.AuthInfoName, f.Namespace, f.APIServer
	c.TLSServerName, c.Insecure, c.CertFile, c.KeyFile, c.CAFile = f.TLSServerName, f.Insecure, f.CertFile, f.KeyFile, f.CAFile
	c.BearerToken, c.Username, c.Password = f.BearerToken, f.Username, f.Password
	c.Impersonate, c.ImpersonateUID, c.ImpersonateGroup, c.ImpersonateUserExtra = f.Impersonate, f.ImpersonateUID, f.ImpersonateGroup, f.ImpersonateUserExtra
	c.Timeout, c.DisableCompression, c.ProxyURL = f.Timeout, f.DisableCompression, f.ProxyURL
	c.WrapConfigFn = f.WrapConfigFn
	c.Context = &name
	return c, nil
}

// ClusterID tells apart the clusters of a fleet's contexts: two contexts
// of one cluster (one kubeconfig entry per proxy, per user, per region
// alias) must not run one spec twice at once.
type ClusterID struct {
	// UID is the kube-system namespace's UID (what cluster registries,
	// Argo CD and Cluster API among them, take for a cluster's identity);
	// "" when it could not be read (NoUID says why).
	UID   string
	NoUID string
	// Server is the API server's URL, without credentials.
	Server string
	// CA is a digest of the certificate authority the client trusts for
	// the server ("" when it trusts the system's roots or none).
	CA string
}

// SameCluster reports whether a and b are one cluster: their kube-system
// UIDs are equal; or, when either UID could not be read, they are reached
// at one URL with one certificate authority. Two UIDs that differ are two
// clusters even at one URL (a proxy routing by credentials).
func SameCluster(a, b ClusterID) bool {
	if a.UID != "" && b.UID != "" {
		return a.UID == b.UID
	}
	return a.Server == b.Server && a.CA == b.CA
}

// String names the cluster for messages: its server, and its kube-system
// UID or why there is none.
func (id ClusterID) String() string {
	if id.UID != "" {
		return fmt.Sprintf("%s, kube-system namespace UID %s", id.Server, id.UID)
	}
	return fmt.Sprintf("%s (%s: told apart by its URL and certificate authority)", id.Server, id.NoUID)
}

// ClusterID reads the identity of the clients' cluster. kube-system
// forbidden (or missing) is not an error: the identity is then the URL and
// the certificate authority, NoUID saying why. Any other error is: the
// cluster cannot be told apart from the others.
func (c *Clients) ClusterID(ctx context.Context) (ClusterID, error) {
	id := ClusterID{Server: c.Server, CA: caDigest(c.Config)}
	ns, err := c.Typed.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	switch {
	case err == nil:
		id.UID = string(ns.UID)
	case apierrors.IsForbidden(err):
		id.NoUID = "reading namespace kube-system is forbidden"
	case apierrors.IsNotFound(err):
		id.NoUID = "it has no namespace kube-system"
	default:
		return id, fmt.Errorf("cannot tell which cluster this is (reading namespace kube-system, to tell two contexts of one cluster apart): %w", reasonError{err})
	}
	return id, nil
}

// caDigest is a digest of the certificate authority cfg trusts: its data,
// else its file's content, else its file's name.
func caDigest(cfg *rest.Config) string {
	if cfg == nil {
		return ""
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if b, err := os.ReadFile(cfg.CAFile); err == nil {
			ca = b
		} else {
			ca = []byte("file:" + cfg.CAFile)
		}
	}
	if len(ca) == 0 {
		return ""
	}
	sum := sha256.Sum256(ca)
	return hex.EncodeToString(sum[:])
}

// reasonError is an error said as Reason says it, unwrapping to itself.
type reasonError struct{ err error }

func (e reasonError) Error() string { return Reason(e.err) }
func (e reasonError) Unwrap() error { return e.err }
