package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"keyhole.dev/keyhole/internal/proxylog"
)

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

// serveUpstream is the upstream process: 1 KiB bodies, event streams
// (stream.go), bulk downloads and uploads (bulk.go), answered only to the
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
	block := bulkBlock()
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
			switch r.URL.Path {
			case streamPath:
				serveEvents(w, r)
				return
			case bulkPath:
				serveBulk(w, r, block)
				return
			case uploadPath:
				serveUpload(w, r)
				return
			}
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
	file := strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, name)
	p := &process{name: name, cmd: cmd, log: filepath.Join(e.dir, file+".log"), ended: make(chan struct{})}
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

// startKeyhole runs a build of keyhole-proxy with the config file cfg,
// logging to a file named for the build. It listens on port 0; the bound addresses come from its startup
// log line, so nothing else can take the port between choosing and binding.
func (e *env) startKeyhole(k keyholeBuild, cfg string) (*process, error) {
	cmd := exec.Command(k.bin,
		"--config", cfg,
		"--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0",
		"--ca-cert", e.sandboxCA.CertFile,
		"--ca-key", e.sandboxCA.KeyFile,
		"--secrets-dir", e.secretsDir,
		"--resolve", benchHost+":443:"+e.upstream,
		"--resolve", tunnelHost+":443:"+e.upstream,
		"--resolve", grpcHost+":443:"+e.grpc.addr,
		"--resolve", wsHost+":443:"+e.ws.addr,
		"--upstream-ca", e.upstreamCA.CertFile,
	)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.dir}
	client := &http.Client{Timeout: time.Second}
	var p *process
	p, err := e.startProcess(k.name, cmd, func() error {
		listen, admin, err := proxylog.BoundAddrs(p.log)
		if err != nil {
			return err
		}
		if err := proxylog.Ready(client, admin); err != nil {
			return err
		}
		p.addr = listen
		return nil
	}, func(started *process) { p = started })
	return p, err
}

// mitmAddon makes mitmdump do keyhole's work on this workload: dial the
// local upstream for api.github.com and set the Authorization header. The
// header is set when the request's head is in, since a streamed request's
// head goes upstream before its body is read. An event stream is streamed
// to the client: mitmproxy otherwise holds a response until it ends
// (bodies over 1 MiB of known length are streamed by the
// stream_large_bodies option).
const mitmAddon = `
import os

UPSTREAM = (os.environ["BENCH_UPSTREAM_HOST"], int(os.environ["BENCH_UPSTREAM_PORT"]))
TOKEN = os.environ["BENCH_TOKEN"]


class Inject:
    def server_connect(self, data):
        data.server.address = UPSTREAM

    def requestheaders(self, flow):
        flow.request.headers["Authorization"] = "Bearer " + TOKEN

    def responseheaders(self, flow):
        if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
            flow.response.stream = True


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
	pemBoth := append(append([]byte{}, e.sandboxCA.KeyPEM...), e.sandboxCA.CertPEM...)
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
		"--set", "ssl_verify_upstream_trusted_ca="+e.upstreamCA.CertFile,
		"--set", "http2=false",
		"--set", "flow_detail=0",
		"--set", "termlog_verbosity=error",
		"--set", "stream_large_bodies=1m",
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
