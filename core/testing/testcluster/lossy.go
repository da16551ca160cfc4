package testcluster

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// LossyLink is a link to the cluster's API server that loses answers:
// an HTTP proxy on loopback that forwards each request to the API server
// and, with a given probability (and seed), cuts the client's connection
// once the API server has answered, before the answer reaches the client.
// What a flaky VPN, a NAT timeout or a load balancer resetting connections
// does to a client: the request reached the server and took effect (a
// write landed), the client saw its connection break.
//
// It is HTTP-aware, not a TCP proxy, so that a cut loses exactly one
// answer: it terminates TLS (its certificate is signed by the cluster's
// CA, for 127.0.0.1) and offers HTTP/1.1 only, so the client sends one
// request per connection at a time (an HTTP/2 client multiplexes its
// requests on one connection, and cutting it would lose the answers of
// requests the server has not yet seen along with the one meant). The
// proxy talks to the API server as the cluster's admin; a client that
// presents another certificate of the cluster's CA is impersonated
// (Impersonate-User and -Group from its subject).
//
// It can also cut the answer of the next request a rule matches (CutNext)
// and hold matching requests back for a while before forwarding them
// (Hold): a request whose client gave up meanwhile is dropped, never
// forwarded.
type LossyLink struct {
	// URL is the link's address (https://127.0.0.1:PORT); Kubeconfig an
	// admin kubeconfig that talks through it.
	URL        string
	Kubeconfig string

	srv      *http.Server
	ln       net.Listener
	upstream *url.URL
	rt       *http.Transport
	admin    string // the admin's user name: not impersonated

	mu    sync.Mutex
	loss  float64
	rng   *rand.Rand
	match func(*http.Request) bool
	next  []func(*http.Request) bool
	holds []*hold
	n     LossyCounts
}

// LossyOptions configure a LossyLink.
type LossyOptions struct {
	// Loss is the probability that an answer is cut (0 to 1).
	Loss float64
	// Seed seeds the draws.
	Seed uint64
	// Match, when set, limits the random cuts to the requests it accepts.
	Match func(*http.Request) bool
}

// LossyCounts is what a LossyLink did.
type LossyCounts struct {
	// Requests forwarded to the API server (held ones included).
	Requests int
	// Cut answers: every one, and those of writes (POST, PUT, PATCH,
	// DELETE).
	Cut, CutWrites int
	// Held requests, and those of them dropped because the client gave
	// up before they were forwarded.
	Held, Dropped int
}

func (n LossyCounts) String() string {
	return fmt.Sprintf("%d requests forwarded, %d answers cut (%d of writes), %d requests held (%d dropped: their client gave up)",
		n.Requests, n.Cut, n.CutWrites, n.Held, n.Dropped)
}

type hold struct {
	match    func(*http.Request) bool
	d        time.Duration
	released chan struct{}
}

// LossyLink starts a lossy link to the cluster's API server, writing its
// kubeconfig into dir. Close stops it.
func (c *Cluster) LossyLink(dir string, opts LossyOptions) (*LossyLink, error) {
	caPEM, err := os.ReadFile(filepath.Join(c.Dir, fileCACert))
	if err != nil {
		return nil, fmt.Errorf("lossy link: read the cluster CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(c.Dir, fileCAKey))
	if err != nil {
		return nil, fmt.Errorf("lossy link: read the cluster CA key: %w", err)
	}
	ca, err := parseKeyPair(caPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("lossy link: %w", err)
	}
	serving, err := newLeaf(ca, pkix.Name{CommonName: "khook-lossy-link"}, x509.ExtKeyUsageServerAuth, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		return nil, fmt.Errorf("lossy link: %w", err)
	}
	cert, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("lossy link: %w", err)
	}
	raw, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("lossy link: %w", err)
	}
	kctx := raw.Contexts[raw.CurrentContext]
	if kctx == nil || raw.AuthInfos[kctx.AuthInfo] == nil || raw.Clusters[kctx.Cluster] == nil {
		return nil, fmt.Errorf("lossy link: the admin kubeconfig %s has no current context", c.Kubeconfig)
	}
	ai := raw.AuthInfos[kctx.AuthInfo]
	adminCert, err := tls.X509KeyPair(ai.ClientCertificateData, ai.ClientKeyData)
	if err != nil {
		return nil, fmt.Errorf("lossy link: the admin's certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	upstream, err := url.Parse(c.Server)
	if err != nil {
		return nil, fmt.Errorf("lossy link: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lossy link: %w", err)
	}
	l := &LossyLink{
		URL:      "https://" + ln.Addr().String(),
		ln:       ln,
		upstream: upstream,
		rt: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{adminCert}, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   true,
			MaxIdleConnsPerHost: 100,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
		admin: kctx.AuthInfo,
		loss:  opts.Loss,
		rng:   rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		match: opts.Match,
	}
	if leaf, err := x509.ParseCertificate(adminCert.Certificate[0]); err == nil {
		l.admin = leaf.Subject.CommonName
	}
	raw.Clusters[kctx.Cluster].Server = l.URL
	l.Kubeconfig = filepath.Join(dir, "lossy.kubeconfig")
	if err := clientcmd.WriteToFile(*raw, l.Kubeconfig); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("lossy link: %w", err)
	}
	l.srv = &http.Server{
		Handler: l,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			NextProtos:   []string{"http/1.1"}, // one request per connection at a time
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    pool,
			MinVersion:   tls.VersionTLS12,
		},
		ErrorLog:          log.New(io.Discard, "", 0), // the cuts' handshake noise
		ReadHeaderTimeout: time.Minute,
	}
	// no HTTP/2: TLSNextProto set to an empty map turns it off
	l.srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	go func() { _ = l.srv.ServeTLS(ln, "", "") }()
	return l, nil
}

