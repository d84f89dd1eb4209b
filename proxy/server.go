package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// Timeouts bound every wait, so a slow or silent peer costs a goroutine
// for a while, not forever. Zero fields take the defaults.
type Timeouts struct {
	// Handshake bounds the sandbox's TLS handshake in a tunnel.
	Handshake time.Duration
	// ReadHeader bounds reading a request's headers, and reading the
	// part of its body a rule checks (policy.MaxBodyCheck at most).
	ReadHeader time.Duration
	// Idle closes keep-alive connections and passthrough tunnels with no
	// traffic for this long.
	Idle time.Duration
	// Dial bounds connecting (and TLS to) an upstream.
	Dial time.Duration
	// ResponseHeader bounds waiting for an upstream's response headers.
	ResponseHeader time.Duration
	// Shutdown bounds draining in-flight requests on shutdown.
	Shutdown time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Handshake, 10*time.Second)
	def(&t.ReadHeader, 10*time.Second)
	def(&t.Idle, 90*time.Second)
	def(&t.Dial, 10*time.Second)
	def(&t.ResponseHeader, 60*time.Second)
	def(&t.Shutdown, 25*time.Second)
	return t
}

// Options configure a Server. Only ConfigPath is required.
type Options struct {
	// ConfigPath is the proxy config file; it is re-read when it changes.
	ConfigPath string
	// SecretsDir, CACert and CAKey override the config's values; when
	// both are empty the config package's defaults apply.
	SecretsDir    string
	CACert, CAKey string
	// Resolve maps "host:port" to the "addr:port" to dial instead, like
	// curl's --resolve. Keys are lowercase.
	Resolve map[string]string
	// UpstreamRoots verifies upstream TLS; nil means the system roots.
	UpstreamRoots *x509.CertPool
	// MaxTunnels caps concurrent CONNECT tunnels; 0 means
	// DefaultMaxTunnels.
	MaxTunnels int
	// MaxProxyConns caps the connections open on the proxy listener
	// that are not tunnels (reading a request, or idle between two);
	// more wait to be accepted. 0 means DefaultMaxProxyConns.
	MaxProxyConns int
	// MaxAdminConns caps the connections open on the admin listener, as
	// MaxProxyConns does the proxy's; 0 means DefaultMaxAdminConns.
	MaxAdminConns int
	// MaxBodyChecks caps the request bodies read at once for a rule to
	// check, each up to policy.MaxBodyCheck in memory; 0 means 16.
	MaxBodyChecks int
	// ReloadInterval is how often the config and CA files are checked for
	// changes; 0 means 2s.
	ReloadInterval time.Duration
	// CASwitchDelay is how long a renewed CA waits before it signs new
	// leaves, while the previous one, still valid past the delay, goes on
	// signing them: the time the renewed CA takes to reach the sandboxes'
	// trust bundles (docs/render.md, "When the CA is renewed"). 0 switches
	// at once.
	CASwitchDelay time.Duration
	// Timeouts bound every wait; zero fields take the defaults.
	Timeouts Timeouts
	// Logger receives one JSON line per request and reload events; nil
	// discards them.
	Logger *slog.Logger
	// StateFile, when set, is where the proxy keeps the refresh tokens
	// an authorization server rotated, to read them back after a
	// restart: a file in a volume of the proxy's own, which it alone
	// reads. Empty keeps them in memory for the proxy's life.
	StateFile string
	// RequestLog, when set, receives the request lines instead of
	// Logger, written directly in exactly the form
	// slog.NewJSONHandler(RequestLog, nil) would give them: the same
	// keys, order and escaping, at a fraction of the cost per request.
	// Other events still go to Logger.
	RequestLog io.Writer
	// OTLPLogs, when set, also sends the request lines to an
	// OpenTelemetry collector (otlp.go).
	OTLPLogs *OTLPConfig
}

