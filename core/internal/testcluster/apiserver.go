package testcluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// StopAPIServer stops the cluster's kube-apiserver (SIGTERM, then SIGKILL
// after a grace period) and returns once it is gone; etcd and the other
// components keep running. With StartAPIServer it makes an API outage for
// tests of how clients recover. Only a cluster this process started (Start,
// not Load) can be stopped and started again, and since every client of
// the cluster loses it meanwhile, only a test's own cluster should be.
func (c *Cluster) StopAPIServer() error {
	p, err := c.apiserver()
	if err != nil {
		return err
	}
	return stopWave([]*proc{p}, 5*time.Second)
}

// StartAPIServer starts the kube-apiserver stopped by StopAPIServer again,
// with the same binary, flags and port, and returns once /readyz answers.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	old, err := c.apiserver()
	if err != nil {
		return err
	}
	if old.alive() {
		return errors.New("kube-apiserver is running: stop it first")
	}
	var launch func(func() error) error
	if c.launcher != nil {
		launch = c.launcher.run
	}
	p, err := startProc(compAPIServer, old.cmd.Path, old.cmd.Args[1:], old.cmd.Env,
		filepath.Join(c.LogDir, compAPIServer+".log"), c.Detached, launch)
	if err != nil {
		return err
	}
	c.mu.Lock()
	for i := range c.procs {
		if c.procs[i] == old {
			c.procs[i] = p
		}
	}
	c.mu.Unlock()
	if err := appendPID(c.Dir, p); err != nil {
		return err
	}
	var exited error
	err = poll(ctx, 50*time.Millisecond, "kube-apiserver /readyz", func(ctx context.Context) bool {
		if !p.alive() {
			logPath := filepath.Join(c.LogDir, compAPIServer+".log")
			exited = fmt.Errorf("kube-apiserver exited on restart (%v); last lines of %s:\n%s", p.waitErr, logPath, logTail(logPath, 15))
			return true
		}
		return c.Healthy(ctx) == nil
	})
	if exited != nil {
		return exited
	}
	return err
}

// apiserver is the kube-apiserver process, when this process started it.
func (c *Cluster) apiserver() (*proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, errors.New("cluster stopped")
	}
	for _, p := range c.procs {
		if p.Name == compAPIServer {
			if p.cmd == nil {
				return nil, errors.New("kube-apiserver was not started by this process: only a cluster from Start can stop and start it")
			}
			return p, nil
		}
	}
	return nil, errors.New("no kube-apiserver process recorded")
}
