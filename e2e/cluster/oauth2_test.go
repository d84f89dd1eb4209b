//go:build e2e

package cluster

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/e2ekube"
)

// What e2e/cluster/testdata/oauth2 is called in the cluster, beside the
// names it shares with examples/github-acme.
const (
	oauthSecret      = "acme-api-client"
	oauthClientID    = "keyhole-e2e"
	oauthPlaceholder = "omnia-injected-acme-api"
	// collectorAddr is where the stand-in OpenTelemetry collector takes
	// the proxy's request log: the node's address, on OTLP/HTTP's port,
	// which the rendered NetworkPolicy admits only because the render
	// names the collector.
	collectorAddr = nodeIP + ":4318"
	// forwardProxyAddr is the stand-in for the cluster's forward proxy,
	// on Squid's port, which the rendered NetworkPolicy likewise admits
	// only because the render names it.
	forwardProxyAddr = nodeIP + ":3128"
	// oauthAPI is what the sandbox asks for: a path the Connection's
	// rules allow.
	oauthAPI = `curl -sS -w ' %{http_code}' -H "Authorization: Bearer $ACME_TOKEN" https://api.acme.example/v1/widgets`
	// oauthAPIStatus asks the same and prints the status alone.
	oauthAPIStatus = `curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ACME_TOKEN" https://api.acme.example/v1/widgets`
)

