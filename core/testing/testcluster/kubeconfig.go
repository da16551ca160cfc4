package testcluster

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const clusterName = "khook-test"

// kubeconfig renders a self-contained kubeconfig (CA and client certificate
// embedded) for one identity, with one context that is also the current one.
// namespace may be empty.
func kubeconfig(server string, caPEM []byte, user string, client *keyPair, namespace string) ([]byte, error) {
	ctxName := user + "@" + clusterName
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = ctxName
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig for %s: %w", user, err)
	}
	return data, nil
}

// writeKubeconfig writes kubeconfig(...) to path, readable by the owner only
// (it holds a private key).
func writeKubeconfig(path, server string, caPEM []byte, user string, client *keyPair, namespace string) error {
	data, err := kubeconfig(server, caPEM, user, client, namespace)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
