package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"keyhole.dev/keyhole/internal/testpki"
)

// The attacker of TestServerTunnelMemory runs in a process of its own
// (this test binary, run again with attackerEnv set), with the upstream
// its requests reach, so that the heap measured is the proxy's alone. It
// prints its upstream's address and CA, reads the proxy's addresses and
// the sandbox CA from its stdin, attacks, and says how many connections
// it holds open.
const (
	attackerEnv      = "KEYHOLE_TEST_TUNNEL_ATTACKER" // the attack to run
	attackerConns    = 200
	attackerUpMsg    = "upstream:"
	attackerReadyMsg = "connections open:"
)

// bigHelloProtos is an ALPN list that makes a ClientHello of about size
// bytes, with http/1.1 last so that the handshake succeeds.
func bigHelloProtos(size int) []string {
	var protos []string
	for i := 0; len(protos)*251 < size; i++ {
		protos = append(protos, fmt.Sprintf("%04d", i)+strings.Repeat("p", 246))
	}
	return append(protos, "http/1.1")
}

// heapInUse is the heap the process holds once collected, in bytes.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// tunnelAttack is one way to hold connections open on the proxy.
type tunnelAttack struct {
	// how: connect or transparent (a tunnel), proxy (a connection on
	// the proxy port that is not one).
	how string
	// hello is the size of the ClientHello's ALPN list; 0 is a plain one.
	hello int
	// then is what each tunnel does once open: idle, header (most of a
	// 64 KiB request header, never finished) or stall (a long response
	// asked for and not read); h2idle (HTTP/2's preface and settings)
	// or h2stall (streams requests for a long response, not read).
	then string
	// streams is how many requests h2stall sends on each connection.
	streams int
}

