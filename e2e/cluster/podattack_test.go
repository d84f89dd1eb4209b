//go:build e2e

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Where the pod attacks aim on the node, besides the API server and the
// kubelet. metadataIP is the cloud metadata address, which the node holds
// on a dummy interface as a cloud node answers it; canaryPort is a port nothing
// of the cluster uses, on the node and on metadataIP.
const (
	metadataIP = "169.254.169.254"
	canaryPort = 9999
)

// canaries listen on the node for what a sandbox sends past its proxy:
// TCP and UDP on the node's address and the metadata address. A hit is
// egress the pod's rules should have stopped.
type canaries struct {
	mu   sync.Mutex
	hits []string
	lns  []net.Listener
	pcs  []net.PacketConn
}

func startCanaries() (*canaries, error) {
	c := &canaries{}
	for _, addr := range []string{
		net.JoinHostPort(nodeIP, strconv.Itoa(canaryPort)),
		net.JoinHostPort(metadataIP, "80"),
		net.JoinHostPort(metadataIP, "53"),
	} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			c.close()
			return nil, err
		}
		c.lns = append(c.lns, ln)
		go c.acceptLoop(ln)
	}
	for _, addr := range []string{
		net.JoinHostPort(nodeIP, strconv.Itoa(canaryPort)),
		net.JoinHostPort(metadataIP, "53"),
	} {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			c.close()
			return nil, err
		}
		c.pcs = append(c.pcs, pc)
		go c.readLoop(pc)
	}
	return c, nil
}

func (c *canaries) record(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hits = append(c.hits, fmt.Sprintf(format, args...))
}

func (c *canaries) acceptLoop(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 64)
			n, _ := conn.Read(buf)
			c.record("tcp %s from %s: %q", ln.Addr(), conn.RemoteAddr(), buf[:n])
		}()
	}
}

func (c *canaries) readLoop(pc net.PacketConn) {
	buf := make([]byte, 512)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		c.record("udp %s from %s: %q", pc.LocalAddr(), from, buf[:min(n, 64)])
	}
}

// take returns the hits so far and forgets them.
func (c *canaries) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hits
	c.hits = nil
	return h
}

func (c *canaries) close() {
	for _, ln := range c.lns {
		ln.Close()
	}
	for _, pc := range c.pcs {
		pc.Close()
	}
}

