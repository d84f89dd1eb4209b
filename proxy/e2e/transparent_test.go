//go:build e2e

package e2e

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"keyhole.dev/keyhole/internal/proxylog"
)

// proxyUID runs the proxy in the network-namespace tests, as the render
// runs it: not root. The clients run as root, as a sandbox may; the rules
// exempt the proxy's UID only.
const proxyUID = 64123

// podResolvConf is a Kubernetes pod's resolv.conf, with the resolver of
// the netns tests (198.18.0.1).
const podResolvConf = "search agents.svc.cluster.local svc.cluster.local cluster.local\nnameserver 198.18.0.1\noptions ndots:5 timeout:2 attempts:1\n"

// netnsSandbox is a sandbox pod's network built in two network
// namespaces of the test's own: "up" holds the upstreams (api.github.com
// and github.com), a resolver and an attacker's servers; "sb" holds the
// proxy (UID proxyUID, explicit listener 127.0.0.1:3128 and transparent
// listener 127.0.0.1:3129, as rendered) and the clients, its rules
// installed by keyhole-proxy transparent-init with the machine's
// iptables-restore. In "sb", /etc/hosts (ip netns exec's
// /etc/netns/NAME/hosts) points the GitHub names at the attacker's
// address: a client that bypasses the proxy reaches the right server only
// because the proxy dials by name. Nothing outside the two namespaces and
// that hosts file is touched; all are removed on every exit path.
type netnsSandbox struct {
	w       *world
	ipTool  string
	nsUp    string
	nsSb    string
	pub     string // a directory every UID may read: the trust files
	api     *upstream
	tcpHits map[string]*atomic.Int32
	udpHits map[string]*atomic.Int32
	// resolver is the pod's resolver (198.18.0.1:53, UDP and TCP),
	// recording every name it is asked; only the proxy's own lookups
	// may reach it.
	resolver *recordingResolver
	logs     *proxylog.Buffer
}