// The default caps on what a sandbox holds open. Each tunnel can be made
// to hold some 170 KiB of the proxy's heap (a long response asked for and
// not read, after a ClientHello near maxClientHello) and each other
// connection some 80 KiB (most of a 64 KiB header): at these caps about
// 125 MiB, within the rendered sidecar's 256 MiB limit, where 1024
// tunnels were 212 MiB. TestServerTunnelMemory measures them.
const (
	DefaultMaxTunnels    = 512
	DefaultMaxProxyConns = 512
	// DefaultMaxAdminConns is enough for the kubelet's probes and a few
	// scrapers: at most some 5 MiB of stalled headers.
	DefaultMaxAdminConns = 64
)

// maxHeaderBytes bounds a request header on every listener.
const maxHeaderBytes = 64 << 10

// Server is the egress proxy. Create it with New, run it with Run.
type Server struct {
	opts    Options
	log     *slog.Logger
	reqLog  *requestLog // nil: request lines go through log
	otlp    *otlpExporter
	metrics *metrics

	state atomic.Pointer[state]
	ca    atomic.Pointer[caState]
	// renewed is a CA read from the files that waits CASwitchDelay,
	// since renewedAt, to replace ca; only loadCA touches them.
	renewed   *caState
	renewedAt time.Time

	leaves   *leafCache      // reached only through interception.leaf
	upstream *http.Transport // TLS to injected hosts
	mint     *minter         // tokens minted for GitHub App injections
	oauth    *oauthMinter    // tokens obtained for OAuth 2.0 and Google injections
	plain    *http.Transport // http:// to passthrough hosts
	tunnels  chan struct{}   // semaphore of open tunnels
	// bodyChecks is a semaphore of request bodies being read for a rule
	// to check, so that stalled ones cannot hold the memory of one
	// buffer per tunnel.
	bodyChecks chan struct{}
	// forwardTLS and forwardPlain send a decided request to r.Host, which
	// the handler has set to the decision's canonical host. They never
	// follow redirects: every response goes back as is.
	forwardTLS, forwardPlain *forwarder
	// forwardH2 sends the streams of the sandbox's HTTP/2 connections,
	// over h2up (h2.go).
	forwardH2 *forwarder
	h2up      *h2Upstream
	// h2Streams is a semaphore of the HTTP/2 streams being served, all
	// tunnels together (h2.go).
	h2Streams chan struct{}
	draining  atomic.Bool
	// origDst reads a redirected connection's original destination;
	// tests replace it, as only a real nat redirect gives one.
	origDst origDstFunc

	inner   *http.Server
	innerLn *connListener
	// innerH2 serves the tunnels whose sandbox selected h2 in ALPN,
	// HTTP/2 alone (h2.go).
	innerH2   *http.Server
	innerH2Ln *connListener
	// tunnelTLS is shared by every intercepted tunnel so that clients can
	// resume TLS sessions (Go rotates the ticket keys itself); the leaf
	// comes from the hostConn each handshake runs on.
	tunnelTLS *tls.Config

	passMu     sync.Mutex
	passConns  map[net.Conn]string // both ends of each passthrough tunnel → its host
	passWG     sync.WaitGroup
	passClosed bool // set on shutdown: no new splices after passWG.Wait starts
}

// state is one loaded config; replaced whole on reload.
type state struct {
	raw     []byte
	cfg     *config.Config
	policy  *policy.Policy
	secrets SecretDir
	caCert  string
	caKey   string
}

type caState struct {
	certRaw, keyRaw []byte
	ca              *CA
}

