// Command proxybench measures keyhole-proxy on loopback against the same
// TLS upstream reached directly and through mitmproxy (mitmdump), side by
// side in one run, so the machine's noise hits every contender alike:
//
//   - keep-alive requests per second at -conns concurrent connections,
//     1 KiB responses, with the credential injected (the proxy's hot path);
//   - median latency of one sequential keep-alive connection, and what the
//     proxy adds to the direct median;
//   - new-tunnel rate: CONNECT plus TLS handshake for every request;
//   - peak RSS (VmHWM) of a fresh proxy holding -idle idle tunnels.
//
// Each measurement runs -runs times, interleaved, and the medians are
// reported with the targets from the proxy's spec. bench/proxy/run.sh
// builds the binaries and runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	proxyBin  string
	mitmdump  string
	runs      int
	duration  time.Duration
	conns     int
	idle      int
	tunnelers int
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("proxybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.proxyBin, "proxy-bin", "", "path to the keyhole-proxy binary (required)")
	fs.StringVar(&o.mitmdump, "mitmdump", "mitmdump", "mitmdump binary for the mitmproxy peer (Debian package mitmproxy)")
	fs.IntVar(&o.runs, "runs", 5, "how many times each measurement runs; medians are reported")
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of each throughput measurement")
	fs.IntVar(&o.conns, "conns", 16, "concurrent keep-alive connections")
	fs.IntVar(&o.idle, "idle", 1000, "idle tunnels held open for the RSS measurement")
	fs.IntVar(&o.tunnelers, "tunnel-workers", 8, "concurrent clients in the new-tunnel measurement")
	serve := fs.String("serve-upstream", "", "internal: run as the upstream process with the certificate in this directory")
	serveFl := fs.String("serve-floor", "", "internal: run as the terminating floor with the files in this directory")
	floorUp := fs.String("floor-upstream", "", "internal: the upstream address the terminating floor dials")
	sketch := fs.Bool("floor-sketch", false, "internal: run the fast-path sketch instead of the floor")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *serveFl != "" {
		return serveFloor(*serveFl, *floorUp, *sketch, stdout)
	}
	if *serve != "" {
		return serveUpstream(*serve, stdout)
	}
	if o.proxyBin == "" || o.runs < 1 || o.conns < 1 || o.idle < 0 || o.duration <= 0 {
		fmt.Fprintln(stderr, "proxybench: -proxy-bin is required; -runs, -conns and -duration must be positive")
		return 2
	}
	mitm, err := exec.LookPath(o.mitmdump)
	if err != nil {
		fmt.Fprintf(stderr, "proxybench: %s not found: run apt-get install -y mitmproxy\n", o.mitmdump)
		return 1
	}
	o.mitmdump = mitm
	res, err := bench(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "proxybench:", err)
		return 1
	}
	res.print(stdout, o)
	return 0
}

// The host the workload targets: injected by keyhole, resolved to the
// local upstream by --resolve (keyhole) or an addon (mitmproxy).
const (
	benchHost = "api.github.com"
	// tunnelHost is a passthrough host resolved to the same upstream: the
	// control route with no TLS termination.
	tunnelHost = "tunnel.bench.test"
	benchPath  = "/repos/acme/widgets"
	token      = "ghp_bench_token_not_a_secret_0123456789"
	bodySize   = 1024
)

// env is everything the contenders share: CAs, the upstream, the files.
type env struct {
	dir        string
	sandboxCA  *ca
	upstreamCA *ca
	upstream   string // host:port
	// upstreamProc serves the upstream in its own process, so that every
	// route, direct included, crosses a process boundary to reach it.
	upstreamProc *process
	configFile   string
	secretsDir   string
	stderr       io.Writer
}

type ca struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	certFile string
	keyFile  string
	certPEM  []byte
	keyPEM   []byte
}