func newNetnsSandbox(t testing.TB) *netnsSandbox {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the transparent-mode tests create network namespaces and iptables rules: run them as root")
	}
	n := &netnsSandbox{ipTool: requireTool(t, "ip"), tcpHits: map[string]*atomic.Int32{}, udpHits: map[string]*atomic.Int32{}, logs: &proxylog.Buffer{}}
	requireTool(t, "iptables-restore")
	requireTool(t, "ip6tables-restore")
	sfx := make([]byte, 3)
	rand.Read(sfx)
	id := hex.EncodeToString(sfx)
	n.nsUp, n.nsSb = "khtp-up-"+id, "khtp-sb-"+id
	hostsDir := filepath.Join("/etc/netns", n.nsSb)
	_, statErr := os.Stat("/etc/netns")
	madeEtcNetns := os.IsNotExist(statErr)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(n.ipTool, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		// Deleting a namespace deletes its veth end, and the peer with it.
		for _, ns := range []string{n.nsSb, n.nsUp} {
			exec.Command(n.ipTool, "netns", "del", ns).Run()
		}
		os.RemoveAll(hostsDir)
		if madeEtcNetns {
			os.Remove("/etc/netns") // only if empty: another test's may be there
		}
	})
	run("netns", "add", n.nsUp)
	run("netns", "add", n.nsSb)
	run("-n", n.nsUp, "link", "add", "khu"+id, "type", "veth", "peer", "name", "khs"+id, "netns", n.nsSb)
	for _, c := range [][]string{
		{"-n", n.nsUp, "link", "set", "lo", "up"},
		{"-n", n.nsUp, "link", "set", "khu" + id, "up"},
		{"-n", n.nsUp, "addr", "add", "198.18.0.1/24", "dev", "khu" + id},
		{"-n", n.nsUp, "addr", "add", "198.18.0.3/24", "dev", "khu" + id},
		{"-n", n.nsUp, "addr", "add", "fd6b:6b::3/64", "dev", "khu" + id, "nodad"},
		{"-n", n.nsSb, "link", "set", "lo", "up"},
		{"-n", n.nsSb, "link", "set", "khs" + id, "up"},
		{"-n", n.nsSb, "addr", "add", "198.18.0.2/24", "dev", "khs" + id},
		{"-n", n.nsSb, "addr", "add", "fd6b:6b::2/64", "dev", "khs" + id, "nodad"},
		{"-n", n.nsSb, "route", "add", "default", "via", "198.18.0.1"},
	} {
		run(c...)
	}
	if err := os.MkdirAll(hostsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(hostsDir, "hosts"), []byte("127.0.0.1 localhost\n198.18.0.3 api.github.com github.com\n"))
	// A pod's resolv.conf, which the proxy and glibc in the sandbox's
	// namespace read (ip netns exec mounts it over /etc/resolv.conf).
	writeFile(t, filepath.Join(hostsDir, "resolv.conf"), []byte(podResolvConf))
	for _, f := range []string{"hosts", "resolv.conf"} {
		os.Chmod(filepath.Join(hostsDir, f), 0o644) // as in a pod: the proxy's user reads them
	}

	w := &world{dir: t.TempDir()}
	n.w = w
	w.sandboxCA = newCA(t, filepath.Join(w.dir, "sandbox-ca"), "keyhole-e2e-sandbox-ca")
	w.upstreamCA = newCA(t, filepath.Join(w.dir, "upstream-ca"), "keyhole-e2e-upstream-ca")
	w.secretsDir = filepath.Join(w.dir, "secrets")
	w.setToken(t, canary(t))
	w.secret = newSecretVolume(t, w.secretsDir, "acme-github-token", map[string]string{"user": "x-access-token", "token": w.token})
	w.apiState = &fakeAPI{}
	w.apiState.setToken(w.token)
	w.gitState = newGitServer(t, filepath.Join(w.dir, "git-root"))
	w.gitState.setToken(w.token)
	// The proxy's user reads the CA and the Secret, as the kubelet's
	// fsGroup lets it; the clients' files are readable by anyone.
	os.Chmod(filepath.Dir(w.dir), 0o755)
	os.Chmod(w.dir, 0o755)
	for _, d := range []string{w.secretsDir, filepath.Join(w.dir, "sandbox-ca"), filepath.Join(w.dir, "upstream-ca")} {
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, proxyUID, proxyUID) })
	}
	pub, err := os.MkdirTemp("", "keyhole-e2e-transparent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	os.Chmod(pub, 0o755)
	n.pub = pub
	resolv := filepath.Join(w.dir, "resolv.conf")
	writeFile(t, resolv, []byte("nameserver 198.18.0.1\n"))

	inNetns(t, n.nsUp, func() {
		ln, err := net.Listen("tcp", "198.18.0.1:443")
		if err != nil {
			t.Fatal(err)
		}
		n.api = serveUpstream(t, ln, w.upstreamCA, []string{"api.github.com"}, w.apiState)
		w.api = n.api
		gln, err := net.Listen("tcp", "198.18.0.1:8443")
		if err != nil {
			t.Fatal(err)
		}
		w.git = serveUpstream(t, gln, w.upstreamCA, []string{"github.com"}, w.gitState)
		for _, a := range []string{"198.18.0.3:443", "198.18.0.3:8080", "[fd6b:6b::3]:443"} {
			n.tcpHits[a] = countTCP(t, a)
		}
		for _, a := range []string{"198.18.0.3:443", "198.18.0.3:53"} {
			n.udpHits[a] = countUDP(t, a)
		}
		n.resolver = newRecordingResolver(t, "198.18.0.1:53")
		n.udpHits["198.18.0.1:53"] = &n.resolver.datagrams
	})

	// The proxy, as the sidecar, as its own user.
	startSidecar(t, n.ipTool, n.nsSb, n.logs, func() { w.assertNoSecret(t, "proxy output", n.logs.String()) },
		"--ca-cert", w.sandboxCA.CertFile, "--ca-key", w.sandboxCA.KeyFile, "--secrets-dir", w.secretsDir,
		"--resolve", "api.github.com:443:198.18.0.1:443", "--resolve", "github.com:443:198.18.0.1:8443",
		"--upstream-ca", w.upstreamCA.CertFile)
	uid := fmt.Sprint(proxyUID)

	// The rules, as the init container installs them.
	if out, err := exec.Command(n.ipTool, "netns", "exec", n.nsSb, proxyBin, "transparent-init",
		"--proxy-uid", uid, "--port", "3129", "--dns-port", "3053", "--admin-port", "9090", "--resolv-conf", resolv).CombinedOutput(); err != nil {
		t.Fatalf("transparent-init: %v\n%s", err, out)
	}
	return n
}