// podProbe is the sandbox's attack script: everything a prompt-injected
// agent would try from inside the sandbox container to reach the
// credential, the proxy's keys or the network past the proxy. It runs
// once per mode (one exec), never prints anything it found beyond
// status lines and the bodies the test searches, and answers one JSON
// object: probe name to "ok ..." or "err <exception> ...".
const podProbe = `
import http.client, json, os, re, socket, ssl, struct, subprocess, sys, time, urllib.parse
NODE, META, CANARY = os.environ["NODE"], os.environ["META"], int(os.environ["CANARY"])
PROXY, ADMIN, PROXYPOD = os.environ["PROXY"], os.environ["ADMIN"], os.environ["PROXYPOD"]
# In deployment mode the sandbox knows its proxy as its variables give it:
# the Service's cluster IP, with no DNS to look a name up.
PROXY = PROXY or urllib.parse.urlsplit(os.environ["HTTPS_PROXY"]).netloc
R = {}
def probe(name, f):
    try:
        R[name] = "ok " + str(f())
    except BaseException as e:
        R[name] = "err " + type(e).__name__ + " " + str(e)

def status():
    out = []
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("CapEff", "CapBnd", "NoNewPrivs", "Seccomp"):
            out.append(k + "=" + v.strip())
    return " ".join(out)
probe("status", status)
probe("id", lambda: "uid=%d gid=%d groups=%s" % (os.getuid(), os.getgid(), os.getgroups()))

def child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            fn()
            os._exit(0)
        except PermissionError:
            os._exit(13)
        except BaseException:
            os._exit(1)
    _, st = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(st)
    if code == 13:
        raise PermissionError("denied in the child")
    if code != 0:
        raise OSError("child exit %d" % code)
    return "done"
def as_proxy_user():
    os.setgroups([64123])
    os.setresgid(64123, 64123, 64123)
    os.setresuid(64123, 64123, 64123)
    s = socket.create_connection((NODE, CANARY), 3)
    s.sendall(b"as-proxy-uid")
    s.close()
probe("setuid to the proxy's user", lambda: child(as_proxy_user))
probe("user namespace", lambda: subprocess.run(["unshare", "-Ur", "id", "-u"], capture_output=True, check=True, timeout=10).stdout)
probe("raw socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW))
probe("packet socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)))

def ping():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.settimeout(2)
    s.sendto(struct.pack("!BBHHH", 8, 0, 0xf7fe, 0, 1), (NODE, 0))
    return s.recvfrom(64)[1]
probe("icmp to the node", ping)

def procs():
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                out.append(open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode(errors="replace")[:80])
            except OSError:
                pass
    return out
probe("processes", procs)
probe("interfaces", lambda: [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]])

def append(path, text):
    with open(path, "a") as f:
        f.write(text)
    return "written"
probe("write /etc/hosts", lambda: append("/etc/hosts", "\n" + META + " keyhole-pod-attack.example\n"))
probe("write /etc/resolv.conf", lambda: append("/etc/resolv.conf", "\n# keyhole-pod-attack\n"))
probe("write the trust directory", lambda: append("/etc/keyhole/trust/bundle.pem", "x"))
probe("service account token", lambda: [p for p in ("/var/run/secrets/kubernetes.io", "/run/secrets/kubernetes.io") if os.path.exists(p)] or "none")

insecure = ssl.create_default_context()
insecure.check_hostname = False
insecure.verify_mode = ssl.CERT_NONE
def https(host, port, path, method="GET"):
    c = http.client.HTTPSConnection(host, port, context=insecure, timeout=5)
    c.request(method, path)
    r = c.getresponse()
    return "%d %s" % (r.status, r.read(300))
def http_(host, port, path):
    c = http.client.HTTPConnection(host, port, timeout=5)
    c.request("GET", path)
    r = c.getresponse()
    return "%d %s" % (r.status, r.read(2000))
secret = "/api/v1/namespaces/agents/secrets/acme-github-token"
probe("API server by its Service", lambda: https(os.environ.get("KUBERNETES_SERVICE_HOST", "10.96.0.1"), int(os.environ.get("KUBERNETES_SERVICE_PORT", "443")), secret))
probe("API server on the node", lambda: https(NODE, 6443, secret))
probe("kubelet", lambda: https(NODE, 10250, "/pods"))
probe("kubelet exec in the proxy", lambda: https(NODE, 10250, "/run/agents/%s/egress-proxy?cmd=/keyhole-proxy+--version" % PROXYPOD, "POST"))
probe("kubelet read-only port", lambda: http_(NODE, 10255, "/pods"))
probe("metadata", lambda: http_(META, 80, "/latest/meta-data/"))

def tcp(host, port, data, opts=()):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    for k, v in opts:
        s.setsockopt(socket.SOL_SOCKET, k, v)
    s.settimeout(3)
    s.connect((host, port))
    s.sendall(data)
    got = s.recv(200)
    s.close()
    return got
probe("tcp to the node", lambda: tcp(NODE, CANARY, b"direct tcp\n"))
probe("tcp bound to lo", lambda: tcp(NODE, CANARY, b"bound to lo\n", [(getattr(socket, "SO_BINDTODEVICE", 25), b"lo\0")]))
probe("tcp over IPv6", lambda: tcp("fd00::1", 443, b"v6\n"))
def udp(host, port):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    s.sendto(b"udp escape", (host, port))
    try:
        return s.recvfrom(64)
    except socket.timeout:
        return "sent, no answer"
probe("udp to the node", lambda: udp(NODE, CANARY))
probe("udp 53 to another resolver", lambda: udp(META, 53))
probe("tcp 53 to a server of its own", lambda: tcp(META, 53, b"tcp 53 escape\n"))
probe("udp over IPv6", lambda: udp("fd00::1", 53))

host, port = ADMIN.rsplit(":", 1)
for path in ("/metrics", "/healthz", "/debug/pprof/", "/debug/vars", "/config", "/"):
    probe("admin " + path, lambda: http_(host, int(port), path))

def via_proxy(line):
    host, port = PROXY.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), 5)
    target = line.split(" ")[1]
    hdr = target.split("/")[2] if "://" in target else target
    s.sendall((line + " HTTP/1.1\r\nHost: " + hdr + "\r\n\r\n").encode())
    got = s.recv(400).decode(errors="replace")
    s.close()
    return " ".join(l for l in got.split("\r\n") if l.startswith("HTTP/") or l.lower().startswith("x-omnia-egress-refused"))
for line in ("CONNECT 127.0.0.1:9090", "CONNECT localhost:9090", "CONNECT 127.0.0.1:3128", "CONNECT 127.0.0.1:3129",
             "CONNECT " + ADMIN, "CONNECT 10.96.0.1:443", "CONNECT kubernetes.default.svc:443", "CONNECT " + NODE + ":10250",
             "CONNECT " + META + ":80", "GET http://127.0.0.1:9090/metrics", "GET http://" + META + "/latest/meta-data/"):
    probe("proxy " + line, lambda: via_proxy(line))

def transparent_direct():
    s = socket.create_connection(("127.0.0.1", 3129), 3)
    s = ssl.create_default_context().wrap_socket(s, server_hostname="api.github.com")
    return s.version()
if os.environ["MODE"] == "sidecar":
    probe("transparent listener dialled directly", transparent_direct)
print(json.dumps(R, sort_keys=True))
`