func newCA(dir, name string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &ca{
		cert:     cert,
		key:      key,
		certFile: filepath.Join(dir, name+".crt"),
		keyFile:  filepath.Join(dir, name+".key"),
		certPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	if err := os.WriteFile(c.certFile, c.certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.keyFile, c.keyPEM, 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

// writeLeaf issues a server certificate for names and writes it and its
// key as PEM files.
func (c *ca) writeLeaf(certFile, keyFile string, names ...string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

func (c *ca) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

// newEnv writes the CAs, the Secret and the proxy config, and starts the
// upstream: 1 KiB JSON-ish bodies, answered only with the injected token.
func newEnv(dir string, stderr io.Writer) (*env, error) {
	e := &env{dir: dir, stderr: stderr}
	var err error
	if e.sandboxCA, err = newCA(dir, "sandbox-ca"); err != nil {
		return nil, err
	}
	if e.upstreamCA, err = newCA(dir, "upstream-ca"); err != nil {
		return nil, err
	}
	if err := e.upstreamCA.writeLeaf(filepath.Join(dir, "upstream.crt"), filepath.Join(dir, "upstream.key"), benchHost, tunnelHost); err != nil {
		return nil, err
	}
	// The terminating floor and the sketch present this leaf (floor.go).
	if err := e.sandboxCA.writeLeaf(filepath.Join(dir, "floor.crt"), filepath.Join(dir, "floor.key"), benchHost); err != nil {
		return nil, err
	}
	if err := e.startUpstream(); err != nil {
		return nil, err
	}

	e.secretsDir = filepath.Join(dir, "secrets")
	if err := os.MkdirAll(filepath.Join(e.secretsDir, "bench-token"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(e.secretsDir, "bench-token", "token"), []byte(token+"\n"), 0o600); err != nil {
		return nil, err
	}
	cfg := map[string]any{
		"apiVersion": "proxy.keyhole.dev/v1alpha1",
		"kind":       "ProxyConfig",
		"sandbox":    map[string]string{"name": "bench"},
		"hosts": []any{map[string]any{
			"name":       benchHost,
			"connection": "bench",
			"inject": map[string]any{
				"secret": "bench-token",
				"header": map[string]string{"name": "Authorization", "value": "Bearer {{ .token }}"},
			},
			"rules": []any{map[string]any{"methods": []string{"GET", "HEAD"}, "pathPrefixes": []string{benchPath}}},
		}},
		"passthrough": []string{tunnelHost},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	e.configFile = filepath.Join(dir, "proxy.json")
	if err := os.WriteFile(e.configFile, data, 0o600); err != nil {
		return nil, err
	}
	return e, nil
}

// upstreamStats is what the upstream counted: TLS connections accepted
// (does a proxy reuse its upstream connections?) and requests refused for
// lacking the real token (did a proxy inject?).
type upstreamStats struct {
	Conns   int64 `json:"conns"`
	OK      int64 `json:"ok"`
	Refused int64 `json:"refused"`
}

// statsPath serves upstreamStats without a credential.
const statsPath = "/_bench/stats"

// serveUpstream is the upstream process: 1 KiB bodies answered only to the
// real token, on 127.0.0.1, until stdin closes or SIGTERM. It prints its
// address on the first line of stdout.
func serveUpstream(dir string, stdout io.Writer) int {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "upstream.crt"), filepath.Join(dir, "upstream.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		return 1
	}
	var conns, ok, refused atomic.Int64
	body := []byte(`{"full_name":"acme/widgets","pad":"` + strings.Repeat("x", bodySize) + `"}`)[:bodySize-1]
	body = append(body, '\n')
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == statsPath {
				json.NewEncoder(w).Encode(upstreamStats{Conns: conns.Load(), OK: ok.Load(), Refused: refused.Load()})
				return
			}
			if r.Header.Get("Authorization") != "Bearer "+token {
				refused.Add(1)
				http.Error(w, "bad credentials", http.StatusUnauthorized)
				return
			}
			ok.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}},
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	fmt.Fprintln(stdout, ln.Addr().String())
	go func() {
		io.Copy(io.Discard, os.Stdin) // the parent holds stdin open
		srv.Close()
	}()
	if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		return 1
	}
	return 0
}

// startUpstream runs this binary again as the upstream process.
func (e *env) startUpstream() error {
	p, err := e.startSelf("upstream", "-serve-upstream", e.dir)
	if err != nil {
		return err
	}
	e.upstream, e.upstreamProc = p.addr, p
	return nil
}

// startSelf runs this binary again with args as a helper process that
// prints its address on the first line of stdout and runs until its
// standard input closes (closed before SIGTERM, so it ends even if the
// signal is not delivered).
func (e *env) startSelf(name string, args ...string) (*process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = e.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("%s process: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, addr: strings.TrimSpace(line), ended: make(chan struct{}), closeInput: stdin}
	go func() {
		cmd.Wait()
		close(p.ended)
	}()
	return p, nil
}

// stats asks the upstream what it has counted.
func (e *env) stats() (upstreamStats, error) {
	c := e.client(e.direct(), false)
	var st upstreamStats
	resp, err := c.hc.Get("https://" + benchHost + statsPath)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// process is a contender running as a subprocess.
type process struct {
	name       string
	cmd        *exec.Cmd
	addr       string    // forward-proxy address
	log        string    // file holding its output
	closeInput io.Closer // closed before stopping, when set
	ended      chan struct{}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startProcess starts cmd with its output in a log file, hands the process
// to started (so ready can fill in what it learns), and polls ready.
func (e *env) startProcess(name string, cmd *exec.Cmd, ready func() error, started func(*process)) (*process, error) {
	p := &process{name: name, cmd: cmd, log: filepath.Join(e.dir, name+".log"), ended: make(chan struct{})}
	started(p)
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	cmd.Stdout = f
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.ended)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.ended:
			return nil, fmt.Errorf("%s exited before it was ready; see %s", name, p.log)
		default:
		}
		err := ready()
		if err == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready after 30s: %w (log %s)", name, err, p.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *process) stop() {
	select {
	case <-p.ended:
		return
	default:
	}
	if p.closeInput != nil {
		p.closeInput.Close()
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.ended:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.ended
	}
}

// startKeyhole runs keyhole-proxy with this env's config, logging to a
// file. It listens on port 0; the bound addresses come from its startup
// log line, so nothing else can take the port between choosing and binding.
func (e *env) startKeyhole(bin string) (*process, error) {
	cmd := exec.Command(bin,
		"--config", e.configFile,
		"--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0",
		"--ca-cert", e.sandboxCA.certFile,
		"--ca-key", e.sandboxCA.keyFile,
		"--secrets-dir", e.secretsDir,
		"--resolve", benchHost+":443:"+e.upstream,
		"--resolve", tunnelHost+":443:"+e.upstream,
		"--upstream-ca", e.upstreamCA.certFile,
	)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.dir}
	client := &http.Client{Timeout: time.Second}
	var p *process
	p, err := e.startProcess("keyhole", cmd, func() error {
		listen, admin, err := boundAddrs(p.log)
		if err != nil {
			return err
		}
		resp, err := client.Get("http://" + admin + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return errors.New(resp.Status)
		}
		p.addr = listen
		return nil
	}, func(started *process) { p = started })
	return p, err
}

// boundAddrs reads keyhole-proxy's "keyhole-proxy listening" log line.
func boundAddrs(logFile string) (listen, admin string, err error) {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var l struct {
			Msg    string `json:"msg"`
			Listen string `json:"listen"`
			Admin  string `json:"admin"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "keyhole-proxy listening" && l.Listen != "" && l.Admin != "" {
			return l.Listen, l.Admin, nil
		}
	}
	return "", "", errors.New("not listening yet")
}

// mitmAddon makes mitmdump do keyhole's work on this workload: dial the
// local upstream for api.github.com and set the Authorization header.
const mitmAddon = `
import os

UPSTREAM = (os.environ["BENCH_UPSTREAM_HOST"], int(os.environ["BENCH_UPSTREAM_PORT"]))
TOKEN = os.environ["BENCH_TOKEN"]


class Inject:
    def server_connect(self, data):
        data.server.address = UPSTREAM

    def request(self, flow):
        flow.request.headers["Authorization"] = "Bearer " + TOKEN


addons = [Inject()]
`

// startMitm runs mitmdump with the sandbox CA as its CA (so clients trust
// both proxies alike) and the upstream CA for verification.
func (e *env) startMitm(bin string) (*process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	uhost, uport, _ := net.SplitHostPort(e.upstream)
	confdir := filepath.Join(e.dir, "mitm")
	if err := os.MkdirAll(confdir, 0o700); err != nil {
		return nil, err
	}
	pemBoth := append(append([]byte{}, e.sandboxCA.keyPEM...), e.sandboxCA.certPEM...)
	if err := os.WriteFile(filepath.Join(confdir, "mitmproxy-ca.pem"), pemBoth, 0o600); err != nil {
		return nil, err
	}
	addon := filepath.Join(e.dir, "mitm_inject.py")
	if err := os.WriteFile(addon, []byte(mitmAddon), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--listen-host", host, "--listen-port", port,
		"--set", "confdir="+confdir,
		"--set", "ssl_verify_upstream_trusted_ca="+e.upstreamCA.certFile,
		"--set", "http2=false",
		"--set", "flow_detail=0",
		"--set", "termlog_verbosity=error",
		"-s", addon,
	)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + e.dir, "LANG=C.UTF-8",
		"BENCH_UPSTREAM_HOST=" + uhost, "BENCH_UPSTREAM_PORT=" + uport, "BENCH_TOKEN=" + token,
	}
	return e.startProcess("mitmproxy", cmd, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}, func(p *process) { p.addr = addr })
}

// route is how a client reaches the upstream: through a proxy or not, by
// which name, trusting which CA, sending which credential.
type route struct {
	name  string
	proxy string // forward-proxy address; "" dials the upstream directly
	host  string
	roots *x509.CertPool
	auth  string
}

// direct is the baseline: the client holds the real token and talks TLS
// to the upstream itself.
func (e *env) direct() route {
	return route{name: "direct", host: benchHost, roots: e.upstreamCA.pool(), auth: "Bearer " + token}
}

// injected goes through a proxy that terminates TLS with the sandbox CA
// and replaces the placeholder the client sends with the real token.
func (e *env) injected(name, proxyAddr string) route {
	return route{name: name, proxy: proxyAddr, host: benchHost, roots: e.sandboxCA.pool(), auth: "Bearer omnia-injected-bench"}
}

// tunnelled goes through keyhole's passthrough: CONNECT, then TLS end to
// end with the upstream. It is the control that shows what one extra
// process hop costs on this machine, without termination or injection.
func (e *env) tunnelled(proxyAddr string) route {
	return route{name: "keyhole passthrough", proxy: proxyAddr, host: tunnelHost, roots: e.upstreamCA.pool(), auth: "Bearer " + token}
}

// client is one HTTP/1.1 client with at most one connection.
type client struct {
	hc   *http.Client
	url  string
	auth string
}

func (e *env) client(rt route, keepAlive bool) *client {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		DisableKeepAlives:   !keepAlive,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		TLSClientConfig:     &tls.Config{NextProtos: []string{"http/1.1"}, RootCAs: rt.roots},
	}
	if rt.proxy == "" {
		d := &net.Dialer{Timeout: 5 * time.Second}
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, e.upstream)
		}
	} else {
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: rt.proxy})
	}
	return &client{
		hc:   &http.Client{Transport: tr, Timeout: 10 * time.Second},
		url:  "https://" + rt.host + benchPath,
		auth: rt.auth,
	}
}

// get performs one request and drains the body; a non-200 is an error.
func (c *client) get() error {
	req, err := http.NewRequest(http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", c.auth)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || n != bodySize {
		return fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return nil
}

// load runs workers concurrent loops of fn for d and returns completed
// operations per second and the number of failures.
func load(workers int, d time.Duration, setup func() func() error) (float64, int64) {
	var ok, failed atomic.Int64
	fns := make([]func() error, workers)
	for i := range fns {
		fns[i] = setup()
	}
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start := time.Now()
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := fn(); err != nil {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / time.Since(start).Seconds(), failed.Load()
}

// keepAlive measures requests/s over conns warm keep-alive connections.
func (e *env) keepAlive(rt route, conns int, d time.Duration) (float64, int64) {
	return load(conns, d, func() func() error {
		c := e.client(rt, true)
		c.get() // warm: tunnel, handshake and leaf minted before timing
		return c.get
	})
}

// newTunnels measures requests/s when every request opens a new tunnel.
func (e *env) newTunnels(rt route, workers int, d time.Duration) (float64, int64) {
	return load(workers, d, func() func() error {
		return func() error {
			c := e.client(rt, false)
			defer c.hc.CloseIdleConnections()
			return c.get()
		}
	})
}

// latency is the median of sequential requests on one warm connection.
func (e *env) latency(rt route, d time.Duration) (time.Duration, error) {
	c := e.client(rt, true)
	if err := c.get(); err != nil {
		return 0, err
	}
	var samples []time.Duration
	stop := time.Now().Add(d)
	for time.Now().Before(stop) {
		t0 := time.Now()
		if err := c.get(); err != nil {
			return 0, err
		}
		samples = append(samples, time.Since(t0))
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	return samples[len(samples)/2], nil
}

// idleTunnels opens n tunnels through the proxy, each with one completed
// request, holds them idle and returns the proxy's VmHWM and VmRSS in KiB.
func (e *env) idleTunnels(p *process, n, workers int) (hwm, rss int64, opened int, err error) {
	conns := make([]net.Conn, 0, n)
	var mu sync.Mutex
	var firstErr error
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				c, err := e.openTunnel(p.addr)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
				} else {
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(time.Second)
	hwm, rss, err = procStatus(p.cmd.Process.Pid)
	if err == nil && firstErr != nil {
		err = fmt.Errorf("%d of %d tunnels opened; first failure: %w", len(conns), n, firstErr)
	}
	return hwm, rss, len(conns), err
}

// openTunnel does CONNECT, the TLS handshake and one request, and leaves
// the tunnel open and idle.
func (e *env) openTunnel(proxyAddr string) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", proxyAddr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", benchHost, benchHost)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		conn.Close()
		return nil, fmt.Errorf("CONNECT: %s", resp.Status)
	}
	tc := tls.Client(conn, &tls.Config{ServerName: benchHost, RootCAs: e.sandboxCA.pool(), NextProtos: []string{"http/1.1"}})
	fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer omnia-injected-bench\r\n\r\n", benchPath, benchHost)
	tbr := bufio.NewReader(tc)
	resp, err = http.ReadResponse(tbr, &http.Request{Method: http.MethodGet})
	if err != nil {
		conn.Close()
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		conn.Close()
		return nil, fmt.Errorf("GET through the tunnel: %s", resp.Status)
	}
	conn.SetDeadline(time.Time{})
	return tc, nil
}

// cpuTime returns the user plus system CPU time a process has used.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(data)
}

// parseStat reads utime and stime from a /proc/<pid>/stat line, in clock
// ticks of 10 ms (the Linux USER_HZ). The command name is in parentheses
// and may hold spaces and parentheses, so fields are counted from the last
// closing parenthesis: utime and stime are the 12th and 13th after it.
func parseStat(data []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("/proc stat: too few fields")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 32)
	st, err2 := strconv.ParseUint(f[12], 10, 32)
	if err1 != nil || err2 != nil {
		return 0, errors.New("/proc stat: utime or stime is not a number")
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// procStatus reads VmHWM (peak resident set) and VmRSS in KiB.
func procStatus(pid int) (hwm, rss int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(data)
}

// parseStatus reads the VmHWM and VmRSS lines ("VmHWM:   51234 kB") of a
// /proc/<pid>/status file.
func parseStatus(data []byte) (hwm, rss int64, err error) {
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var v uint64
		switch f[0] {
		case "VmHWM:", "VmRSS:":
			if v, err = strconv.ParseUint(f[1], 10, 62); err != nil {
				return 0, 0, fmt.Errorf("/proc status: %s is not a size: %w", f[0], err)
			}
		}
		switch f[0] {
		case "VmHWM:":
			hwm = int64(v)
		case "VmRSS:":
			rss = int64(v)
		}
	}
	if hwm == 0 {
		return 0, 0, errors.New("/proc status: no VmHWM")
	}
	return hwm, rss, nil
}

// series is one figure measured once per run.
type series []float64

func (s series) median() float64 {
	if len(s) == 0 {
		return 0
	}
	c := append(series(nil), s...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func (s series) String() string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strings.Join(parts, " ")
}

// results holds every run's figures, by measurement and route name.
type results struct {
	rps     map[string]series // keep-alive requests/s
	ratio   map[string]series // keep-alive requests/s as % of direct
	latency map[string]series // median µs on one warm connection
	added   map[string]series // latency minus direct, µs
	tunnels map[string]series // new tunnels/s
	// proxyCPU is the CPU time the proxy process spent per keep-alive
	// request (µs); upstreamCPU the upstream process's. Unlike rates,
	// these hardly depend on how busy the shared machine is.
	proxyCPU    map[string]series
	upstreamCPU map[string]series
	hwm         map[string]series // peak RSS with idle tunnels, MiB
	rss         map[string]series // RSS with idle tunnels, MiB
	opened      map[string]int    // idle tunnels opened in the last run
	failures    map[string]int64
	// upstreamRefused counts requests that reached the upstream without
	// the real token: nonzero means a contender did not inject.
	upstreamRefused int64
}

func (r *results) fail(what string, n int64) {
	if n > 0 {
		r.failures[what] += n
	}
}

// Route names, as the table prints them.
const (
	nameDirect  = "direct"
	nameKeyhole = "keyhole"
	nameMitm    = "mitmproxy"
	nameTunnel  = "keyhole passthrough"
	nameFloor   = "terminating floor"
	nameSketch  = "fast-path sketch"
)

// bench runs every measurement o.runs times, interleaving the contenders.
func bench(o options, stderr io.Writer) (*results, error) {
	dir, err := os.MkdirTemp("", "proxybench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e, err := newEnv(dir, stderr)
	if err != nil {
		return nil, err
	}
	defer e.upstreamProc.stop()
	r := &results{
		rps: map[string]series{}, ratio: map[string]series{}, latency: map[string]series{},
		added: map[string]series{}, tunnels: map[string]series{}, hwm: map[string]series{},
		proxyCPU: map[string]series{}, upstreamCPU: map[string]series{},
		rss: map[string]series{}, opened: map[string]int{}, failures: map[string]int64{},
	}

	kh, err := e.startKeyhole(o.proxyBin)
	if err != nil {
		return nil, err
	}
	defer kh.stop()
	mp, err := e.startMitm(o.mitmdump)
	if err != nil {
		return nil, err
	}
	defer mp.stop()
	fl, err := e.startFloor(false)
	if err != nil {
		return nil, err
	}
	defer fl.stop()
	sk, err := e.startFloor(true)
	if err != nil {
		return nil, err
	}
	defer sk.stop()
	routes := []route{e.direct(), e.injected(nameKeyhole, kh.addr), e.injected(nameMitm, mp.addr), e.tunnelled(kh.addr),
		e.injected(nameFloor, fl.addr), e.injected(nameSketch, sk.addr)}
	procOf := map[string]*process{nameKeyhole: kh, nameMitm: mp, nameTunnel: kh, nameFloor: fl, nameSketch: sk}
	for _, rt := range routes {
		if err := e.client(rt, true).get(); err != nil {
			return nil, fmt.Errorf("route %s cannot serve the workload: %w (logs in %s)", rt.name, err, dir)
		}
	}

	for i := 0; i < o.runs; i++ {
		fmt.Fprintf(stderr, "run %d/%d: keep-alive", i+1, o.runs)
		// Rotate who goes first so a burst of noise on the shared
		// machine does not always land on the same contender.
		for j := range routes {
			rt := routes[(i+j)%len(routes)]
			before, err := e.stats()
			if err != nil {
				return nil, fmt.Errorf("upstream stats: %w", err)
			}
			upCPU, _ := cpuTime(e.upstreamProc.cmd.Process.Pid)
			var pxCPU time.Duration
			if p := procOf[rt.name]; p != nil {
				pxCPU, _ = cpuTime(p.cmd.Process.Pid)
			}
			t0 := time.Now()
			v, n := e.keepAlive(rt, o.conns, o.duration)
			reqs := v * time.Since(t0).Seconds()
			r.fail("keep-alive "+rt.name, n)
			r.rps[rt.name] = append(r.rps[rt.name], v)
			if up, err := cpuTime(e.upstreamProc.cmd.Process.Pid); err == nil && reqs > 0 {
				r.upstreamCPU[rt.name] = append(r.upstreamCPU[rt.name], float64(up-upCPU)/float64(time.Microsecond)/reqs)
			}
			if p := procOf[rt.name]; p != nil && reqs > 0 {
				if px, err := cpuTime(p.cmd.Process.Pid); err == nil {
					r.proxyCPU[rt.name] = append(r.proxyCPU[rt.name], float64(px-pxCPU)/float64(time.Microsecond)/reqs)
				}
			}
			after, err := e.stats()
			if err != nil {
				return nil, fmt.Errorf("upstream stats: %w", err)
			}
			// One connection is the stats request's own.
			fmt.Fprintf(stderr, " [%s: %.0f req/s, %d new upstream connections]", rt.name, v, after.Conns-before.Conns-1)
		}
		d := r.rps[nameDirect][i]
		for _, rt := range routes {
			r.ratio[rt.name] = append(r.ratio[rt.name], 100*r.rps[rt.name][i]/d)
		}

		fmt.Fprint(stderr, ", latency")
		lat := map[string]float64{}
		for j := range routes {
			rt := routes[(i+j)%len(routes)]
			l, err := e.latency(rt, o.duration*2/3)
			if err != nil {
				return nil, fmt.Errorf("%s latency: %w", rt.name, err)
			}
			lat[rt.name] = float64(l) / float64(time.Microsecond)
		}
		for _, rt := range routes {
			r.latency[rt.name] = append(r.latency[rt.name], lat[rt.name])
			r.added[rt.name] = append(r.added[rt.name], lat[rt.name]-lat[nameDirect])
		}

		fmt.Fprint(stderr, ", new tunnels\n")
		for _, rt := range routes[1:4] { // the floor is a keep-alive bound only
			v, n := e.newTunnels(rt, o.tunnelers, o.duration)
			r.fail("new-tunnel "+rt.name, n)
			r.tunnels[rt.name] = append(r.tunnels[rt.name], v)
		}
	}
	kh.stop()
	mp.stop()

	// Peak RSS needs a fresh process per run: VmHWM never goes down.
	// mitmproxy runs once: it is slow to fill with tunnels.
	if o.idle > 0 {
		for i := 0; i < o.runs+1; i++ {
			name, start := nameKeyhole, func() (*process, error) { return e.startKeyhole(o.proxyBin) }
			if i == o.runs {
				name, start = nameMitm, func() (*process, error) { return e.startMitm(o.mitmdump) }
			}
			fmt.Fprintf(stderr, "idle %d/%d: %s with %d idle tunnels\n", i+1, o.runs+1, name, o.idle)
			p, err := start()
			if err != nil {
				return nil, err
			}
			hwm, rss, opened, err := e.idleTunnels(p, o.idle, o.tunnelers)
			p.stop()
			if err != nil {
				fmt.Fprintf(stderr, "%s idle tunnels: %v\n", name, err)
			}
			r.hwm[name] = append(r.hwm[name], float64(hwm)/1024)
			r.rss[name] = append(r.rss[name], float64(rss)/1024)
			r.opened[name] = opened
		}
	}
	st, err := e.stats()
	if err != nil {
		return nil, fmt.Errorf("upstream stats: %w", err)
	}
	r.upstreamRefused = st.Refused
	return r, nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// print writes the medians as a Markdown table, then every run's figures.
func (r *results) print(w io.Writer, o options) {
	med := func(m map[string]series, name string) float64 { return m[name].median() }
	fmt.Fprintf(w, "keyhole-proxy vs direct HTTPS vs mitmproxy: loopback, %d B responses, %d runs, medians\n\n", bodySize, o.runs)
	fmt.Fprintln(w, "| measurement | keyhole | direct | mitmproxy | keyhole passthrough (control) | terminating floor (bound) | fast-path sketch (bound) | target | keyhole |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---|---|")
	fmt.Fprintf(w, "| keep-alive req/s, %d conns | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | | |\n", o.conns,
		med(r.rps, nameKeyhole), med(r.rps, nameDirect), med(r.rps, nameMitm), med(r.rps, nameTunnel), med(r.rps, nameFloor), med(r.rps, nameSketch))
	fmt.Fprintf(w, "| keep-alive, %% of direct (median of per-run ratios) | %.0f%% | 100%% | %.0f%% | %.0f%% | %.0f%% | %.0f%% | >= 50%% | %s |\n",
		med(r.ratio, nameKeyhole), med(r.ratio, nameMitm), med(r.ratio, nameTunnel), med(r.ratio, nameFloor), med(r.ratio, nameSketch), verdict(med(r.ratio, nameKeyhole) >= 50))
	fmt.Fprintf(w, "| proxy CPU per keep-alive request (µs) | %.0f | | %.0f | %.0f | %.0f | %.0f | | |\n",
		med(r.proxyCPU, nameKeyhole), med(r.proxyCPU, nameMitm), med(r.proxyCPU, nameTunnel), med(r.proxyCPU, nameFloor), med(r.proxyCPU, nameSketch))
	fmt.Fprintf(w, "| upstream CPU per keep-alive request (µs) | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | | |\n",
		med(r.upstreamCPU, nameKeyhole), med(r.upstreamCPU, nameDirect), med(r.upstreamCPU, nameMitm), med(r.upstreamCPU, nameTunnel), med(r.upstreamCPU, nameFloor), med(r.upstreamCPU, nameSketch))
	fmt.Fprintf(w, "| median latency, 1 conn (µs) | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | | |\n",
		med(r.latency, nameKeyhole), med(r.latency, nameDirect), med(r.latency, nameMitm), med(r.latency, nameTunnel), med(r.latency, nameFloor), med(r.latency, nameSketch))
	fmt.Fprintf(w, "| added median latency (µs) | %.0f | 0 | %.0f | %.0f | %.0f | %.0f | < 500 | %s |\n",
		med(r.added, nameKeyhole), med(r.added, nameMitm), med(r.added, nameTunnel), med(r.added, nameFloor), med(r.added, nameSketch), verdict(med(r.added, nameKeyhole) < 500))
	fmt.Fprintf(w, "| new tunnels/s, %d clients | %.0f | | %.0f | %.0f | | | >= 400 | %s |\n", o.tunnelers,
		med(r.tunnels, nameKeyhole), med(r.tunnels, nameMitm), med(r.tunnels, nameTunnel), verdict(med(r.tunnels, nameKeyhole) >= 400))
	if o.idle > 0 {
		fmt.Fprintf(w, "| peak RSS (VmHWM), %d idle tunnels (MiB) | %.1f | | %.1f | | | | < 100 | %s |\n", o.idle,
			med(r.hwm, nameKeyhole), med(r.hwm, nameMitm), verdict(med(r.hwm, nameKeyhole) < 100 && r.opened[nameKeyhole] == o.idle))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "per run:")
	for _, m := range []struct {
		what string
		m    map[string]series
	}{
		{"keep-alive req/s", r.rps}, {"keep-alive % of direct", r.ratio}, {"latency µs", r.latency},
		{"added latency µs", r.added}, {"proxy CPU µs/request", r.proxyCPU}, {"upstream CPU µs/request", r.upstreamCPU},
		{"new tunnels/s", r.tunnels}, {"idle VmHWM MiB", r.hwm}, {"idle VmRSS MiB", r.rss},
	} {
		for _, name := range []string{nameDirect, nameKeyhole, nameMitm, nameTunnel, nameFloor, nameSketch} {
			if len(m.m[name]) > 0 {
				fmt.Fprintf(w, "  %-24s %-20s %s\n", m.what, name, m.m[name])
			}
		}
	}
	if o.idle > 0 {
		fmt.Fprintf(w, "  idle tunnels opened: keyhole %d/%d, mitmproxy %d/%d\n", r.opened[nameKeyhole], o.idle, r.opened[nameMitm], o.idle)
	}
	keys := make([]string, 0, len(r.failures))
	for k := range r.failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  failed requests, %s: %d\n", k, r.failures[k])
	}
	fmt.Fprintf(w, "  requests the upstream refused for a missing token: %d\n", r.upstreamRefused)
}
