//go:build e2e

package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProxyLookupsFullyQualified: the proxy, reading a pod's resolv.conf
// (search list, ndots:5), looks up the host of a CONNECT as the fully
// qualified name it is, one question per address family, and never the
// name under a search domain first. The pod's resolver answers
// pass.example.agents.svc.cluster.local (as a Service of that name in the
// cluster would) with the attacker's address, and pass.example with the
// upstream's: the tunnel reaches the upstream and the attacker's server
// gets no connection.
func TestProxyLookupsFullyQualified(t *testing.T) {
	n := newNetnsSandbox(t)
	n.resolver.setAnswer("pass.example.", net.IPv4(198, 18, 0, 1))
	asked := len(n.resolver.questions())
	attacker := n.tcpHits["198.18.0.3:443"].Load()

	dial, stop := nsDialer(t, n.nsSb)
	defer stop()
	conn, err := dial("127.0.0.1:3128")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := conn.Write([]byte("CONNECT pass.example:443 HTTP/1.1\r\nHost: pass.example:443\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT pass.example:443: %s (asked %q)", resp.Status, n.resolver.questions()[asked:])
	}
	// The tunnel ends at the upstream's server (198.18.0.1:443), whose
	// certificate only the upstream CA signs.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(n.w.upstreamCA.CertPEM)
	tc := tls.Client(conn, &tls.Config{ServerName: "api.github.com", RootCAs: roots})
	if err := tc.Handshake(); err != nil {
		t.Errorf("TLS through the tunnel: %v; want the upstream at 198.18.0.1", err)
	}

	time.Sleep(100 * time.Millisecond) // a connection in flight lands
	if got := n.tcpHits["198.18.0.3:443"].Load(); got != attacker {
		t.Errorf("the attacker's server, the answer for a search-list name, got %d connections", got-attacker)
	}
	got := n.resolver.questions()[asked:]
	slices.Sort(got)
	if want := []string{"pass.example. A", "pass.example. AAAA"}; !slices.Equal(got, want) {
		t.Errorf("the proxy asked %q, want %q", got, want)
	}
	for _, q := range got {
		if strings.Contains(q, "cluster.local") {
			t.Errorf("the proxy asked for %s", q)
		}
	}
}