// New loads the config and, when the config injects any host, the CA. A
// config or CA that cannot be loaded is an error: the proxy does not start
// half-configured.
func New(opts Options) (*Server, error) {
	if opts.ConfigPath == "" {
		return nil, fmt.Errorf("%w: no config file given", config.ErrRead)
	}
	opts.Timeouts = opts.Timeouts.withDefaults()
	if opts.MaxTunnels <= 0 {
		opts.MaxTunnels = DefaultMaxTunnels
	}
	if opts.MaxProxyConns <= 0 {
		opts.MaxProxyConns = DefaultMaxProxyConns
	}
	if opts.MaxAdminConns <= 0 {
		opts.MaxAdminConns = DefaultMaxAdminConns
	}
	if opts.MaxBodyChecks <= 0 {
		opts.MaxBodyChecks = 16
	}
	if opts.ReloadInterval <= 0 {
		opts.ReloadInterval = 2 * time.Second
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts:       opts,
		log:        logger,
		metrics:    newMetrics(),
		tunnels:    make(chan struct{}, opts.MaxTunnels),
		bodyChecks: make(chan struct{}, opts.MaxBodyChecks),
		passConns:  map[net.Conn]string{},
		origDst:    originalDst,
	}
	if opts.RequestLog != nil {
		s.reqLog = newRequestLog(opts.RequestLog)
	}
	if opts.OTLPLogs != nil {
		s.otlp = newOTLPExporter(*opts.OTLPLogs, logger.Warn)
		s.metrics.otlp = s.otlp.counts
	}
	s.leaves = newLeafCache(func() { s.metrics.mints.Add(1) })
	st, err := s.loadConfig(nil)
	if err != nil {
		return nil, err
	}
	s.state.Store(st)
	if err := s.loadCA(st); err != nil && len(st.cfg.Hosts) > 0 {
		return nil, err
	}
	upTLS := &tls.Config{RootCAs: opts.UpstreamRoots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	s.upstream = s.newTransport(upTLS)
	s.plain = s.newTransport(nil)
	s.mint = newMinter(&http.Client{Transport: s.upstream, Timeout: mintTimeout}, s.metrics.tokenMint)
	refresh, err := newRefreshStore(opts.StateFile)
	if err != nil {
		s.log.Warn("state file not read; the Secrets' refresh tokens are used", "error", logText(err.Error()))
	}
	s.oauth = newOAuthMinter(&http.Client{Transport: s.upstream, Timeout: mintTimeout}, s.metrics.tokenMint, refresh, s.log.Warn)
	s.forwardTLS = newForwarder("https", timedTransport{rt: s.upstream, m: s.metrics}, s.upstreamError)
	s.forwardTLS.pool = &upPool{
		dial: s.dial, tls: upTLS,
		dialWait: opts.Timeouts.Dial, respWait: opts.Timeouts.ResponseHeader, idle: opts.Timeouts.Idle,
		perHost: 128,
	}
	s.forwardTLS.observe = s.metrics.observeUpstream
	s.forwardTLS.onScrub = s.upstreamScrubbed
	s.forwardPlain = newForwarder("http", s.plain, s.upstreamError)
	s.forwardTLS.stall, s.forwardPlain.stall = opts.Timeouts.Idle, opts.Timeouts.Idle
	s.innerLn = newConnListener()
	s.tunnelTLS = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// setupH2 adds h2.
		NextProtos:     []string{"http/1.1"},
		GetCertificate: s.leafFor,
	}
	s.inner = &http.Server{
		Handler: http.HandlerFunc(s.serveTunnelRequest),
		// OPTIONS * goes to the handler, to be decided, logged and
		// counted like any request, not answered 200 by net/http.
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            opts.Timeouts.ReadHeader,
		IdleTimeout:                  opts.Timeouts.Idle,
		// Writes to the sandbox wait at most this long from each
		// request's header on (the forwarder extends it as a long
		// response flows): a sandbox that pipelines requests and reads
		// none of the answers would otherwise hold the tunnel forever,
		// blocked on a refusal or on the last bytes net/http flushes
		// after the handler returned.
		WriteTimeout:   opts.Timeouts.Idle,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, tunnelKey{}, c)
		},
	}
	s.setupH2(upTLS)
	return s, nil
}

