package proxycmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/rogpeppe/go-internal/testscript"

	"keyhole.dev/keyhole/internal/golden"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"keyhole-proxy": func() { os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar: the command as a user sees it.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           filepath.Join("testdata", "script"),
		UpdateScripts: golden.Update(),
	})
}

// TestDeps keeps the proxy binary lean: it must not link the compiler's
// heavy dependencies.
func TestDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "keyhole.dev/keyhole/cmd/keyhole-proxy").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %d packages: %s", len(deps), out)
	}
	for _, d := range deps {
		for _, banned := range []string{"cuelang.org/", "github.com/go-git/", "sigs.k8s.io/kustomize/", "github.com/fluxcd/", "k8s.io/", "sigs.k8s.io/controller-runtime", "keyhole.dev/keyhole/compiler", "keyhole.dev/keyhole/render", "keyhole.dev/keyhole/source",
			// The OTLP export is written to the wire format; the
			// collector's decoder is for tests only.
			"go.opentelemetry.io/", "google.golang.org/grpc", "google.golang.org/protobuf"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("keyhole-proxy depends on %s", d)
			}
		}
	}
}

func TestResolveFlag(t *testing.T) {
	tests := map[string]struct {
		in      string
		key, to string
		bad     bool
	}{
		"curl form":      {in: "api.github.com:443:127.0.0.1", key: "api.github.com:443", to: "127.0.0.1:443"},
		"with port":      {in: "api.github.com:443:127.0.0.1:8443", key: "api.github.com:443", to: "127.0.0.1:8443"},
		"ipv6 brackets":  {in: "github.com:443:[::1]", key: "github.com:443", to: "[::1]:443"},
		"ipv6 port":      {in: "github.com:443:[::1]:9000", key: "github.com:443", to: "[::1]:9000"},
		"ipv6 bare":      {in: "github.com:443:::1", key: "github.com:443", to: "[::1]:443"},
		"upper case":     {in: "API.GitHub.com.:443:127.0.0.1", key: "api.github.com:443", to: "127.0.0.1:443"},
		"missing addr":   {in: "api.github.com:443", bad: true},
		"empty addr":     {in: "api.github.com:443:", bad: true},
		"bad port":       {in: "api.github.com:https:127.0.0.1", bad: true},
		"port too large": {in: "a:70000:127.0.0.1", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := resolveFlag{}
			err := r.Set(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("Set(%q) accepted: %v", tc.in, r)
				}
				return
			}
			if err != nil || r[tc.key] != tc.to {
				t.Fatalf("Set(%q) = %v, %v; want %s -> %s", tc.in, r, err, tc.key, tc.to)
			}
		})
	}
}

// TestRunServes starts the command in-process, probes its admin port and
// stops it as SIGTERM would.
func TestRunServes(t *testing.T) {
	p := startRun(t)
	resp, err := http.Get("http://" + p.admin.String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("/readyz = %d %q", resp.StatusCode, body)
	}
	p.stop(t)
	if !strings.Contains(p.stderr.String(), `"msg":"keyhole-proxy listening"`) {
		t.Errorf("no startup log line: %s", p.stderr.String())
	}
}