// TestServerTunnelMemory: a connection the sandbox holds open costs the
// proxy what its buffers keep, for as long as the sandbox keeps it (a
// request every Timeouts.Idle keeps a tunnel forever; a header or a
// stalled response lasts its timeout, and the sandbox opens the next),
// up to the caps. Two things went wrong:
//
//   - crypto/tls keeps the buffers a handshake grew for the life of the
//     connection, and the sandbox chooses the size of its ClientHello: a
//     60 KiB one (a long ALPN list) left each idle tunnel holding 120 KiB
//     instead of 20 KiB. The handshake now reads at most maxClientHello
//     (16 KiB), through CONNECT as through the transparent listener.
//   - with a cap of 1024 tunnels (the default before it was 512), each
//     with such a ClientHello and a long response asked for and not
//     read, plus the 512 other connections each sending most of a
//     header, the keyhole-proxy binary held 253 MiB of live heap and
//     296 MiB resident under GOMEMLIMIT=230MiB: the rendered sidecar's
//     256 MiB limit kills it. The worst measured here, at the default
//     caps, must stay within memBudget.
func TestServerTunnelMemory(t *testing.T) {
	if attack := os.Getenv(attackerEnv); attack != "" {
		runTunnelAttacker(t, attack)
		return
	}
	tests := map[string]struct {
		attack tunnelAttack
		// opened says whether the connections stay open.
		opened bool
		// perConn is what one connection may hold, in KiB of the
		// proxy's heap, once open or once refused.
		perConn float64
	}{
		"idle, plain ClientHello, through CONNECT":             {attack: tunnelAttack{how: "connect", then: "idle"}, opened: true, perConn: 32},
		"idle, 14 KiB ClientHello, through CONNECT":            {attack: tunnelAttack{how: "connect", hello: 14 << 10, then: "idle"}, opened: true, perConn: 64},
		"idle, 14 KiB ClientHello, through transparent":        {attack: tunnelAttack{how: "transparent", hello: 14 << 10, then: "idle"}, opened: true, perConn: 64},
		"60 KiB ClientHello, through CONNECT":                  {attack: tunnelAttack{how: "connect", hello: 60 << 10, then: "idle"}, perConn: 8},
		"60 KiB ClientHello, through the transparent listener": {attack: tunnelAttack{how: "transparent", hello: 60 << 10, then: "idle"}, perConn: 8},
		"stalled header, 14 KiB ClientHello":                   {attack: tunnelAttack{how: "connect", hello: 14 << 10, then: "header"}, opened: true, perConn: 192},
		"stalled response, 14 KiB ClientHello":                 {attack: tunnelAttack{how: "connect", hello: 14 << 10, then: "stall"}, opened: true, perConn: 256},
		"stalled header on the proxy port":                     {attack: tunnelAttack{how: "proxy", then: "header"}, opened: true, perConn: 128},
		// HTTP/2: a connection past its preface, and one whose two
		// streams each asked for a long response and read none of it
		// (400 streams in all, under the MaxTunnels cap on the streams
		// of all connections together, so that none is refused).
		"idle HTTP/2 connection, through CONNECT": {attack: tunnelAttack{how: "connect", then: "h2idle"}, opened: true, perConn: 48},
		"HTTP/2, 2 stalled responses each":        {attack: tunnelAttack{how: "connect", then: "h2stall", streams: 2}, opened: true, perConn: 320},
	}
	worstTunnel, worstProxy := 0.0, 0.0
	var h2Idle, h2Stalled float64
	var h2Streams int
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			open, per := measureAttack(t, tc.attack)
			switch {
			case tc.opened && open != attackerConns:
				t.Errorf("%d of %d connections failed", attackerConns-open, attackerConns)
			case !tc.opened && open != 0:
				t.Errorf("%d of %d handshakes succeeded", open, attackerConns)
			}
			if per > tc.perConn {
				t.Errorf("each connection holds %.1f KiB of the proxy's heap, want at most %.0f KiB", per, tc.perConn)
			}
			switch {
			case tc.attack.how == "proxy":
				worstProxy = max(worstProxy, per)
			case tc.attack.then == "h2idle":
				h2Idle = per
			case tc.attack.then == "h2stall":
				h2Stalled, h2Streams = per, tc.attack.streams
			default:
				worstTunnel = max(worstTunnel, per)
			}
		})
	}
	// An HTTP/2 connection is a tunnel, and the streams of all of them
	// have a cap of their own, MaxTunnels (Server.h2Streams): at the
	// caps, MaxTunnels connections hold MaxTunnels streams, a connection
	// and a stream per tunnel.
	if h2Streams > 0 {
		stream := (h2Stalled - h2Idle) / float64(h2Streams)
		t.Logf("HTTP/2: %.1f KiB per connection, %.1f KiB per stalled stream", h2Idle, stream)
		worstTunnel = max(worstTunnel, h2Idle+stream)
	}
	caps := newHarness(t).srv.opts // the defaults
	total := (worstTunnel*float64(caps.MaxTunnels) + worstProxy*float64(caps.MaxProxyConns)) / 1024
	t.Logf("at the default caps: %d tunnels of %.1f KiB, %d other connections of %.1f KiB: %.0f MiB of heap (budget %d MiB)",
		caps.MaxTunnels, worstTunnel, caps.MaxProxyConns, worstProxy, total, memBudget>>20)
	if total > memBudget>>20 {
		t.Errorf("the default caps let a sandbox hold %.0f MiB of the proxy's heap, more than the %d MiB budget", total, memBudget>>20)
	}
}

// memBudget is the heap a sandbox may make its proxy hold at the default
// caps: five eighths of the rendered sidecar's 256 MiB limit, which
// leaves the collector (working to GOMEMLIMIT, 90% of the limit), the
// goroutine stacks and the binary the rest.
const memBudget = 160 << 20

// measureAttack runs attack from a process of its own against a fresh
// proxy and returns how many connections stayed open and what each costs
// the proxy's heap, in KiB.
func measureAttack(t *testing.T, attack tunnelAttack) (int, float64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerTunnelMemory$")
	cmd.Env = append(os.Environ(), attackerEnv+"="+fmt.Sprintf("%s,%d,%s,%d", attack.how, attack.hello, attack.then, attack.streams))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	next := func(prefix string) string {
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				return strings.TrimSpace(rest)
			}
		}
		t.Fatalf("the attacker never printed %q", prefix)
		return ""
	}
	addr, caB64, _ := strings.Cut(next(attackerUpMsg), " ")
	caPEM, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		t.Fatal(err)
	}
	upCA := &testCA{cert: mustParseCertPEM(t, caPEM)}
	h := newHarness(t, resolveTo(upCA, addr, "api.github.com"))
	before := heapInUse()
	fmt.Fprintf(stdin, "%s %s %s\n", h.addr, h.trans, base64.StdEncoding.EncodeToString(h.sandbox.certPEM))
	open, err := strconv.Atoi(next(attackerReadyMsg))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the last handshakes' goroutines settle
	after := heapInUse()
	per := (float64(after) - float64(before)) / 1024 / attackerConns
	t.Logf("%d of %d connections open; proxy heap %.1f -> %.1f MiB, %.1f KiB per connection",
		open, attackerConns, float64(before)/(1<<20), float64(after)/(1<<20), per)
	return open, per
}

