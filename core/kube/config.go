package kube

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ErrNoKubeconfig means no cluster is configured at all: no kubeconfig
// file (none given, and no ~/.kube/config), or one that names no context,
// and no --server. It is the one connection error after which plan falls
// back to an offline plan.
var ErrNoKubeconfig = errors.New("no cluster configured: set KUBECONFIG, pass --kubeconfig, or write ~/.kube/config")

// MissingKubeconfigError is a kubeconfig file that was named (--kubeconfig,
// KUBECONFIG) but does not exist: a cluster was configured and cannot be
// used.
type MissingKubeconfigError struct {
	Files  []string
	Source string // "--kubeconfig" or "KUBECONFIG"
}

func (e *MissingKubeconfigError) Error() string {
	if len(e.Files) == 1 {
		return fmt.Sprintf("no cluster configured: the kubeconfig file %s (named by %s) does not exist", e.Files[0], e.Source)
	}
	return fmt.Sprintf("no cluster configured: none of the kubeconfig files named by %s exists: %s", e.Source, strings.Join(e.Files, ", "))
}

// Identity names whom the clients act as, for messages.
type Identity struct {
	// Context and User are the kubeconfig context in use and its user
	// (either may be empty: --server and --token without a kubeconfig).
	Context, User string
	// Plugin is the user's exec credential plugin (its command), if any.
	Plugin string
	// Files are the kubeconfig files read.
	Files []string
}

// credentials names the identity's credentials in a sentence.
func (id Identity) credentials() string {
	switch {
	case id.User != "" && id.Context != "":
		return fmt.Sprintf("the credentials of user %q in context %q", id.User, id.Context)
	case id.User != "":
		return fmt.Sprintf("the credentials of user %q", id.User)
	case id.Context != "":
		return fmt.Sprintf("the credentials of context %q", id.Context)
	}
	return "the credentials given"
}

// plugin names the identity's credential plugin in a sentence.
func (id Identity) plugin() string {
	s := fmt.Sprintf("the credential plugin %q", id.Plugin)
	if id.User != "" {
		s += fmt.Sprintf(" of user %q", id.User)
	}
	if id.Context != "" {
		s += fmt.Sprintf(" in context %q", id.Context)
	}
	return s
}

// loadConfig resolves the REST config getter describes, as kubectl and
// helm read it, and says precisely why it cannot be used: a named
// kubeconfig file that does not exist, a context that is not in it, a
// kubeconfig with contexts but none selected. It fails with ErrNoKubeconfig
// only when nothing is configured at all (never client-go's fallback to
// localhost:8080).
func loadConfig(getter genericclioptions.RESTClientGetter) (*rest.Config, Identity, error) {
	loader := getter.ToRawKubeConfigLoader()
	access := loader.ConfigAccess()
	files, err := kubeconfigFiles(access)
	if err != nil {
		return nil, Identity{}, err
	}
	id := Identity{Files: files}
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, id, fmt.Errorf("kubeconfig: %w", err)
	}
	var contextFlag, userFlag, serverFlag string
	if f, ok := getter.(*genericclioptions.ConfigFlags); ok {
		contextFlag, userFlag, serverFlag = deref(f.Context), deref(f.AuthInfoName), deref(f.APIServer)
	}
	id.Context = raw.CurrentContext
	if contextFlag != "" {
		id.Context = contextFlag
	}
	if id.Context != "" {
		kctx, ok := raw.Contexts[id.Context]
		if !ok {
			return nil, id, fmt.Errorf("context %q is not in the kubeconfig (%s); %s", id.Context, describeFiles(files), contextList(raw))
		}
		id.User = kctx.AuthInfo
	}
	if userFlag != "" {
		id.User = userFlag
	}
	if ai := raw.AuthInfos[id.User]; ai != nil && ai.Exec != nil {
		id.Plugin = ai.Exec.Command
	}
	cfg, err := getter.ToRESTConfig()
	if err != nil && !clientcmd.IsEmptyConfig(err) {
		return nil, id, fmt.Errorf("kubeconfig (%s): %w", describeFiles(files), err)
	}
	// an empty configuration, or clientcmd's default server: nothing
	// selected (in-cluster configuration, when possible, has a host)
	if err != nil || cfg.Host == "" || (id.Context == "" && serverFlag == "" && cfg.Host == clientcmd.ClusterDefaults.Server) {
		if id.Context == "" && len(raw.Contexts) > 0 {
			return nil, id, fmt.Errorf("the kubeconfig (%s) has no current context: name one of its contexts (%s) with the context flag, or select one with `kubectl config use-context`", describeFiles(files), strings.TrimPrefix(contextList(raw), "its contexts: "))
		}
		return nil, id, ErrNoKubeconfig
	}
	if cfg.ExecProvider != nil && id.Plugin == "" {
		id.Plugin = cfg.ExecProvider.Command
	}
	return cfg, id, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// kubeconfigFiles returns the kubeconfig files that will be read, and
// fails when the ones named explicitly (--kubeconfig, or every file of
// KUBECONFIG) do not exist. A missing ~/.kube/config is no error: nothing
// is configured. Like kubectl, some missing files of a KUBECONFIG list are
// skipped.
func kubeconfigFiles(access clientcmd.ConfigAccess) ([]string, error) {
	if access == nil {
		return nil, nil
	}
	if p := access.GetExplicitFile(); p != "" {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return nil, &MissingKubeconfigError{Files: []string{p}, Source: "--kubeconfig"}
		}
		return []string{p}, nil
	}
	var found, missing []string
	for _, p := range access.GetLoadingPrecedence() {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		} else {
			found = append(found, p)
		}
	}
	if len(found) == 0 && len(missing) > 0 && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		return nil, &MissingKubeconfigError{Files: missing, Source: clientcmd.RecommendedConfigPathEnvVar}
	}
	return found, nil
}

func describeFiles(files []string) string {
	if len(files) == 0 {
		return "no file"
	}
	return strings.Join(files, ", ")
}

func contextList(raw clientcmdapi.Config) string {
	if len(raw.Contexts) == 0 {
		return "it has no contexts"
	}
	names := make([]string, 0, len(raw.Contexts))
	for n := range raw.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	return "its contexts: " + strings.Join(names, ", ")
}

// expiredClientCert returns when cfg's client certificate expired, if it
// did.
func expiredClientCert(cfg *rest.Config, now time.Time) (time.Time, bool) {
	data := cfg.CertData
	if len(data) == 0 && cfg.CertFile != "" {
		var err error
		if data, err = os.ReadFile(cfg.CertFile); err != nil {
			return time.Time{}, false
		}
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return time.Time{}, false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !now.After(cert.NotAfter) {
		return time.Time{}, false
	}
	return cert.NotAfter, true
}