func (s *Server) newTransport(tlsConf *tls.Config) *http.Transport {
	t := s.opts.Timeouts
	return &http.Transport{
		Proxy:                 nil, // never honour HTTPS_PROXY from our own environment
		DialContext:           s.dial,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   t.Dial,
		ResponseHeaderTimeout: t.ResponseHeader,
		IdleConnTimeout:       t.Idle,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   128,
		ForceAttemptHTTP2:     false,
		// The sandbox negotiates content encoding with the upstream; the
		// proxy neither asks for gzip itself nor decodes what comes back.
		DisableCompression: true,
		// A non-nil empty map turns HTTP/2 off: upstreams get HTTP/1.1.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
}

// dial connects to addr, or to what --resolve maps it to. It refuses an
// internal address (policy.DecideDial) unless the config lists the host
// in internalHosts, deciding on the address it is about to connect to,
// after resolution, so a name that resolves to one only at dial time
// (DNS rebinding) is refused too. An address --resolve gives literally
// is the operator's own choice and is dialled as given; a name it gives
// is resolved and checked like any other. The error of a refusal is a
// *dialRefusedError.
//
// A name is dialled as a fully qualified one (with a trailing dot), so
// the resolver asks for it alone, one question per address family, and
// never for the name under the pod's search domains first: with
// Kubernetes' ndots:5, pass.example would otherwise be asked as
// pass.example.<namespace>.svc.cluster.local, and any Service of the
// cluster spelling it would answer before the real name.
func (s *Server) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	// The host as decisions name it: port 443 dropped, another kept.
	host := strings.TrimSuffix(addr, ":443")
	guard := true
	if to, ok := s.opts.Resolve[strings.ToLower(addr)]; ok {
		addr = to
		if h, _, err := net.SplitHostPort(to); err == nil {
			_, err := netip.ParseAddr(h)
			guard = err != nil
		}
	}
	st := s.state.Load()
	if st.cfg.UpstreamProxy != nil {
		if c, direct, err := s.dialUpstream(ctx, st, host, addr, guard); !direct {
			return c, err
		}
	}
	addr = rooted(addr)
	d := net.Dialer{Timeout: s.opts.Timeouts.Dial, KeepAlive: 30 * time.Second}
	if guard {
		p := st.policy
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			dec, class := p.DecideDial(host, ap.Addr())
			if err != nil || !dec.Allowed() {
				return &dialRefusedError{d: dec, class: class}
			}
			return nil
		}
	}
	return d.DialContext(ctx, network, addr)
}

// rooted returns addr ("host:port") with its host written as a fully
// qualified name: a trailing dot added to a name of two labels or more
// that lacks one. An address literal is left as it is, and so is a
// single label (localhost, a name --resolve gives), which only the hosts
// file or the search list can mean, and which Go's reader of the hosts
// file matches only as written.
func rooted(addr string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil || !strings.Contains(h, ".") || strings.HasSuffix(h, ".") {
		return addr
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return addr
	}
	return net.JoinHostPort(h+".", port)
}

// dialRefusedError is a dial the proxy refused: the address it resolved
// to is internal, and the config does not let the host reach one.
type dialRefusedError struct {
	d     policy.Decision
	class policy.AddrClass
	// cause, when set, is why the upstream proxy failed the dial
	// (upstream.go); class is then meaningless.
	cause string
}

func (e *dialRefusedError) Error() string { return e.d.Message }

// refusedDial returns the refusal inside err, if it is one.
func refusedDial(err error) (*dialRefusedError, bool) {
	var e *dialRefusedError
	ok := errors.As(err, &e)
	return e, ok
}

// dialRefused logs and counts a refused dial.
func (s *Server) dialRefused(e *dialRefusedError) {
	if e.cause != "" {
		s.log.Warn("upstream proxy failed", "host", e.d.Host, "cause", e.cause, "message", e.d.Message)
		return
	}
	s.metrics.dialRefused(e.d.Host, e.class)
	s.log.Warn("upstream address refused", "host", e.d.Host, "class", string(e.class), "message", e.d.Message)
}

