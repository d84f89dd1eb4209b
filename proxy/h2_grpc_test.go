package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// grpcClientEnv, set, makes the test binary the sandbox's gRPC client
// (grpcClientMain) instead of running tests: a gRPC client reads
// HTTPS_PROXY once per process, as net/http does, so it runs in a
// process of its own, with the sandbox's environment.
const grpcClientEnv = "KEYHOLE_TEST_GRPC_CLIENT"

func TestMain(m *testing.M) {
	if os.Getenv(grpcClientEnv) != "" {
		os.Exit(grpcClientMain())
	}
	os.Exit(m.Run())
}

// grpcCall is what the client saw of one call.
type grpcCall struct {
	Call    string
	Code    string
	Message string
	Header  []string `json:",omitempty"`
	Trailer []string `json:",omitempty"`
	N       int      `json:",omitempty"`
}

// grpcClientMain calls the health service of grpc.example and of
// api.github.com through HTTPS_PROXY, trusting SSL_CERT_FILE, and
// prints one JSON line per call.
func grpcClientMain() int {
	enc := json.NewEncoder(os.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(target string, f func(grpc_health_v1.HealthClient) grpcCall) {
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{})))
		if err != nil {
			enc.Encode(grpcCall{Call: "dial " + target, Message: err.Error()})
			return
		}
		defer conn.Close()
		enc.Encode(f(grpc_health_v1.NewHealthClient(conn)))
	}
	result := func(name string, err error) grpcCall {
		st := status.Convert(err)
		return grpcCall{Call: name, Code: st.Code().String(), Message: st.Message()}
	}
	call("grpc.example:443", func(c grpc_health_v1.HealthClient) grpcCall {
		var hdr, tr metadata.MD
		res, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&tr))
		out := result("check", err)
		if err == nil {
			out.Message = res.GetStatus().String()
		}
		out.Header, out.Trailer = hdr.Get("echo"), tr.Get("echo-trailer")
		return out
	})
	call("grpc.example:443", func(c grpc_health_v1.HealthClient) grpcCall {
		_, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "leak"})
		return result("leak", err)
	})
	call("grpc.example:443", func(c grpc_health_v1.HealthClient) grpcCall {
		stream, err := c.Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
		if err != nil {
			return result("watch", err)
		}
		n := 0
		for {
			if _, err = stream.Recv(); err != nil {
				break
			}
			n++
		}
		if err == io.EOF {
			err = nil // the stream ended with status OK
		}
		out := result("watch", err)
		out.N = n
		return out
	})
	call("grpc.example:443", func(c grpc_health_v1.HealthClient) grpcCall {
		_, err := c.List(ctx, &grpc_health_v1.HealthListRequest{})
		return result("list", err)
	})
	call("api.github.com:443", func(c grpc_health_v1.HealthClient) grpcCall {
		_, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		return result("h1 upstream", err)
	})
	return 0
}

// healthServer serves Check only to a request that carries the injected
// credential, echoing it back in its header and trailer metadata, and
// in an error's message when asked for service "leak"; Watch streams
// three statuses.
type healthServer struct {
	grpc_health_v1.UnimplementedHealthServer
	want string
}

func (s *healthServer) authorized(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := strings.Join(md.Get("authorization"), ",")
	if auth != s.want {
		return auth, status.Errorf(codes.Unauthenticated, "no credential")
	}
	return auth, nil
}

func (s *healthServer) Check(ctx context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	auth, err := s.authorized(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetService() == "leak" {
		return nil, status.Errorf(codes.Internal, "you sent %s", auth)
	}
	grpc.SetHeader(ctx, metadata.Pairs("echo", auth))
	grpc.SetTrailer(ctx, metadata.Pairs("echo-trailer", auth))
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func (s *healthServer) Watch(req *grpc_health_v1.HealthCheckRequest, stream grpc.ServerStreamingServer[grpc_health_v1.HealthCheckResponse]) error {
	if _, err := s.authorized(stream.Context()); err != nil {
		return err
	}
	for range 3 {
		if err := stream.Send(&grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}); err != nil {
			return err
		}
	}
	return nil
}

func (s *healthServer) List(ctx context.Context, _ *grpc_health_v1.HealthListRequest) (*grpc_health_v1.HealthListResponse, error) {
	return &grpc_health_v1.HealthListResponse{}, nil
}

// newGRPCUp serves the health service on loopback as grpc.example, and
// returns the harness option that has the proxy trust and reach it.
func newGRPCUp(t testing.TB) harnessOpt {
	t.Helper()
	ca := newTestCA(t, "grpc upstream CA")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "grpc.example")}})))
	grpc_health_v1.RegisterHealthServer(srv, &healthServer{want: "Bearer " + canary})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return func(o *Options) {
		o.UpstreamRoots.AddCert(ca.cert)
		o.Resolve["grpc.example:443"] = ln.Addr().String()
	}
}

// TestH2GRPCClient runs a real gRPC client through the proxy, as a
// sandbox does (HTTPS_PROXY, the proxy's CA), against a real gRPC
// server that requires the injected credential.
func TestH2GRPCClient(t *testing.T) {
	h := newHarnessConfig(t, h2Config, newGRPCUp(t))
	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	if err := os.WriteFile(bundle, h.sandbox.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = []string{
		grpcClientEnv + "=1", "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"),
		"HTTPS_PROXY=http://" + h.addr, "NO_PROXY=", "no_proxy=", "SSL_CERT_FILE=" + bundle, "SSL_CERT_DIR=",
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gRPC client: %v\n%s", err, out)
	}
	if strings.Contains(string(out), canary) {
		t.Fatalf("the credential reached the gRPC client:\n%s", out)
	}
	got := map[string]grpcCall{}
	for line := range strings.Lines(string(out)) {
		var c grpcCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("client line %q: %v", line, err)
		}
		got[c.Call] = c
	}
	want := map[string]grpcCall{
		"check":       {Call: "check", Code: "OK", Message: "SERVING", Header: []string{"Bearer [REDACTED]"}, Trailer: []string{"Bearer [REDACTED]"}},
		"leak":        {Call: "leak", Code: "Internal", Message: "you sent Bearer [REDACTED]"},
		"watch":       {Call: "watch", Code: "OK", Message: "", N: 3},
		"list":        {Call: "list", Code: "PermissionDenied"},
		"h1 upstream": {Call: "h1 upstream", Code: "PermissionDenied"},
	}
	for name, w := range want {
		g := got[name]
		msg := g.Message
		if name == "list" || name == "h1 upstream" {
			g.Message = "" // checked below
		}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got[name], w)
		}
		switch name {
		case "list":
			if !strings.Contains(msg, "l7-not-allowed") {
				t.Errorf("list's message = %q, want the refusal's reason", msg)
			}
		case "h1 upstream":
			if !strings.Contains(msg, "does not speak HTTP/2") {
				t.Errorf("h1 upstream's message = %q, want why", msg)
			}
		}
	}
	if t.Failed() {
		t.Logf("client output:\n%s", out)
	}
}