// podAttack runs podProbe in the sandbox container and returns its
// results and its whole output (which the caller searches for the
// credential).
func (c *cluster) podAttack(t *testing.T, ctx context.Context, mode string) (map[string]string, string) {
	t.Helper()
	proxy, admin, proxyPod := "127.0.0.1:3128", "127.0.0.1:9090", "none"
	if mode == "deployment" {
		out, err := c.kubectl(ctx, nil, "get", "pods", "-n", acmeNS, "-l", "app.kubernetes.io/component=egress-proxy",
			"--field-selector=status.phase=Running", "-o", `jsonpath={.items[0].metadata.name} {.items[0].status.podIP}`)
		if err != nil {
			t.Fatal(err)
		}
		name, ip, _ := strings.Cut(out, " ")
		proxy, admin, proxyPod = "", net.JoinHostPort(ip, "9090"), name
	}
	out, err := c.kubectl(ctx, []byte(podProbe), "exec", "-i", "-n", acmeNS, "deployment/"+acmeSandbox, "-c", "sandbox", "--",
		"env", "MODE="+mode, "NODE="+nodeIP, "META="+metadataIP, "CANARY="+strconv.Itoa(canaryPort),
		"PROXY="+proxy, "ADMIN="+admin, "PROXYPOD="+proxyPod, "python3", "-")
	if err != nil {
		t.Fatalf("the attack script: %v\n%s", err, out)
	}
	res := map[string]string{}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("the attack script's output: %v\n%s", err, out)
	}
	return res, out
}

// Capability bits of /proc/<pid>/status's CapEff.
const (
	capSetgid   = 6
	capSetuid   = 7
	capNetAdmin = 12
	capNetRaw   = 13
)