// Close stops the link, cutting the connections through it.
func (l *LossyLink) Close() error {
	err := l.srv.Close()
	l.rt.CloseIdleConnections()
	return err
}

// SetLoss changes the probability that an answer is cut.
func (l *LossyLink) SetLoss(p float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loss = p
}

// CutNext cuts the answer of the next request match accepts, whatever the
// loss.
func (l *LossyLink) CutNext(match func(*http.Request) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next = append(l.next, match)
}

// Hold holds the requests match accepts for d before forwarding them,
// until release is called (the requests held then are forwarded at once).
// A held request whose client gives up (closes its connection) is never
// forwarded.
func (l *LossyLink) Hold(match func(*http.Request) bool, d time.Duration) (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := &hold{match: match, d: d, released: make(chan struct{})}
	l.holds = append(l.holds, h)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			for i, x := range l.holds {
				if x == h {
					l.holds = append(l.holds[:i:i], l.holds[i+1:]...)
					break
				}
			}
			close(h.released)
		})
	}
}

// Counts is what the link did so far.
func (l *LossyLink) Counts() LossyCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// WriteTo matches the writes (POST, PUT, PATCH, DELETE) whose path ends
// with suffix: a rule for CutNext and Hold.
func WriteTo(suffix string) func(*http.Request) bool {
	return func(r *http.Request) bool { return isWrite(r.Method) && strings.HasSuffix(r.URL.Path, suffix) }
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// holdFor is the hold of r, nil when it is not held.
func (l *LossyLink) holdFor(r *http.Request) *hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.holds {
		if h.match(r) {
			l.n.Held++
			return h
		}
	}
	return nil
}

// cut decides whether r's answer is cut.
func (l *LossyLink) cut(r *http.Request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n.Requests++
	cut := false
	for i, m := range l.next {
		if m(r) {
			l.next = append(l.next[:i:i], l.next[i+1:]...)
			cut = true
			break
		}
	}
	if !cut && l.loss > 0 && (l.match == nil || l.match(r)) {
		cut = l.rng.Float64() < l.loss
	}
	if cut {
		l.n.Cut++
		if isWrite(r.Method) {
			l.n.CutWrites++
		}
	}
	return cut
}

// hopHeaders are not forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (l *LossyLink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "" {
		http.Error(w, "the lossy link forwards no upgraded connections (exec, attach, port-forward)", http.StatusNotImplemented)
		return
	}
	// the whole request first: the server notices a client that gives up
	// only once it has read the body
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if h := l.holdFor(r); h != nil {
		t := time.NewTimer(h.d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-h.released:
		case <-r.Context().Done():
		}
		if r.Context().Err() != nil {
			l.mu.Lock()
			l.n.Dropped++
			l.mu.Unlock()
			// never answered: returning would have the server write an
			// empty 200, which a client still reading would take for
			// the answer ("0-length response with status code: 200")
			panic(http.ErrAbortHandler)
		}
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = l.upstream.Scheme, l.upstream.Host, l.upstream.Host
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	if len(body) == 0 {
		out.Body = http.NoBody
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	for _, h := range []string{"Impersonate-User", "Impersonate-Group", "Impersonate-Uid"} {
		out.Header.Del(h)
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		if sub := r.TLS.PeerCertificates[0].Subject; sub.CommonName != l.admin {
			out.Header.Set("Impersonate-User", sub.CommonName)
			for _, g := range sub.Organization {
				out.Header.Add("Impersonate-Group", g)
			}
		}
	}
	resp, err := l.rt.RoundTrip(out)
	if err != nil {
		l.kill(w)
		return
	}
	defer resp.Body.Close()
	if l.cut(r) {
		l.kill(w)
		return
	}
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush() // watches and logs arrive as they come
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				l.kill(w) // the API server's answer broke: so does the client's
			}
			return
		}
	}
}

// kill resets the client's connection (TCP RST), as a load balancer that
// drops it does.
func (l *LossyLink) kill(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // the server closes the connection
	}
	var tcp *net.TCPConn
	switch c := conn.(type) {
	case *tls.Conn:
		tcp, _ = c.NetConn().(*net.TCPConn)
	case *net.TCPConn:
		tcp = c
	}
	if tcp != nil {
		_ = tcp.SetLinger(0)
		_ = tcp.Close()
		return
	}
	_ = conn.Close()
}
