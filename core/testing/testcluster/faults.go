package testcluster

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Faults: what tests of khook's behaviour under a failing control plane
// need. Stopping the apiserver disturbs every test using the cluster: use
// these on a private cluster (Start), never on the shared one.

// IssueKubeconfig writes to path a kubeconfig for user (its certificate
// signed by the cluster's CA, valid from notBefore to notAfter, groups as
// its organizations), with one context, named context, that is also the
// current one. An expired certificate makes a kubeconfig the apiserver
// rejects (401).
func (c *Cluster) IssueKubeconfig(path, context, user string, notBefore, notAfter time.Time, groups ...string) error {
	caPEM, err := os.ReadFile(filepath.Join(c.Dir, fileCACert))
	if err != nil {
		return fmt.Errorf("read the cluster CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(c.Dir, fileCAKey))
	if err != nil {
		return fmt.Errorf("read the cluster CA key: %w", err)
	}
	ca, err := parseKeyPair(caPEM, keyPEM)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key for %s: %w", user, err)
	}
	kp, err := sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: user, Organization: groups},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}, key, ca)
	if err != nil {
		return err
	}
	data, err := kubeconfig(c.Server, caPEM, user, kp, "")
	if err != nil {
		return err
	}
	// kubeconfig names the context user@khook-test
	data = []byte(strings.ReplaceAll(string(data), user+"@"+clusterName, context))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("the cluster CA: no PEM data")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the cluster CA: %w", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the cluster CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the cluster CA key cannot sign")
	}
	return &keyPair{Cert: cert, Key: signer, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// StopAPIServer stops the cluster's kube-apiserver (SIGTERM: a graceful
// shutdown that lets requests in flight finish; SIGKILL after grace) and
// returns once the process is gone. The other components keep running and
// reconnect once StartAPIServer started it again.
func (c *Cluster) StopAPIServer(grace time.Duration) error {
	ps, err := c.apiServers()
	if err != nil {
		return err
	}
	if err := stopWave(ps, grace); err != nil {
		return err
	}
	c.forget(ps)
	return nil
}

// KillAPIServer kills the cluster's kube-apiserver (SIGKILL: requests in
// flight see their connection reset) and returns once it is gone.
func (c *Cluster) KillAPIServer(ctx context.Context) error {
	ps, err := c.apiServers()
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := p.signal(syscall.SIGKILL); err != nil {
			return err
		}
		if err := p.wait(ctx); err != nil {
			return fmt.Errorf("%s (pid %d) still running after SIGKILL: %w", p.Name, p.PID, err)
		}
	}
	c.forget(ps)
	return nil
}

// forget drops processes stopped on purpose, so that Stop does not count
// them as having died.
func (c *Cluster) forget(ps []*proc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = slices.DeleteFunc(c.procs, func(p *proc) bool { return slices.Contains(ps, p) })
}

func (c *Cluster) apiServers() ([]*proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []*proc
	for _, p := range c.procs {
		if p.Name == compAPIServer && p.alive() {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil, errors.New("no kube-apiserver running")
	}
	return ps, nil
}

// StartAPIServer starts the kube-apiserver again, with the flags and port
// of the first start, and returns once it is ready (/readyz).
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	running := slices.ContainsFunc(c.procs, func(p *proc) bool { return p.Name == compAPIServer && p.alive() })
	c.mu.Unlock()
	if running {
		return errors.New("a kube-apiserver is running already")
	}
	binDir, err := findBinDir("")
	if err != nil {
		return err
	}
	args, err := componentArgs(compAPIServer, c.Dir, c.Ports)
	if err != nil {
		return err
	}
	var launch func(func() error) error
	if c.launcher != nil {
		launch = c.launcher.run
	}
	p, err := startProc(compAPIServer, filepath.Join(binDir, compAPIServer), args, componentEnv(c.Dir),
		filepath.Join(c.LogDir, compAPIServer+".log"), c.Detached, launch)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	if err := appendPID(c.Dir, p); err != nil {
		return err
	}
	s := &starter{c: c, opts: Options{Log: c.log}, began: time.Now()}
	if s.opts.Log == nil {
		s.opts.Log = io.Discard
	}
	cfg, err := c.RESTConfigE()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-p.done:
			cancel(fmt.Errorf("%s exited during its restart (%v); last lines of its log:\n%s", compAPIServer, p.waitErr,
				logTail(filepath.Join(c.LogDir, compAPIServer+".log"), 15)))
		case <-ctx.Done():
		}
	}()
	return s.waitReadyz(ctx, cs)
}

// Outage makes the kube-apiserver unreachable for about down: it stops it
// (SIGTERM, SIGKILL after grace), keeps it stopped until down has passed
// since the stop began, and starts it again. It returns when the API
// server is ready again, with how long it was stopped. Clients see their
// requests refused from the moment it stops listening, which is at once
// for a graceful stop.
func (c *Cluster) Outage(ctx context.Context, down, grace time.Duration) (time.Duration, error) {
	began := time.Now()
	if err := c.StopAPIServer(grace); err != nil {
		return 0, err
	}
	t := time.NewTimer(time.Until(began.Add(down)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return time.Since(began), ctx.Err()
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return time.Since(began), err
	}
	return time.Since(began), nil
}
