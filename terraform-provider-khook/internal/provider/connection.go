package provider

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// connection is the kubernetes block's values, all known.
type connection struct {
	Host, Token, ClusterCA, ClientCert, ClientKey string
	ConfigPath, ConfigContext                     string
	Exec                                          *execConfig
}

// execConfig is a credential plugin (the kubernetes block's exec block).
type execConfig struct {
	APIVersion, Command string
	Args                []string
	Env                 map[string]string
}

// clientConfig is the connection as kubectl's loader builds one: the
// kubeconfig at config_path (and its context config_context), or none,
// with the block's other attributes overriding it, as the kubernetes and
// helm providers do. Without config_path no kubeconfig is read (neither
// KUBECONFIG nor ~/.kube/config: what Terraform applies does not depend
// on the machine's environment).
func (c connection) clientConfig() clientcmd.ClientConfig {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.ConfigPath}
	over := &clientcmd.ConfigOverrides{CurrentContext: c.ConfigContext}
	over.ClusterInfo.Server = c.Host
	if c.ClusterCA != "" {
		over.ClusterInfo.CertificateAuthorityData = []byte(c.ClusterCA)
	}
	over.AuthInfo.Token = c.Token
	if c.ClientCert != "" {
		over.AuthInfo.ClientCertificateData = []byte(c.ClientCert)
	}
	if c.ClientKey != "" {
		over.AuthInfo.ClientKeyData = []byte(c.ClientKey)
	}
	if c.Exec != nil {
		ex := &clientcmdapi.ExecConfig{APIVersion: c.Exec.APIVersion, Command: c.Exec.Command, Args: c.Exec.Args, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		for k, v := range c.Exec.Env {
			ex.Env = append(ex.Env, clientcmdapi.ExecEnvVar{Name: k, Value: v})
		}
		over.AuthInfo.Exec = ex
	}
	if c.ConfigPath == "" {
		return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), over)
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over)
}

// getter is a RESTClientGetter (cli-runtime) of a clientcmd config, with
// discovery cached in memory for the provider call.
type getter struct {
	config clientcmd.ClientConfig
	disco  discovery.CachedDiscoveryInterface
	mapper meta.RESTMapper
}

func newGetter(c connection) *getter { return &getter{config: c.clientConfig()} }

func (g *getter) ToRESTConfig() (*rest.Config, error) { return g.config.ClientConfig() }

func (g *getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	if g.disco != nil {
		return g.disco, nil
	}
	cfg, err := g.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	g.disco = memory.NewMemCacheClient(dc)
	return g.disco, nil
}

func (g *getter) ToRESTMapper() (meta.RESTMapper, error) {
	if g.mapper != nil {
		return g.mapper, nil
	}
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	m := restmapper.NewDeferredDiscoveryRESTMapper(dc)
	g.mapper = restmapper.NewShortcutExpander(m, dc, nil)
	return g.mapper, nil
}

func (g *getter) ToRawKubeConfigLoader() clientcmd.ClientConfig { return g.config }