func (s *Server) loadConfig(prev *state) (*state, error) {
	f, err := os.Open(s.opts.ConfigPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", config.ErrRead, err)
	}
	raw, err := io.ReadAll(io.LimitReader(f, config.MaxFileSize+1))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", config.ErrRead, s.opts.ConfigPath, err)
	}
	if prev != nil && bytes.Equal(raw, prev.raw) {
		return prev, nil
	}
	if len(raw) > config.MaxFileSize {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", config.ErrRead, s.opts.ConfigPath, config.MaxFileSize)
	}
	cfg, err := config.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.opts.ConfigPath, err)
	}
	p, err := policy.NewPolicy(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.opts.ConfigPath, err)
	}
	st := &state{raw: raw, cfg: cfg, policy: p}
	// A reload keeps the Secret cache when the directory is the same: its
	// inotify instance is per user on the node (128 by default, shared by
	// every proxy running as the same user), so one per config change
	// would spend them until a GC closed the old ones.
	if dir := firstOf(s.opts.SecretsDir, cfg.SecretsDir, config.DefaultSecretsDir); prev != nil && prev.secrets.Dir == dir {
		st.secrets = prev.secrets
	} else {
		st.secrets = NewSecretDir(dir)
	}
	st.caCert = firstOf(s.opts.CACert, cfg.CA.CertFile, config.DefaultCACert)
	st.caKey = firstOf(s.opts.CAKey, cfg.CA.KeyFile, config.DefaultCAKey)
	return st, nil
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// loadCA reads the CA files named by st and installs them when they
// changed. On error the previous CA stays.
func (s *Server) loadCA(st *state) error {
	certRaw, err := os.ReadFile(st.caCert)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCA, err)
	}
	keyRaw, err := os.ReadFile(st.caKey)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCA, err)
	}
	cur := s.ca.Load()
	if cur != nil && bytes.Equal(cur.certRaw, certRaw) && bytes.Equal(cur.keyRaw, keyRaw) {
		s.renewed = nil // back to the CA in use before the delay ran out
		return nil
	}
	if r := s.renewed; r != nil && bytes.Equal(r.certRaw, certRaw) && bytes.Equal(r.keyRaw, keyRaw) {
		if now := time.Now(); now.Sub(s.renewedAt) >= s.opts.CASwitchDelay || !cur.ca.cert.NotAfter.After(now) {
			s.ca.Store(r)
			s.renewed = nil
		}
		return nil
	}
	ca, err := ParseCA(certRaw, keyRaw)
	if err != nil {
		return fmt.Errorf("%s: %w", st.caCert, err)
	}
	next := &caState{certRaw: certRaw, keyRaw: keyRaw, ca: ca}
	if now := time.Now(); cur != nil && s.opts.CASwitchDelay > 0 && cur.ca.cert.NotAfter.After(now.Add(s.opts.CASwitchDelay)) {
		s.renewed, s.renewedAt = next, now
		return nil
	}
	s.ca.Store(next)
	s.renewed = nil
	return nil
}

// reload re-reads the config and CA; a bad new file keeps the old one.
func (s *Server) reload() {
	prev := s.state.Load()
	st, err := s.loadConfig(prev)
	switch {
	case err != nil:
		s.metrics.reload("config", err)
		s.log.Error("config reload failed; keeping the previous config", "error", err.Error())
		st = prev
	case st != prev:
		s.state.Store(st)
		closed := s.closeRevokedTunnels(st)
		s.metrics.reload("config", nil)
		s.log.Info("config reloaded", "hosts", len(st.cfg.Hosts), "passthrough", len(st.cfg.Passthrough), "tunnels_closed", closed)
	}
	before, waiting := s.ca.Load(), s.renewed
	if err := s.loadCA(st); err != nil {
		if len(st.cfg.Hosts) > 0 {
			s.metrics.reload("ca", err)
			s.log.Error("CA reload failed; keeping the previous CA", "error", err.Error())
		}
	} else if after := s.ca.Load(); after != before {
		s.metrics.reload("ca", nil)
		s.log.Info("CA reloaded", "subject", after.ca.cert.Subject.CommonName, "notAfter", after.ca.cert.NotAfter)
	} else if r := s.renewed; r != nil && r != waiting {
		s.log.Info("CA renewed; the previous CA signs new leaves until the delay ends", "subject", r.ca.cert.Subject.CommonName,
			"notAfter", r.ca.cert.NotAfter, "switchAt", s.renewedAt.Add(s.opts.CASwitchDelay).UTC().Format(time.RFC3339))
	}
}

