package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// grpcHost is the gRPC upstream's name: injected by keyhole, which
// reaches it over HTTP/2 by --resolve.
const (
	grpcHost = "grpc.bench.test"
	// grpcMethod is the one path the proxy's rules allow on grpcHost.
	grpcMethod = "/grpc.health.v1.Health/Check"
)

// grpcUpstream is a gRPC server on loopback, in the driver's process:
// the health service's Check, answered only with the injected token.
type grpcUpstream struct {
	addr    string
	srv     *grpc.Server
	refused atomic.Int64
}

type healthCheck struct {
	grpc_health_v1.UnimplementedHealthServer
	up *grpcUpstream
}

func (h *healthCheck) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if a := md.Get("authorization"); len(a) != 1 || a[0] != "Bearer "+token {
		h.up.refused.Add(1)
		return nil, status.Error(16, "no token") // UNAUTHENTICATED
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

// startGRPCUpstream serves the health service over TLS with a leaf of
// the upstream CA for grpcHost.
func (e *env) startGRPCUpstream() error {
	leaf, err := e.upstreamCA.Leaf(grpcHost)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := &grpcUpstream{addr: ln.Addr().String()}
	up.srv = grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{leaf}})))
	grpc_health_v1.RegisterHealthServer(up.srv, &healthCheck{up: up})
	go up.srv.Serve(ln)
	e.grpc = up
	return nil
}

// grpcConn is one gRPC client connection (one HTTP/2 connection) over
// rt: to the upstream directly, or through rt's proxy by CONNECT, as
// HTTPS_PROXY has gRPC clients do.
func (e *env) grpcConn(rt route) (*grpc.ClientConn, error) {
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		if rt.proxy == "" {
			return d.DialContext(ctx, "tcp", e.grpc.addr)
		}
		c, err := d.DialContext(ctx, "tcp", rt.proxy)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(c, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", grpcHost, grpcHost)
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			c.Close()
			return nil, err
		}
		if res.StatusCode != http.StatusOK || br.Buffered() > 0 {
			c.Close()
			return nil, fmt.Errorf("CONNECT %s: %s", grpcHost, res.Status)
		}
		return c, nil
	}
	creds := credentials.NewTLS(&tls.Config{RootCAs: rt.roots, ServerName: grpcHost})
	return grpc.NewClient("passthrough:///"+grpcHost+":443", grpc.WithContextDialer(dial), grpc.WithTransportCredentials(creds))
}

// grpcUnary makes unary calls on one connection from conns goroutines
// for d, and returns the calls per second, each call's latency and the
// calls that failed.
func (e *env) grpcUnary(rt route, conns int, d time.Duration) (float64, []time.Duration, int64, error) {
	cc, err := e.grpcConn(rt)
	if err != nil {
		return 0, nil, 0, err
	}
	defer cc.Close()
	c := grpc_health_v1.NewHealthClient(cc)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", rt.auth)
	// One call first: the connection and its tunnel are not measured.
	if _, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{}); err != nil {
		return 0, nil, 0, err
	}
	var (
		mu      sync.Mutex
		samples []time.Duration
		failed  atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				_, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
				if err != nil {
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			samples = append(samples, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(samples) == 0 {
		return 0, nil, failed.Load(), errors.New("no call succeeded")
	}
	return float64(len(samples)) / time.Since(start).Seconds(), samples, failed.Load(), nil
}
