package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// wsHost is the WebSocket upstream's name: injected by keyhole, which
// reaches it by --resolve.
const (
	wsHost = "ws.bench.test"
	// wsPath is the one path the proxy's rules let upgrade on wsHost.
	wsPath = "/v1/echo"
	// wsMessageSize is the size of each text message sent and echoed.
	wsMessageSize = 1024
)

// wsUpstream is a WebSocket echo server on loopback, in the driver's
// process: it accepts the upgrade only with the injected token and sends
// every message back as it came.
type wsUpstream struct {
	addr    string
	srv     *http.Server
	refused atomic.Int64
}

func (up *wsUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wsPath || r.Header.Get("Authorization") != "Bearer "+token {
		up.refused.Add(1)
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	ctx := r.Context()
	for {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		if err := c.Write(ctx, typ, msg); err != nil {
			return
		}
	}
}

// startWSUpstream serves the echo over TLS with a leaf of the upstream
// CA for wsHost, HTTP/1.1 only (a WebSocket upgrade is HTTP/1.1's).
func (e *env) startWSUpstream() error {
	leaf, err := e.upstreamCA.Leaf(wsHost)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := &wsUpstream{addr: ln.Addr().String()}
	up.srv = &http.Server{
		Handler:           up,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf}, NextProtos: []string{"http/1.1"}},
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go up.srv.ServeTLS(ln, "", "")
	e.ws = up
	return nil
}

// wsMessage is the text message every round trip sends: wsMessageSize
// bytes of JSON-ish text that holds no credential.
func wsMessage() []byte {
	b := bytes.Repeat([]byte("x"), wsMessageSize)
	copy(b, `{"type":"ping","pad":"`)
	copy(b[len(b)-2:], `"}`)
	return b
}

// wsDial opens one WebSocket to wsHost over rt: to the upstream
// directly, or through rt's proxy by CONNECT.
func (e *env) wsDial(ctx context.Context, rt route) (*websocket.Conn, error) {
	tr := &http.Transport{
		DisableCompression: true,
		TLSClientConfig:    &tls.Config{NextProtos: []string{"http/1.1"}, RootCAs: rt.roots},
	}
	if rt.proxy == "" {
		d := &net.Dialer{Timeout: 5 * time.Second}
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, e.ws.addr)
		}
	} else {
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: rt.proxy})
	}
	c, res, err := websocket.Dial(ctx, "wss://"+wsHost+wsPath, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: tr},
		HTTPHeader: http.Header{"Authorization": {rt.auth}},
	})
	if err != nil {
		if res != nil {
			return nil, fmt.Errorf("%w (status %s)", err, res.Status)
		}
		return nil, err
	}
	c.SetReadLimit(1 << 20)
	return c, nil
}

// wsRoundTrips sends n text messages one after the other on one
// WebSocket over rt, each after the echo of the one before, and returns
// the round trips per second and each one's latency. The handshake and
// one round trip before the clock starts are not measured. An echo that
// differs from what was sent is an error: the relay must carry each
// message unchanged.
func (e *env) wsRoundTrips(rt route, n int) (float64, []time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := e.wsDial(ctx, rt)
	if err != nil {
		return 0, nil, err
	}
	defer c.CloseNow()
	msg := wsMessage()
	trip := func() error {
		if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
			return err
		}
		typ, got, err := c.Read(ctx)
		if err != nil {
			return err
		}
		if typ != websocket.MessageText || !bytes.Equal(got, msg) {
			return errors.New("the echo differs from the message sent")
		}
		return nil
	}
	if err := trip(); err != nil {
		return 0, nil, err
	}
	samples := make([]time.Duration, 0, n)
	start := time.Now()
	for range n {
		t0 := time.Now()
		if err := trip(); err != nil {
			return 0, nil, err
		}
		samples = append(samples, time.Since(t0))
	}
	rate := float64(n) / time.Since(start).Seconds()
	c.Close(websocket.StatusNormalClosure, "")
	return rate, samples, nil
}