// TestRunLogsMemoryLimit: the startup line says the soft memory limit
// the collector works to, when there is one (set by GOMEMLIMIT or from
// the cgroup's limit), so that an operator reading a pod's log sees it.
func TestRunLogsMemoryLimit(t *testing.T) {
	for name, tt := range map[string]struct {
		limit int64
		want  string
	}{
		"none":    {limit: math.MaxInt64},
		"a limit": {limit: 123 << 20, want: `"memory_limit":128974848`},
	} {
		t.Run(name, func(t *testing.T) {
			prev := debug.SetMemoryLimit(tt.limit)
			defer debug.SetMemoryLimit(prev)
			p := startRun(t)
			p.stop(t)
			var line string
			for l := range strings.Lines(p.stderr.String()) {
				if strings.Contains(l, `"msg":"keyhole-proxy listening"`) {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no startup line: %s", p.stderr.String())
			}
			if got := strings.Contains(line, `"memory_limit"`); got != (tt.want != "") || !strings.Contains(line, tt.want) {
				t.Fatalf("startup line %s, want memory_limit %q", line, tt.want)
			}
		})
	}
}

// running is the command started in-process by startRun.
type running struct {
	listen, admin  net.Addr
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	code           chan int
}

// startRun runs the command in-process with a passthrough-only config (no
// CA needed), the proxy and admin listeners on free ports (never the
// default admin port, which anything else on the machine may hold), with
// the extra args after (so they can set --admin-listen again), and waits
// until it has bound its addresses.
func startRun(t *testing.T, args ...string) *running {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.json")
	os.WriteFile(cfg, []byte(`{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},"passthrough":["pypi.org"]}`), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := &running{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, code: make(chan int, 1)}
	bound := make(chan [2]net.Addr, 1)
	go func() {
		p.code <- run(ctx, append([]string{"--config", cfg, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, args...), p.stdout, p.stderr,
			func(l, a net.Addr) { bound <- [2]net.Addr{l, a} })
	}()
	select {
	case b := <-bound:
		p.listen, p.admin = b[0], b[1]
	case c := <-p.code:
		t.Fatalf("exited %d: %s", c, p.stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("did not start")
	}
	return p
}

// stop stops the command as SIGTERM would and requires a clean exit.
func (p *running) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	select {
	case c := <-p.code:
		if c != exitOK {
			t.Fatalf("exit %d after shutdown: %s", c, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop")
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"apiVersion":"x","kind":"ProxyConfig"}`), 0o600)
	tests := map[string]struct {
		args []string
		code int
		msg  string
	}{
		"version":        {args: []string{"--version"}, code: exitOK},
		"help":           {args: []string{"--help"}, code: exitOK},
		"no config":      {args: nil, code: exitUsage, msg: "--config is required"},
		"unknown flag":   {args: []string{"--nope"}, code: exitUsage, msg: "unknown flag --nope"},
		"extra argument": {args: []string{"--config", bad, "extra"}, code: exitUsage, msg: "unexpected argument"},
		"bad config":     {args: []string{"--config", bad}, code: exitUsage, msg: "invalid proxy config"},
		"bad tunnels":    {args: []string{"--config", bad, "--max-tunnels", "0"}, code: exitUsage, msg: "--max-tunnels"},
		"upstream ca":    {args: []string{"--config", bad, "--upstream-ca", bad}, code: exitUsage, msg: "no PEM certificates"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			got := run(context.Background(), tc.args, &stdout, &stderr, nil)
			if got != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", got, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.msg)
			}
		})
	}
}

// TestRunOTLPEnv: the standard OTEL_EXPORTER_OTLP_* variables turn the
// request log's export on, and the startup line names the collector's
// origin only; a protocol keyhole-proxy does not send is a usage error
// naming the variable.
func TestRunOTLPEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1/base?key=CANARY-otlp")
	p := startRun(t)
	p.stop(t)
	if !strings.Contains(p.stderr.String(), `"otlp_logs":"http://127.0.0.1:1"`) || strings.Contains(p.stderr.String(), "CANARY-otlp") {
		t.Errorf("the startup line does not name the collector's origin alone: %s", p.stderr.String())
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	var stdout, stderr syncBuffer
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.json")
	os.WriteFile(cfg, []byte(`{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"}}`), 0o600)
	if code := run(context.Background(), []string{"--config", cfg}, &stdout, &stderr, nil); code != exitUsage || !strings.Contains(stderr.String(), "OTEL_EXPORTER_OTLP_PROTOCOL is \"grpc\"") {
		t.Errorf("exit %d, stderr %q; want a usage error naming the protocol variable", code, stderr.String())
	}
}

// TestRunFlushesLogOnShutdown checks the batched log end to end: with a
// long flush interval a request line waits in the buffer, and a shutdown
// writes it, before the "stopped" line.
func TestRunFlushesLogOnShutdown(t *testing.T) {
	p := startRun(t, "--admin-listen", "", "--log-flush-interval", "1h")
	// A CONNECT to a host the config does not allow: refused, and logged.
	conn, err := net.Dial("tcp", p.listen.String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	conn.Close()
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT to a host not allowed: %v, %v", resp, err)
	}
	const line = `"host":"example.com","method":"CONNECT"`
	if strings.Contains(p.stderr.String(), line) {
		t.Fatalf("the request line was written before the flush interval: %s", p.stderr.String())
	}
	p.stop(t)
	out := p.stderr.String()
	i, j := strings.Index(out, line), strings.Index(out, `"msg":"keyhole-proxy stopped"`)
	if i < 0 || j < 0 || i > j {
		t.Fatalf("want the request line, then the stopped line, after shutdown:\n%s", out)
	}
}

// TestRunDNSListen: --dns-listen answers on one port, UDP and TCP, the
// config's names only, and says where in the listening line; an address
// it cannot bind is a runtime failure naming the flag.
func TestRunDNSListen(t *testing.T) {
	p := startRun(t, "--dns-listen", "127.0.0.1:0", "--log-flush-interval", "0")
	m := regexp.MustCompile(`"dns":"(127\.0\.0\.1:[0-9]+)"`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no dns address in the listening line: %s", p.stderr.String())
	}
	tests := map[string]struct {
		net, name string
		rcode     int
	}{
		"udp, allowed":     {net: "udp", name: "pypi.org.", rcode: dns.RcodeSuccess},
		"tcp, allowed":     {net: "tcp", name: "pypi.org.", rcode: dns.RcodeSuccess},
		"udp, not allowed": {net: "udp", name: "data.exfil.example.", rcode: dns.RcodeNameError},
		"tcp, not allowed": {net: "tcp", name: "data.exfil.example.", rcode: dns.RcodeNameError},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q := new(dns.Msg)
			q.SetQuestion(tc.name, dns.TypeA)
			r, _, err := (&dns.Client{Net: tc.net, Timeout: 5 * time.Second}).Exchange(q, m[1])
			if err != nil {
				t.Fatal(err)
			}
			if r.Rcode != tc.rcode || (len(r.Answer) == 1) != (tc.rcode == dns.RcodeSuccess) {
				t.Fatalf("reply %v, want %s", r, dns.RcodeToString[tc.rcode])
			}
		})
	}
	p.stop(t)
	if n := strings.Count(p.stderr.String(), `"msg":"dns"`); n != len(tests) {
		t.Errorf("%d dns log lines, want %d:\n%s", n, len(tests), p.stderr.String())
	}

	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.json")
	os.WriteFile(cfg, []byte(`{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},"passthrough":["pypi.org"]}`), 0o600)
	var stdout, stderr syncBuffer
	code := run(context.Background(), []string{"--config", cfg, "--listen", "127.0.0.1:0", "--admin-listen", "", "--dns-listen", taken.LocalAddr().String()}, &stdout, &stderr, nil)
	if code != exitRuntime || !strings.Contains(stderr.String(), "--dns-listen: ") {
		t.Fatalf("exit %d, stderr %q; want %d naming --dns-listen", code, stderr.String(), exitRuntime)
	}
}