// run runs a client in the sandbox's namespace as root, with exactly env.
func (n *netnsSandbox) run(env []string, dir, name string, args ...string) (string, error) {
	cmd := exec.Command(n.ipTool, append([]string{"netns", "exec", n.nsSb, name}, args...)...)
	cmd.Env = env
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestTransparentNetns: clients that ignore any proxy reach only what the
// policy allows, and only through the proxy.
func TestTransparentNetns(t *testing.T) {
	curl := requireTool(t, "curl")
	bash := requireTool(t, "bash")
	n := newNetnsSandbox(t)
	bundle := filepath.Join(n.pub, "bundle.pem")
	if err := os.WriteFile(bundle, n.w.sandboxCA.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	curlArgs := func(extra ...string) []string {
		return append([]string{"-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", bundle}, extra...)
	}
	const path = "https://api.github.com/repos/acme/widgets"
	tests := map[string]struct {
		env     []string
		name    string
		args    []string
		want    string // curl's status code, "" for a failure
		apiSeen bool   // the upstream got the request with the credential
		tcp     string // an attacker TCP server that must see nothing
		udp     string // a UDP server that must see nothing ("" none)
	}{
		"injected host, no proxy env": {name: curl, args: curlArgs("--resolve", "api.github.com:443:198.18.0.1", path),
			want: "200", apiSeen: true},
		"allowed SNI at the attacker's address": {name: curl, args: curlArgs("--resolve", "api.github.com:443:198.18.0.3", path),
			want: "200", apiSeen: true, tcp: "198.18.0.3:443"},
		"forbidden host": {name: curl, args: curlArgs("-k", "--resolve", "evil.example:443:198.18.0.3", "https://evil.example/"),
			tcp: "198.18.0.3:443"},
		"IP literal, no SNI":  {name: curl, args: curlArgs("-k", "https://198.18.0.3/"), tcp: "198.18.0.3:443"},
		"plain TCP elsewhere": {name: curl, args: curlArgs("http://198.18.0.3:8080/"), tcp: "198.18.0.3:8080"},
		"IPv6 egress":         {name: curl, args: curlArgs("-k", "-g", "https://[fd6b:6b::3]/"), tcp: "[fd6b:6b::3]:443"},
		"explicit proxy on loopback": {env: []string{"HTTPS_PROXY=http://127.0.0.1:3128"}, name: curl,
			args: curlArgs(path), want: "200", apiSeen: true},
		"UDP (QUIC) to the attacker": {name: bash, args: []string{"-c", "echo x >/dev/udp/198.18.0.3/443"}, udp: "198.18.0.3:443"},
		"DNS to another server":      {name: bash, args: []string{"-c", "echo x >/dev/udp/198.18.0.3/53"}, udp: "198.18.0.3:53"},
		"DNS to the resolver":        {name: bash, args: []string{"-c", "echo x >/dev/udp/198.18.0.1/53"}, udp: "198.18.0.1:53"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(n.api.requests())
			tcpBefore, udpBefore := int32(0), int32(0)
			if tc.tcp != "" {
				tcpBefore = n.tcpHits[tc.tcp].Load()
			}
			if tc.udp != "" {
				udpBefore = n.udpHits[tc.udp].Load()
			}
			out, err := n.run(append([]string{"PATH=/usr/bin:/bin", "HOME=" + n.pub}, tc.env...), n.pub, tc.name, tc.args...)
			if tc.want != "" && (err != nil || out != tc.want) {
				t.Fatalf("got %q (%v), want status %s", out, err, tc.want)
			}
			if tc.want == "" && tc.name == curl && err == nil && out != "000" {
				t.Fatalf("curl got status %s, want a failed connection", out)
			}
			seen := n.api.requests()[before:]
			if tc.apiSeen != (len(seen) == 1) {
				t.Fatalf("upstream saw %d requests, want apiSeen=%v", len(seen), tc.apiSeen)
			}
			if tc.apiSeen && seen[0].Header.Get("Authorization") != "Bearer "+n.w.token {
				t.Errorf("upstream did not get the injected credential")
			}
			time.Sleep(100 * time.Millisecond) // a datagram in flight lands
			if tc.tcp != "" && n.tcpHits[tc.tcp].Load() != tcpBefore {
				t.Errorf("the attacker's %s accepted a connection", tc.tcp)
			}
			if tc.udp != "" && n.udpHits[tc.udp].Load() != udpBefore {
				t.Errorf("the attacker's %s/udp got a datagram", tc.udp)
			}
		})
	}
}

// startSidecar runs keyhole-proxy in the network namespace ns as the
// proxy's own user, as the sidecar runs, on testdata/netns.json with the
// listeners transparent-init's rules expect and args, its output in logs,
// and returns once it listens. When t ends the proxy is interrupted
// (killed after 10 s), then stopped runs, if not nil, and the output is
// logged if t failed.
func startSidecar(t testing.TB, ipTool, ns string, logs *proxylog.Buffer, stopped func(), args ...string) {
	t.Helper()
	setpriv := requireTool(t, "setpriv")
	uid := fmt.Sprint(proxyUID)
	proxy := exec.Command(ipTool, append([]string{"netns", "exec", ns, setpriv, "--reuid", uid, "--regid", uid, "--clear-groups", "--", proxyBin,
		"--config", mustAbs(t, "testdata/netns.json"),
		"--listen", "127.0.0.1:3128", "--transparent-listen", "127.0.0.1:3129", "--dns-listen", "127.0.0.1:3053", "--admin-listen", ":9090",
		"--log-flush-interval", "0"}, args...)...)
	proxy.Env = []string{"PATH=" + os.Getenv("PATH")}
	proxy.Stdout, proxy.Stderr = logs, logs
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { proxy.Wait(); close(exited) }()
	t.Cleanup(func() {
		proxy.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			proxy.Process.Kill()
			<-exited
		}
		if stopped != nil {
			stopped()
		}
		if t.Failed() {
			t.Logf("proxy output:\n%s", logs.String())
		}
	})
	eventually(t, "the proxy listening", func() bool { return strings.Contains(logs.String(), `"dns":"127.0.0.1:3053"`) })
}

