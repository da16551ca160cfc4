package testcluster

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// Component names: also the names of their binaries and log files.
const (
	compEtcd      = "etcd"
	compAPIServer = "kube-apiserver"
	compKCM       = "kube-controller-manager"
	compScheduler = "kube-scheduler"
	compKwok      = "kwok"
)

// binaries are every binary Start needs in the bin directory.
func binaries() []string {
	return []string{compEtcd, compAPIServer, compKCM, compScheduler, compKwok}
}

// Files in the cluster directory besides pki/ (see pki.go).
const (
	fileMarker          = ".khook-testcluster" // marks a directory Start may wipe
	fileState           = "cluster.json"       // written once the cluster is ready
	filePIDs            = "pids"               // "<name> <pid> <start time>" per line, written as processes start
	fileOwner           = "owner"              // "<pid> <start time>" of the test process owning a private cluster
	fileKubeconfig      = "kubeconfig"
	fileLimitedConfig   = "limited.kubeconfig"
	fileKCMConfig       = "conf/controller-manager.kubeconfig"
	fileSchedulerConfig = "conf/scheduler.kubeconfig"
	fileKwokKubeconfig  = "conf/kwok.kubeconfig"
	fileKwokConfig      = "conf/kwok.yaml"
	dirEtcdData         = "etcd"
	dirLogs             = "logs"
)

const (
	nodeName         = "kwok-node-0"
	limitedNamespace = "khook-limited"
	podCIDR          = "10.244.0.0/16"
	// nodeIP is the node's address: the apiserver dials it for pod logs,
	// which kwok serves on loopback.
	nodeIP = "127.0.0.1"
)

func etcdArgs(dir string, p Ports) []string {
	client := "http://127.0.0.1:" + strconv.Itoa(p.EtcdClient)
	peer := "http://127.0.0.1:" + strconv.Itoa(p.EtcdPeer)
	return []string{
		"--name=khook-test",
		"--data-dir=" + filepath.Join(dir, dirEtcdData),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=khook-test=" + peer,
		"--listen-metrics-urls=http://127.0.0.1:" + strconv.Itoa(p.EtcdMetrics),
		"--quota-backend-bytes=2147483648",
		"--unsafe-no-fsync=true", // throwaway data: no fsync, much faster on slow disks
		"--snapshot-count=10000",
		"--watch-progress-notify-interval=5s",
		"--log-level=warn",
	}
}

func apiServerArgs(dir string, p Ports) []string {
	f := func(name string) string { return filepath.Join(dir, name) }
	return []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(p.EtcdClient),
		"--bind-address=127.0.0.1",
		// Must not be loopback (the `kubernetes` Endpoints reject it); it is
		// never dialed.
		"--advertise-address=" + advertiseIP,
		"--secure-port=" + strconv.Itoa(p.APIServer),
		"--tls-cert-file=" + f(fileAPIServerCert),
		"--tls-private-key-file=" + f(fileAPIServerKey),
		"--client-ca-file=" + f(fileCACert),
		"--requestheader-client-ca-file=" + f(fileFrontProxyCACert),
		"--requestheader-allowed-names=" + frontProxyUser,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + f(fileFrontProxyClientCert),
		"--proxy-client-key-file=" + f(fileFrontProxyClientKey),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f(fileSAPub),
		"--service-account-signing-key-file=" + f(fileSAKey),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
}

func kcmArgs(dir string, p Ports) []string {
	f := func(name string) string { return filepath.Join(dir, name) }
	kc := f(fileKCMConfig)
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.KCM),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + f(fileSAKey),
		"--root-ca-file=" + f(fileCACert),
		"--cluster-signing-cert-file=" + f(fileCACert),
		"--cluster-signing-key-file=" + f(fileCAKey),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--controllers=*,-nodeipam",
		// the controllers' client is not throttled (20 requests a second
		// by default, 30 at once): ten Deployments created at once would
		// otherwise become Available one after another over about two
		// seconds, the pace of the throttle, not of the controllers
		"--kube-api-qps=1000",
		"--kube-api-burst=1000",
		// a PVC created just after the PV it names, before the PV
		// controller's cache has that PV, is bound at the controller's
		// next periodic sync (15 s by default): a release with a PV and
		// its PVC took anywhere from 0.2 to 11 s to become ready
		"--pvclaimbinder-sync-period=1s",
		"--profiling=false",
		"--v=1",
	}
}

func schedulerArgs(dir string, p Ports) []string {
	kc := filepath.Join(dir, fileSchedulerConfig)
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.Scheduler),
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}
}

func kwokArgs(dir string) []string {
	return []string{
		"--kubeconfig=" + filepath.Join(dir, fileKwokKubeconfig),
		"--config=" + filepath.Join(dir, fileKwokConfig),
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip=" + nodeIP,
		"--cidr=" + podCIDR,
		"--enable-crds=ClusterLogs,Logs",
	}
}

// componentArgs returns the arguments of the named component.
func componentArgs(name, dir string, p Ports) ([]string, error) {
	switch name {
	case compEtcd:
		return etcdArgs(dir, p), nil
	case compAPIServer:
		return apiServerArgs(dir, p), nil
	case compKCM:
		return kcmArgs(dir, p), nil
	case compScheduler:
		return schedulerArgs(dir, p), nil
	case compKwok:
		return kwokArgs(dir), nil
	}
	return nil, fmt.Errorf("unknown component %q", name)
}