// TestOAuth2Minted renders e2e/cluster/testdata/oauth2, a sandbox whose
// Connection's credential is an OAuth 2.0 client (credential.kind
// oauth2, the client credentials grant), pointed at stand-ins for the
// authorization server and the API the test serves, and with the request
// log exported to a stand-in collector (--otlp-endpoint) and every
// upstream connection made through a stand-in forward proxy
// (--upstream-proxy). The proxy in
// the sandbox's pod mints access tokens from the client's id and secret;
// the sandbox, holding only the placeholder, gets through to the API;
// the rendered NetworkPolicy, which kube-router enforces, lets the
// proxy reach the forward proxy's port and its log the collector's. The client secret is rotated
// in the cluster and the proxy mints with the new one without a restart.
// Neither the client secret nor any token minted from it is in the
// sandbox container's environment or files, the pods' logs, the
// exported log or the rendered files.
func TestOAuth2Minted(t *testing.T) {
	ctx := context.Background()
	c := the
	c.prepareRenders(t, ctx)
	clientSecret := "acmeE2Eclientsecret" + randomSuffix(t)
	as, err := startAuthServer(clientSecret)
	if err != nil {
		t.Fatal(err)
	}
	defer as.close()
	col, err := startCollector()
	if err != nil {
		t.Fatal(err)
	}
	defer col.close()
	fwd, err := startForwardProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.close()
	dir := c.render(t,
		"--proxy-resolve", "auth.acme.example:443:"+upstreamAddr,
		"--proxy-resolve", "api.acme.example:443:"+upstreamAddr,
		"--upstream-ca-configmap", upstreamCAName,
		"--otlp-endpoint", "http://"+collectorAddr,
		"--upstream-proxy", "http://"+forwardProxyAddr,
		filepath.Join(c.tools[repoRoot], "e2e", "cluster", "testdata", "oauth2"))
	c.prepareNamespace(t, ctx, as.caPEM)
	c.applySecretData(t, ctx, acmeNS, oauthSecret, map[string]string{"client-id": oauthClientID, "client-secret": clientSecret})
	c.applyRender(t, ctx, dir)
	defer c.removeAcme(t, ctx)
	c.waitAcme(t, ctx, "sidecar")
	sh := func(script string) (string, error) { return c.sandboxSh(ctx, script) }

	runSandboxChecks(t, sh, func() string { return c.explain(ctx, acmeNS, as.requests()) }, as.secrets(), map[string]sandboxCheck{
		"the API with the placeholder gets a minted token": {
			script: oauthAPI,
			want:   []string{`"widgets":["sprocket"]`, " 200"},
		},
		"a path no rule allows is refused": {
			script: `curl -sS -o /dev/null -D - https://api.acme.example/v1/admin`,
			want:   []string{" 403", refusalHeader + ": l7-not-allowed"},
		},
		// The token endpoint's host is passed through, its TLS the
		// stand-in's own (hence -k): the sandbox reaches it, and the
		// proxy adds nothing.
		"the token endpoint gets nothing from the proxy": {
			script: `curl -k -sS -w ' %{http_code}' -d grant_type=client_credentials https://auth.acme.example/oauth/token`,
			want:   []string{"invalid_client", " 401"},
		},
		"the sandbox holds the placeholder": {
			script: `echo "$ACME_TOKEN"`,
			want:   []string{oauthPlaceholder},
		},
	})
	t.Run("the proxy minted with the client's credentials", func(t *testing.T) {
		if n := as.mints(clientSecret); n == 0 {
			t.Errorf("no token was minted with the client secret; the authorization server saw %q", as.requests())
		}
	})
	t.Run("the proxy went through the forward proxy", func(t *testing.T) {
		// --resolve gives the stand-ins' address, which the proxy asks
		// the forward proxy for in place of the name.
		if got := fwd.requests(); !slices.Contains(got, upstreamAddr+" CONNECT ") {
			t.Errorf("the forward proxy saw %q, want a CONNECT to %s", got, upstreamAddr)
		}
	})
	t.Run("the request log reached the collector", func(t *testing.T) {
		deadline := time.Now().Add(time.Minute)
		for !col.holds("api.acme.example", "/v1/widgets") {
			if time.Now().After(deadline) {
				t.Fatalf("no log record of the API request reached %s in a minute (%d exports); the proxy's log:\n%s",
					collectorAddr, col.count(), c.proxyLog(ctx))
			}
			time.Sleep(time.Second)
		}
	})
	t.Run("rotation", func(t *testing.T) {
		before := c.proxyPod(t, ctx, "sidecar")
		rotated := "acmeE2Erotated" + randomSuffix(t)
		c.applySecretData(t, ctx, acmeNS, oauthSecret, map[string]string{"client-id": oauthClientID, "client-secret": rotated})
		as.rotate(rotated)
		// The old tokens are revoked: the API answers 401, on which the
		// proxy obtains a new token, with the client secret the kubelet
		// has written into its volume by then.
		if out := waitSandbox(sh, oauthAPIStatus, "200", 3*time.Minute); out != "200" {
			t.Fatalf("after rotating the client secret the API answered %q for 3 minutes; the authorization server saw %q", out, as.requests())
		}
		if as.mints(rotated) == 0 {
			t.Error("no token was minted with the rotated client secret")
		}
		if after := c.proxyPod(t, ctx, "sidecar"); after != before {
			t.Errorf("the proxy pod changed (%s to %s): the rotation restarted it", before, after)
		}
	})

	// The secrets: both client secrets and every token minted.
	secrets := as.secrets()
	t.Run("no secret in the sandbox container", func(t *testing.T) {
		out, err := sh(sandboxListing(`cat /proc/1/environ | tr '\0' '\n'`))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Error("the sandbox container can read the client secret or a minted token")
			}
		}
		for _, w := range append(sandboxListingWants, "ACME_TOKEN="+oauthPlaceholder) {
			if !strings.Contains(out, w) {
				t.Errorf("the sandbox container's listing lacks %q", w)
			}
		}
	})
	t.Run("no secret in the pods' logs, the exported log or the render", func(t *testing.T) {
		logs := c.proxyLog(ctx)
		if !strings.Contains(logs, "api.acme.example") {
			t.Fatalf("the proxy's log names no request to api.acme.example:\n%s", e2ekube.Tail(logs, 20))
		}
		all, err := c.kubectl(ctx, nil, "logs", "-n", acmeNS, "deployment/"+acmeSandbox, "--all-containers", "--prefix")
		if err != nil {
			t.Fatal(err)
		}
		exported := col.all()
		var rendered strings.Builder
		if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rendered.Write(b)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			for where, text := range map[string]string{"the proxy's log": logs, "the pod's logs": all, "the exported log": exported, "the rendered files": rendered.String()} {
				if strings.Contains(text, s) {
					t.Errorf("%s hold the client secret or a minted token", where)
				}
			}
		}
	})
}

// proxyLog is the sidecar proxy's log.
func (c *cluster) proxyLog(ctx context.Context) string {
	out, _ := c.kubectl(ctx, nil, "logs", "-n", acmeNS, "deployment/"+acmeSandbox, "-c", compProxyContainer)
	return out
}

// compProxyContainer is the proxy's container in the sandbox's pod.
const compProxyContainer = "egress-proxy"

