package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The attacker of TestServerTunnelMemory runs in a process of its own
// (this test binary, run again with these variables), so that the heap
// measured is the proxy's alone.
const (
	attackerEnv      = "KEYHOLE_TEST_TUNNEL_ATTACKER" // the attack to run
	attackerProxy    = "KEYHOLE_TEST_PROXY_ADDR"
	attackerTrans    = "KEYHOLE_TEST_TRANSPARENT_ADDR"
	attackerCA       = "KEYHOLE_TEST_SANDBOX_CA"
	attackerTunnels  = "KEYHOLE_TEST_TUNNELS"
	attackerReadyMsg = "tunnels open:"
)

// bigHelloProtos is an ALPN list that makes a ClientHello of about
// 60 KiB (crypto/tls takes a handshake message of up to 64 KiB), with
// http/1.1 last so that the handshake succeeds.
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

// TestServerTunnelMemory: an idle tunnel costs the proxy what its TLS
// connection keeps, for as long as the sandbox keeps it (a request every
// Timeouts.Idle keeps it forever), up to the tunnel cap. crypto/tls keeps
// the buffers a handshake grew for the life of the connection, and the
// sandbox chooses the size of its ClientHello: a 60 KiB one (a long ALPN
// list) left each idle tunnel holding 120 KiB instead of 20 KiB, 120 MiB
// at the default cap of 1024 tunnels, half the rendered sidecar's 256 MiB
// limit, before any request is read. The handshake now reads at most
// maxClientHello (16 KiB) from the sandbox, through CONNECT as through
// the transparent listener: a larger one fails and is let go.
func TestServerTunnelMemory(t *testing.T) {
	if attack := os.Getenv(attackerEnv); attack != "" {
		runTunnelAttacker(t, attack)
		return
	}
	const tunnels = 200
	tests := map[string]struct {
		attack string
		// opened says whether the handshakes succeed.
		opened bool
		// perTunnel is what one tunnel may hold once open, or once its
		// handshake failed, in KiB of the proxy's heap.
		perTunnel float64
	}{
		"plain ClientHello, through CONNECT":                        {attack: "connect-plain", opened: true, perTunnel: 32},
		"14 KiB ClientHello, within the bound, through CONNECT":     {attack: "connect-bound", opened: true, perTunnel: 64},
		"14 KiB ClientHello, within the bound, through transparent": {attack: "transparent-bound", opened: true, perTunnel: 64},
		"60 KiB ClientHello, through CONNECT":                       {attack: "connect-big", perTunnel: 8},
		"60 KiB ClientHello, through the transparent listener":      {attack: "transparent-big", perTunnel: 8},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			before := heapInUse()
			cmd := exec.Command(os.Args[0], "-test.run=^TestServerTunnelMemory$")
			cmd.Env = append(os.Environ(), attackerEnv+"="+tc.attack, attackerProxy+"="+h.addr,
				attackerTrans+"="+h.trans, attackerCA+"="+string(h.sandbox.certPEM), attackerTunnels+"="+strconv.Itoa(tunnels))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			open := -1
			for sc := bufio.NewScanner(out); sc.Scan(); {
				if n, ok := strings.CutPrefix(sc.Text(), attackerReadyMsg); ok {
					open, _ = strconv.Atoi(strings.TrimSpace(n))
					break
				}
			}
			if open < 0 {
				t.Fatal("the attacker never said how many tunnels it opened")
			}
			time.Sleep(200 * time.Millisecond) // the last handshakes' goroutines settle
			after := heapInUse()
			per := (float64(after) - float64(before)) / 1024 / tunnels
			t.Logf("%d tunnels opened, %d refused; proxy heap %.1f -> %.1f MiB, %.1f KiB per tunnel",
				open, tunnels-open, float64(before)/(1<<20), float64(after)/(1<<20), per)
			if per > tc.perTunnel {
				t.Errorf("each tunnel holds %.1f KiB of the proxy's heap, want at most %.0f KiB", per, tc.perTunnel)
			}
			switch {
			case tc.opened && open != tunnels:
				t.Errorf("%d of %d handshakes failed", tunnels-open, tunnels)
			case !tc.opened && open != 0:
				t.Errorf("%d of %d handshakes succeeded", open, tunnels)
			}
		})
	}
}

// runTunnelAttacker opens the tunnels attack names, says how many
// handshakes succeeded, then holds them until killed.
func runTunnelAttacker(t *testing.T, attack string) {
	n, _ := strconv.Atoi(os.Getenv(attackerTunnels))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(os.Getenv(attackerCA)))
	var protos []string
	switch {
	case strings.HasSuffix(attack, "-big"):
		protos = bigHelloProtos(60 << 10)
	case strings.HasSuffix(attack, "-bound"):
		protos = bigHelloProtos(14 << 10)
	default:
		protos = []string{"http/1.1"}
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 8)
	)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var raw net.Conn
			var err error
			if strings.HasPrefix(attack, "transparent") {
				raw, err = net.DialTimeout("tcp", os.Getenv(attackerTrans), 5*time.Second)
			} else {
				raw, err = net.DialTimeout("tcp", os.Getenv(attackerProxy), 5*time.Second)
				if err == nil {
					io.WriteString(raw, "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
					_, err = io.ReadFull(raw, make([]byte, len("HTTP/1.1 200 Connection established\r\n\r\n")))
				}
			}
			if err != nil {
				return
			}
			raw.SetDeadline(time.Now().Add(10 * time.Second))
			tc := tls.Client(raw, &tls.Config{ServerName: "api.github.com", RootCAs: roots, NextProtos: protos})
			if err := tc.Handshake(); err != nil {
				raw.Close()
				return
			}
			raw.SetDeadline(time.Time{})
			mu.Lock()
			conns = append(conns, tc)
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Printf("%s %d\n", attackerReadyMsg, len(conns))
	time.Sleep(time.Minute)
	t.Log(len(conns)) // keeps them reachable
}