// inNetns runs f on a thread switched into the named network namespace:
// the sockets f opens stay in it after the thread switches back.
func inNetns(t testing.TB, name string, f func()) {
	t.Helper()
	target, err := os.Open(filepath.Join("/var/run/netns", name))
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			t.Error(err)
			runtime.UnlockOSThread()
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			t.Error(err)
			runtime.UnlockOSThread()
			return
		}
		f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and dies with this goroutine,
			// so no other goroutine runs in the wrong namespace.
			t.Error(err)
			return
		}
		runtime.UnlockOSThread()
	}()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// countTCP counts connections accepted on addr.
func countTCP(t testing.TB, addr string) *atomic.Int32 {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n := &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return n
}

// countUDP counts datagrams received on addr.
func countUDP(t testing.TB, addr string) *atomic.Int32 {
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	n := &atomic.Int32{}
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return n
}

func mustAbs(t testing.TB, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// eventually polls cond for up to 10s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkNetnsNewConnection measures one new connection (TLS handshake
// with the proxy's cached leaf, one injected request, close) made from
// inside the sandbox's network namespace, as the sandbox makes it:
// through the kernel's nat redirect to the transparent listener, beside
// the same through CONNECT to the explicit listener. Wall time per
// connection; the proxy runs in its own process.
func BenchmarkNetnsNewConnection(b *testing.B) {
	n := newNetnsSandbox(b)
	dial, stop := nsDialer(b, n.nsSb)
	defer stop()
	roots := n.w.sandboxCA.Pool()
	const req = "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nConnection: close\r\n\r\n"
	get := func(b *testing.B, c net.Conn) {
		tc := tls.Client(c, &tls.Config{ServerName: "api.github.com", RootCAs: roots, NextProtos: []string{"http/1.1"}})
		if _, err := io.WriteString(tc, req); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		tc.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.Status)
		}
	}
	b.Run("connect", func(b *testing.B) {
		for b.Loop() {
			c, err := dial("127.0.0.1:3128")
			if err != nil {
				b.Fatal(err)
			}
			io.WriteString(c, "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != 200 || br.Buffered() > 0 {
				b.Fatalf("CONNECT: %v %v", resp, err)
			}
			get(b, c)
		}
	})
	b.Run("transparent", func(b *testing.B) {
		for b.Loop() {
			c, err := dial("198.18.0.3:443") // the attacker's address: redirected
			if err != nil {
				b.Fatal(err)
			}
			get(b, c)
		}
	})
}

// nsDialer dials from a thread switched into the named network namespace,
// so the sockets belong to it; the connections are then used from any
// goroutine.
func nsDialer(t testing.TB, name string) (dial func(addr string) (net.Conn, error), stop func()) {
	type result struct {
		c   net.Conn
		err error
	}
	reqs := make(chan string)
	res := make(chan result)
	done := make(chan struct{})
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		target, err := os.Open(filepath.Join("/var/run/netns", name))
		if err != nil {
			ready <- err
			return
		}
		defer target.Close()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			ready <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for {
			select {
			case addr := <-reqs:
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				res <- result{c, err}
			case <-done:
				if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
					runtime.UnlockOSThread()
				}
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	return func(addr string) (net.Conn, error) {
			reqs <- addr
			r := <-res
			return r.c, r.err
		}, func() {
			close(done)
		}
}