// authServer stands in for auth.acme.example, an OAuth 2.0 authorization
// server whose token endpoint takes the client credentials grant with
// the client's id and current secret (basic authentication or the
// form's), and for api.acme.example, which answers only a token it
// minted since the secret last changed. A 200 from the API is therefore
// proof that the proxy minted with the Secret's client secret and
// injected the token. TLS on the node's address, port 443, with a
// certificate for both names from its own CA.
type authServer struct {
	caPEM []byte
	srv   *http.Server

	mu     sync.Mutex
	secret string
	valid  map[string]bool   // the tokens the API answers
	minted map[string]string // every token minted, to the client secret it was minted with
	used   []string          // every client secret the test set
	requestLog
}

func startAuthServer(clientSecret string) (*authServer, error) {
	cert, caPEM, err := serverCert("keyhole-e2e fake authorization server CA", "auth.acme.example", "api.acme.example")
	if err != nil {
		return nil, err
	}
	a := &authServer{caPEM: caPEM, secret: clientSecret, valid: map[string]bool{}, minted: map[string]string{}, used: []string{clientSecret}}
	if a.srv, err = serve(upstreamAddr, a, &cert); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *authServer) close() { a.srv.Close() }

// rotate makes secret the client's only secret and revokes every token
// minted before.
func (a *authServer) rotate(secret string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.secret, a.valid = secret, map[string]bool{}
	a.used = append(a.used, secret)
}

// mints counts the tokens minted with a client secret.
func (a *authServer) mints(secret string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, s := range a.minted {
		if s == secret {
			n++
		}
	}
	return n
}

// secrets are the client secrets the test set and every token minted.
func (a *authServer) secrets() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]string(nil), a.used...)
	for tok := range a.minted {
		out = append(out, tok)
	}
	return out
}

func (a *authServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.record(r)
	w.Header().Set("Content-Type", "application/json")
	switch strings.ToLower(strings.TrimSuffix(r.Host, ":443")) {
	case "auth.acme.example":
		a.token(w, r)
	case "api.acme.example":
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		a.mu.Lock()
		ok = ok && a.valid[tok]
		a.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"invalid_token"}`+"\n")
			return
		}
		io.WriteString(w, `{"widgets":["sprocket"]}`+"\n")
	default:
		http.Error(w, "unknown host", http.StatusMisdirectedRequest)
	}
}

// token is the token endpoint (RFC 6749 §4.4).
func (a *authServer) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"invalid_request"}`+"\n")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if id != oauthClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(a.secret)) != 1 {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"invalid_client"}`+"\n")
		return
	}
	tok, err := e2ekube.RandomToken()
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	tok = "acmeE2Eminted" + tok[:24]
	a.valid[tok] = true
	a.minted[tok] = a.secret
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "scope": r.PostForm.Get("scope")})
}

// collector stands in for an OpenTelemetry collector's OTLP/HTTP
// receiver: it keeps the bodies POSTed to /v1/logs.
type collector struct {
	srv *http.Server

	mu     sync.Mutex
	bodies []string
}

func startCollector() (*collector, error) {
	col := &collector{}
	var err error
	if col.srv, err = serve(collectorAddr, col, nil); err != nil {
		return nil, err
	}
	return col, nil
}

func (col *collector) close() { col.srv.Close() }

func (col *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/logs" {
		http.NotFound(w, r)
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	col.mu.Lock()
	col.bodies = append(col.bodies, string(b))
	col.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "{}")
}

// holds reports whether one export holds every one of subs.
func (col *collector) holds(subs ...string) bool {
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, b := range col.bodies {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(b, s)
		}
		if all {
			return true
		}
	}
	return false
}

func (col *collector) count() int {
	col.mu.Lock()
	defer col.mu.Unlock()
	return len(col.bodies)
}

func (col *collector) all() string {
	col.mu.Lock()
	defer col.mu.Unlock()
	return strings.Join(col.bodies, "\n")
}

// forwardProxy stands in for a cluster's forward proxy (Squid): it
// answers CONNECT alone, tunnels to the address asked for, and records
// each request as requestLog does (the path of a CONNECT is empty).
type forwardProxy struct {
	srv *http.Server
	requestLog
}

func startForwardProxy() (*forwardProxy, error) {
	f := &forwardProxy{}
	var err error
	if f.srv, err = serve(forwardProxyAddr, f, nil); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *forwardProxy) close() { f.srv.Close() }

func (f *forwardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.record(r)
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	up, err := net.DialTimeout("tcp", r.Host, 10*time.Second)
	if err != nil {
		http.Error(w, "cannot reach "+r.Host, http.StatusBadGateway)
		return
	}
	defer up.Close()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, rw); done <- struct{}{} }()
	go func() { io.Copy(conn, up); done <- struct{}{} }()
	<-done
}