// Ready reports whether the proxy can serve: config and (when needed) CA
// loaded, and not shutting down.
func (s *Server) Ready() bool {
	st := s.state.Load()
	return st != nil && !s.draining.Load() && (len(st.cfg.Hosts) == 0 || s.ca.Load() != nil)
}

// Serve serves the proxy, the transparent listener and the admin
// endpoints on lns (only Proxy is required) until ctx is done, then shuts
// down gracefully: it stops accepting, lets in-flight requests finish
// within Timeouts.Shutdown, and closes what remains.
func (s *Server) Serve(ctx context.Context, lns Listeners) error {
	ln := newSlotListener(lns.Proxy, s.opts.MaxProxyConns)
	outer := s.cappedServer(http.HandlerFunc(s.serveProxy))
	var adminSrv *http.Server
	errc := make(chan error, 7)
	go func() { errc <- outer.Serve(ln) }()
	if lns.Transparent != nil {
		go func() { errc <- s.serveTransparent(lns.Transparent) }()
	}
	// Shutdown waits for both DNS loops, so that the log line of a
	// message answered just before it is written, not lost.
	dnsUDPDone := make(chan struct{})
	if lns.DNS != nil {
		go func() { defer close(dnsUDPDone); errc <- s.serveDNSUDP(lns.DNS) }()
	} else {
		close(dnsUDPDone)
	}
	dnsTCPDone := make(chan struct{})
	if lns.DNSTCP != nil {
		go func() { defer close(dnsTCPDone); errc <- s.serveDNSTCP(lns.DNSTCP) }()
	} else {
		close(dnsTCPDone)
	}
	go func() { errc <- s.inner.Serve(s.innerLn) }()
	go func() { errc <- s.innerH2.Serve(s.innerH2Ln) }()
	if lns.Admin != nil {
		// The admin port gets the proxy port's caps: the sandbox can
		// reach it (over the pod's loopback in sidecar mode, the
		// proxy's address in deployment mode), and stalled headers
		// of a megabyte each, uncapped, ran the proxy out of memory.
		admin := newSlotListener(lns.Admin, s.opts.MaxAdminConns)
		adminSrv = s.cappedServer(s.AdminHandler())
		go func() { errc <- adminSrv.Serve(admin) }()
	}
	reloadDone := make(chan struct{})
	reloadCtx, stopReload := context.WithCancel(ctx)
	go func() {
		defer close(reloadDone)
		t := time.NewTicker(s.opts.ReloadInterval)
		defer t.Stop()
		for {
			select {
			case <-reloadCtx.Done():
				return
			case <-t.C:
				s.reload()
				s.forwardTLS.pool.sweep(time.Now())
			}
		}
	}()
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = err
		}
	}
	stopReload()
	<-reloadDone
	s.draining.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeouts.Shutdown)
	defer cancel()
	if lns.Transparent != nil {
		lns.Transparent.Close()
	}
	if lns.DNS != nil {
		lns.DNS.Close()
	}
	if lns.DNSTCP != nil {
		lns.DNSTCP.Close()
	}
	<-dnsUDPDone
	<-dnsTCPDone
	outer.Shutdown(sctx)
	s.innerLn.Close()
	s.inner.Shutdown(sctx)
	s.innerH2Ln.Close()
	s.innerH2.Shutdown(sctx)
	s.passMu.Lock()
	s.passClosed = true
	s.passMu.Unlock()
	done := make(chan struct{})
	go func() { s.passWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		s.passMu.Lock()
		for c := range s.passConns {
			c.Close()
		}
		s.passMu.Unlock()
		<-done
	}
	outer.Close()
	s.inner.Close()
	s.innerH2.Close()
	if adminSrv != nil {
		adminSrv.Close()
	}
	s.upstream.CloseIdleConnections()
	s.forwardTLS.pool.closeAll()
	s.h2up.closeIdle()
	s.plain.CloseIdleConnections()
	if s.otlp != nil {
		s.otlp.close(sctx)
	}
	return runErr
}

