//go:build integration

package kube_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"khook.io/core/kube"
	"khook.io/core/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// stallingProxy forwards TCP to the test cluster's API server until
// stalled: then it holds every byte, of the connections open and new, as a
// hung API server (or network) would.
type stallingProxy struct {
	ln      net.Listener
	target  string
	stalled chan struct{} // closed by stall
	closed  chan struct{}
	once    sync.Once
}

func newStallingProxy(t *testing.T, target string) *stallingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingProxy{ln: ln, target: target, stalled: make(chan struct{}), closed: make(chan struct{})}
	t.Cleanup(func() { close(p.closed); _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *stallingProxy) stall() { p.once.Do(func() { close(p.stalled) }) }

func (p *stallingProxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c); done <- struct{}{} }()
	go func() { p.copy(c, up); done <- struct{}{} }()
	select {
	case <-done:
	case <-p.closed:
	}
}

// copy forwards src to dst until stalled, then holds what it reads.
func (p *stallingProxy) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.stalled:
			<-p.closed
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestDiscoveryEndsWithItsContext: REST mappings (discovery requests)
// carry the caller's context, so a hung API server cannot hold a step past
// its deadline.
func TestDiscoveryEndsWithItsContext(t *testing.T) {
	cfg := testcluster.Get(t).RESTConfig(t)
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newStallingProxy(t, u.Host)
	cfg = rest.CopyConfig(cfg)
	cfg.Host = "https://" + proxy.ln.Addr().String()
	c, err := kube.NewForConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	proxy.stall()
	for name, lookup := range map[string]func(context.Context) error{
		"MappingFor": func(ctx context.Context) error {
			_, err := c.MappingFor(ctx, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
			return err
		},
		"MappingForType": func(ctx context.Context) error {
			_, err := c.MappingForType(ctx, "deploy")
			return err
		},
		"MapperFor (helm's)": func(ctx context.Context) error {
			_, err := c.MapperFor(ctx).RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1")
			return err
		},
		"DiscoveryFor (helm's)": func(ctx context.Context) error {
			_, err := c.DiscoveryFor(ctx).ServerVersion()
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			c.ResetMapper()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- lookup(ctx) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a lookup through a stalled server succeeded")
				}
				// generous: the context's 2 s, and the slack of a loaded
				// machine (before decision 242 a type resolved through
				// kubectl's builder took 53 s, helm's lookups up to 30 s)
				if took := time.Since(start); took > 15*time.Second {
					t.Errorf("the lookup ended %s after it began, its context 2s", took.Round(time.Millisecond))
				}
				t.Log(err)
			case <-time.After(2 * time.Minute):
				t.Fatal("the lookup outlived its context")
			}
		})
	}
}
