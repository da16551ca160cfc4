package testcluster

import (
	"fmt"
	"net"
)

// Ports are the loopback TCP ports of one cluster, all picked at start so
// that two clusters on one machine never collide. kwok opens no port of its
// own (no node port, no server address in its configuration).
type Ports struct {
	EtcdClient  int `json:"etcdClient"`
	EtcdPeer    int `json:"etcdPeer"`
	EtcdMetrics int `json:"etcdMetrics"`
	APIServer   int `json:"apiServer"`
	KCM         int `json:"controllerManager"`
	Scheduler   int `json:"scheduler"`
	Kwok        int `json:"kwok"` // kwok's kubelet API (pod logs)
}

// pickPorts asks the kernel for free loopback ports: it listens on
// 127.0.0.1:0 once per port, keeping every listener open until all are
// picked so the ports are distinct, then closes them for the components to
// bind. Another process could take a port in between; Start retries with new
// ports when a component reports that its address is in use.
func pickPorts() (Ports, error) {
	var p Ports
	dst := []*int{&p.EtcdClient, &p.EtcdPeer, &p.EtcdMetrics, &p.APIServer, &p.KCM, &p.Scheduler, &p.Kwok}
	got, err := freePorts(len(dst))
	if err != nil {
		return p, err
	}
	for i, d := range dst {
		*d = got[i]
	}
	return p, nil
}

func freePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
