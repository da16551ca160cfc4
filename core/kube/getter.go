package kube

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// configGetter is a RESTClientGetter over a ready REST config, for clients
// built without flags (tests, and libraries such as helm's action package
// that take a getter).
type configGetter struct {
	cfg    *rest.Config
	disco  discovery.CachedDiscoveryInterface
	mapper meta.RESTMapper
}

func (g *configGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *configGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.disco, nil
}

func (g *configGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.mapper, nil }

func (g *configGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["khook"] = &clientcmdapi.Cluster{Server: g.cfg.Host}
	cfg.Contexts["khook"] = &clientcmdapi.Context{Cluster: "khook", Namespace: "default"}
	cfg.CurrentContext = "khook"
	return clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{})
}