// checkPodAttacks plays a prompt-injected agent in the sandbox container
// of the rendered pod: it tries the pod's and the node's ways to the
// credential, the proxy's keys and the network past the proxy, and
// requires each to fail. In the sidecar pod its packet filter stops the
// network escapes; in deployment mode the sandbox's NetworkPolicy does,
// enforced by kube-router's policy controller.
func (c *cluster) checkPodAttacks(t *testing.T, ctx context.Context, mode, token string, can *canaries) {
	t.Run("pod attacks", func(t *testing.T) {
		can.take()
		res, raw := c.podAttack(t, ctx, mode)
		time.Sleep(2 * time.Second) // let a packet that got out arrive
		var hits []string
		// Port 53 is no way out either: in the sidecar pod it is sent to
		// the proxy's DNS listener, and the deployment-mode sandbox's
		// NetworkPolicy admits no DNS at all.
		hits = append(hits, can.take()...)
		if strings.Contains(raw, token) {
			// Never printed: the results are logged below only without it.
			t.Errorf("the credential is in what the sandbox read")
			raw = strings.ReplaceAll(raw, token, "[the credential]")
		}
		sidecar := mode == "sidecar"
		refused := func(t *testing.T, name string) {
			t.Helper()
			if r, ok := res[name]; !ok || !strings.HasPrefix(r, "err ") {
				t.Errorf("%s: %q, want a failure", name, r)
			}
		}
		status := func(t *testing.T, name, want string) {
			t.Helper()
			if r := res[name]; !strings.HasPrefix(r, "ok "+want) {
				t.Errorf("%s: %q, want status %s", name, r, want)
			}
		}
		tests := map[string]struct {
			sidecarOnly bool
			check       func(t *testing.T)
		}{
			"no capability to change users, the rules or raw sockets; no_new_privs; seccomp": {check: func(t *testing.T) {
				st := res["status"]
				eff, err := strconv.ParseUint(between(st+" ", "CapEff=", " "), 16, 64)
				if err != nil {
					t.Fatalf("status: %q", st)
				}
				banned := []int{capNetAdmin, capNetRaw}
				if sidecar {
					banned = append(banned, capSetuid, capSetgid)
				}
				for _, b := range banned {
					if eff&(1<<b) != 0 {
						t.Errorf("CapEff %x holds capability %d", eff, b)
					}
				}
				for _, w := range []string{"NoNewPrivs=1", "Seccomp=2"} {
					if !strings.Contains(st, w) {
						t.Errorf("status %q lacks %s", st, w)
					}
				}
			}},
			"raw and packet sockets": {check: func(t *testing.T) {
				refused(t, "raw socket")
				refused(t, "packet socket")
			}},
			"a user namespace": {check: func(t *testing.T) { refused(t, "user namespace") }},
			"become the proxy's user": {sidecarOnly: true, check: func(t *testing.T) {
				refused(t, "setuid to the proxy's user")
			}},
			"no other container's processes": {check: func(t *testing.T) {
				if strings.Contains(res["processes"], "keyhole-proxy") || strings.Contains(res["processes"], "pause") {
					t.Errorf("the sandbox sees the pod's other processes: %s", res["processes"])
				}
			}},
			"not on the node's network": {check: func(t *testing.T) {
				if strings.Contains(res["interfaces"], "'"+bridgeName+"'") {
					t.Errorf("the sandbox sees the node's interfaces: %s", res["interfaces"])
				}
			}},
			"no service account token":         {check: func(t *testing.T) { status(t, "service account token", "none") }},
			"the trust directory is read-only": {check: func(t *testing.T) { refused(t, "write the trust directory") }},
			"the API server": {check: func(t *testing.T) {
				for _, n := range []string{"API server by its Service", "API server on the node"} {
					if !sidecar {
						// The sandbox's NetworkPolicy admits only
						// the proxy.
						refused(t, n)
					} else if r := res[n]; !strings.HasPrefix(r, "err ") && !strings.HasPrefix(r, "ok 401") {
						t.Errorf("%s: %q, want a failure or 401", n, r)
					}
				}
			}},
			"the kubelet": {check: func(t *testing.T) {
				for _, n := range []string{"kubelet", "kubelet exec in the proxy"} {
					if !sidecar {
						refused(t, n)
					} else if r := res[n]; !strings.HasPrefix(r, "err ") && !strings.HasPrefix(r, "ok 401") {
						t.Errorf("%s: %q, want a failure or 401", n, r)
					}
				}
				refused(t, "kubelet read-only port")
			}},
			"the proxy's admin port is closed to the sandbox": {check: func(t *testing.T) {
				// In the sidecar pod the pod's rules refuse it to every
				// user but the proxy's; in deployment mode the
				// sandbox's NetworkPolicy admits only the proxy port.
				// The kubelet's probes come from the node; what other
				// pods get is "network policy" below.
				for _, p := range []string{"/metrics", "/healthz", "/debug/pprof/", "/debug/vars", "/config", "/"} {
					refused(t, "admin "+p)
				}
				if strings.Contains(raw, "PRIVATE KEY") {
					t.Errorf("a private key in what the sandbox read")
				}
			}},
			"the proxy refuses to reach itself, the node and the cluster": {check: func(t *testing.T) {
				n := 0
				for name, r := range res {
					if !strings.HasPrefix(name, "proxy ") {
						continue
					}
					n++
					if !strings.Contains(r, " 403 ") || !strings.Contains(r, "host-not-allowed") {
						t.Errorf("%s: %q, want 403 host-not-allowed", name, r)
					}
				}
				if n < 10 {
					t.Errorf("%d requests to the proxy in the results, want at least 10", n)
				}
			}},
			"the transparent listener dialled directly": {sidecarOnly: true, check: func(t *testing.T) {
				refused(t, "transparent listener dialled directly")
			}},
			"the metadata address": {check: func(t *testing.T) {
				// The canary never answers, so the request's own
				// failure proves little; what arrived does.
				refused(t, "metadata")
				for _, h := range hits {
					if strings.HasPrefix(h, "tcp "+net.JoinHostPort(metadataIP, "80")+" ") {
						t.Errorf("reached the metadata address: %s", h)
					}
				}
			}},
			"TCP, UDP, ICMP and IPv6 past the proxy": {check: func(t *testing.T) {
				for _, n := range []string{"tcp to the node", "tcp bound to lo", "tcp over IPv6", "udp to the node", "udp 53 to another resolver", "tcp 53 to a server of its own", "udp over IPv6", "icmp to the node"} {
					if r := res[n]; strings.HasPrefix(r, "ok ") && r != "ok sent, no answer" && r != "ok b''" {
						t.Errorf("%s: %q", n, r)
					}
				}
				if len(hits) > 0 {
					t.Errorf("reached the node past the proxy:\n%s", strings.Join(hits, "\n"))
				}
			}},
			"the proxy runs unprivileged on a read-only root": {check: func(t *testing.T) {
				comp := "sandbox"
				if !sidecar {
					comp = "egress-proxy"
				}
				pid := c.containerPID(t, ctx, comp, "egress-proxy")
				st, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range []string{"Uid:\t64123\t64123\t64123\t64123\n", "Gid:\t64123\t64123\t64123\t64123\n", "CapEff:\t0000000000000000\n", "CapBnd:\t0000000000000000\n", "NoNewPrivs:\t1\n", "Seccomp:\t2\n"} {
					if !strings.Contains(string(st), w) {
						t.Errorf("the proxy's status lacks %q:\n%s", w, st)
					}
				}
				mi, err := os.ReadFile(filepath.Join("/proc", pid, "mountinfo"))
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range strings.Split(string(mi), "\n") {
					if f := strings.Fields(l); len(f) > 5 && f[4] == "/" && !strings.HasPrefix(f[5], "ro") {
						t.Errorf("the proxy's root filesystem is writable: %s", l)
					}
				}
			}},
			"the proxy's name resolution is its own": {sidecarOnly: true, check: func(t *testing.T) {
				pid := c.containerPID(t, ctx, "sandbox", "egress-proxy")
				for _, f := range []string{"/etc/hosts", "/etc/resolv.conf"} {
					b, err := os.ReadFile(filepath.Join("/proc", pid, "root", f))
					if err != nil {
						t.Fatal(err)
					}
					if strings.Contains(string(b), "keyhole-pod-attack") {
						t.Errorf("the sandbox wrote the proxy's %s (%s):\n%s", f, res["write "+f], b)
					}
				}
			}},
		}
		for name, tc := range tests {
			if tc.sidecarOnly && !sidecar {
				continue
			}
			t.Run(name, tc.check)
		}
		t.Logf("the attack script's results:\n%s", raw)
	})
}

// containerPID finds the node's PID of a running container of the pod of
// a component, so the test can read that container's files and status
// from the node.
func (c *cluster) containerPID(t *testing.T, ctx context.Context, comp, name string) string {
	t.Helper()
	id, err := c.kubectl(ctx, nil, "get", "pods", "-n", acmeNS, "-l", "app.kubernetes.io/component="+comp, "--field-selector=status.phase=Running",
		"-o", `jsonpath={.items[0].status.initContainerStatuses[?(@.name=="`+name+`")].containerID}{.items[0].status.containerStatuses[?(@.name=="`+name+`")].containerID}`)
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimPrefix(id, "containerd://")
	tasks, err := c.ctr(ctx, "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(tasks, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == id {
			return f[1]
		}
	}
	t.Fatalf("no task for container %s %q in:\n%s", name, id, tasks)
	return ""
}