func mustParseCertPEM(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("the attacker's upstream CA is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("the attacker's upstream CA: %v", err)
	}
	return cert
}

// runTunnelAttacker is the attacker's process: it serves the upstream
// (a long response to every request, written as fast as it is read),
// opens attackerConns connections as attack ("how,hello,then") says,
// says how many it holds, then holds them until killed.
func runTunnelAttacker(t *testing.T, attack string) {
	f := strings.Split(attack, ",")
	how, then := f[0], f[2]
	hello, _ := strconv.Atoi(f[1])
	streams, _ := strconv.Atoi(f[3])
	ca, err := testpki.NewCA("attacker's upstream CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("api.github.com")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf}})
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 32<<10)
		for range 4096 {
			if _, err := w.Write(b); err != nil {
				return
			}
		}
	}))
	fmt.Printf("%s %s %s\n", attackerUpMsg, ln.Addr(), base64.StdEncoding.EncodeToString(ca.CertPEM))
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var proxyAddr, transAddr, sandboxCA string
	fmt.Sscan(line, &proxyAddr, &transAddr, &sandboxCA)
	caPEM, _ := base64.StdEncoding.DecodeString(sandboxCA)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	protos := []string{"http/1.1"}
	if hello > 0 {
		protos = bigHelloProtos(hello)
	}
	if strings.HasPrefix(then, "h2") {
		protos = []string{"h2"}
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 8)
	)
	open := func() net.Conn {
		addr := proxyAddr
		if how == "transparent" {
			addr = transAddr
		}
		raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return nil
		}
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		if how == "proxy" {
			io.WriteString(raw, "GET http://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\nX-Pad: "+strings.Repeat("a", 63<<10))
			return raw
		}
		if how == "connect" {
			io.WriteString(raw, "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
			if _, err := io.ReadFull(raw, make([]byte, len("HTTP/1.1 200 Connection established\r\n\r\n"))); err != nil {
				raw.Close()
				return nil
			}
		}
		tc := tls.Client(raw, &tls.Config{ServerName: "api.github.com", RootCAs: roots, NextProtos: protos})
		if err := tc.Handshake(); err != nil {
			raw.Close()
			return nil
		}
		switch then {
		case "h2idle", "h2stall":
			if !h2Attack(tc, streams) {
				raw.Close()
				return nil
			}
		case "header":
			io.WriteString(tc, "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nX-Pad: "+strings.Repeat("a", 63<<10))
		case "stall":
			io.WriteString(tc, "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n")
			if _, err := tc.Read(make([]byte, 1)); err != nil {
				raw.Close()
				return nil
			}
		}
		return tc
	}
	for range attackerConns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if c := open(); c != nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%s %d\n", attackerReadyMsg, len(conns))
	time.Sleep(time.Minute)
	t.Log(len(conns)) // keeps them reachable until killed
}

// h2Attack speaks HTTP/2 on tc as a hostile client: the preface and its
// settings, then streams requests for a long response whose data it
// never reads past the first frame (its windows stay at the protocol's
// 64 KiB). It reports whether the server answered.
func h2Attack(tc *tls.Conn, streams int) bool {
	stall := streams > 0
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		return false
	}
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return false
	}
	if stall {
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "api.github.com"}, {":path", "/repos/acme/widgets"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		for i := range streams {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		}
	}
	// The server's settings come first; with stall, wait for the first
	// data of a response, so that the streams are under way.
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return false
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
				if !stall {
					return true
				}
			}
		case *http2.DataFrame:
			return true
		case *http2.GoAwayFrame:
			return false
		}
	}
}