// cappedServer is the HTTP server of a listener the sandbox can reach
// (the proxy port, the admin port), with the caps that bound what each
// connection holds and for how long; the listener, a slotListener,
// bounds how many.
func (s *Server) cappedServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:                      h,
		DisableGeneralOptionsHandler: true, // OPTIONS * is decided too
		ReadHeaderTimeout:            s.opts.Timeouts.ReadHeader,
		IdleTimeout:                  s.opts.Timeouts.Idle,
		// As the tunnels' server: a connection that pipelines requests
		// and reads no answer must not hold its slot forever. A CONNECT
		// clears it once hijacked.
		WriteTimeout:   s.opts.Timeouts.Idle,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
}

// AdminHandler serves /healthz, /readyz and /metrics.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.metrics.write(w)
	})
	return mux
}

// serveProxy handles what arrives on the proxy listener: CONNECT, or an
// absolute-form http:// request.
func (s *Server) serveProxy(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := s.state.Load()
	if r.Method == http.MethodConnect {
		s.serveConnect(w, r, st, start)
		return
	}
	s.serveRequest(w, r, st, nil, start)
}

// upstreamError answers a failed upstream round trip. It is not a policy
// refusal, so it carries no X-Omnia-Egress-Refused. The error's text can
// quote what the upstream sent (a malformed header line, which may echo
// the credential): it is scrubbed of what the request carried, cut to
// maxLogText bytes and escaped before it is logged.
func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error, inj Injected) {
	if e, ok := refusedDial(err); ok {
		s.dialRefused(e)
		if rec, ok := w.(*statusRecorder); ok {
			rec.refusal = &e.d
		}
		writeRefusal(w, e.d, true)
		return
	}
	if e := (*bodyRefusedError)(nil); errors.As(err, &e) {
		if rec, ok := w.(*statusRecorder); ok {
			rec.refusal = &e.d
		}
		writeRefusal(w, e.d, true)
		return
	}
	status := http.StatusBadGateway
	if errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusGatewayTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		status = http.StatusGatewayTimeout
	}
	msg, _ := inj.ScrubString(err.Error())
	s.log.Warn("upstream request failed", "host", r.Host, "error", logText(msg))
	// The request's write deadline ran from its header on; the failure
	// may come later (a long upload, a slow upstream).
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.opts.Timeouts.Idle))
	http.Error(w, "keyhole: the upstream request failed", status)
}

// upstreamScrubbed logs that an upstream's response held the credential
// the request carried, and counts it. The headers it names were
// redacted before the sandbox got them.
func (s *Server) upstreamScrubbed(r *http.Request, where string, names []string) {
	s.metrics.scrubbed(r.Host, where)
	for i, n := range names {
		names[i] = logText(n)
	}
	slices.Sort(names)
	s.log.Warn("upstream response held the credential; redacted", "host", r.Host, "where", where, "headers", strings.Join(names, ","))
}

// writeRefusal answers a refused request: the reason's status, the
// refusal header and a one-line message (on an MCP endpoint, a JSON-RPC
// error holding it).
func writeRefusal(w http.ResponseWriter, d policy.Decision, closeConn bool) {
	if d.MCP != nil {
		writeMCPRefusal(w, d, closeConn)
		return
	}
	setRefusalHeader(w.Header(), d.Reason, "text/plain; charset=utf-8", closeConn)
	w.WriteHeader(d.Reason.Status())
	io.WriteString(w, "keyhole: "+string(d.Reason)+": "+d.Message+"\n")
}

// setRefusalHeader sets what every refusal's header holds: the reason,
// the body's content type, which a client must not sniff past, and
// Connection: close when the connection ends with the answer.
func setRefusalHeader(h http.Header, reason policy.Reason, contentType string, closeConn bool) {
	h.Set(policy.RefusedHeader, string(reason))
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	if closeConn {
		h.Set("Connection", "close")
	}
}
