package proxy

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// githubStandIn stands in for GitHub's REST API and git host on
// loopback: it checks each App JWT's RS256 signature against the App's
// public key with an implementation of its own (golang-jwt), looks up
// installations, hands out tokens that live for seconds, records what
// each token request asked for, and serves the API and git requests the
// sandbox makes, echoing their Authorization header in its answers, as
// a hostile upstream could.
type githubStandIn struct {
	srv      *httptest.Server
	appID    int64
	lifetime time.Duration
	// clock is GitHub's clock, which JWTs are checked against: the
	// real one unless a test moves the proxy's.
	clock func() time.Time

	mu       sync.Mutex
	pub      *rsa.PublicKey
	fail     int // answer this status to token requests, when not 0
	minted   []string
	asked    []map[string]any // the token requests' bodies
	jwtFails int
	lookups  int
	requests []seen // the sandbox's requests
	// revoked are the tokens revoke withdrew: the API and git host
	// answer 401 to them, as GitHub does to a revoked token.
	revoked map[string]bool
}

// revoke withdraws every token minted so far, as its owner deleting it
// (DELETE /installation/token) or GitHub expiring it early would.
func (g *githubStandIn) revoke() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.revoked == nil {
		g.revoked = map[string]bool{}
	}
	for _, t := range g.minted {
		g.revoked[t] = true
	}
}

// appKey is an App's RSA key, made once per test binary: 2048-bit keys
// take a while to generate.
var appKey = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) })

func newAppKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemPKCS1(k *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

func newGitHubStandIn(t testing.TB, ca *testCA, appID int64, pub *rsa.PublicKey, lifetime time.Duration) *githubStandIn {
	g := &githubStandIn{appID: appID, pub: pub, lifetime: lifetime, clock: time.Now}
	g.srv = ca.serve(t, http.HandlerFunc(g.serve), "api.github.com", "github.com")
	return g
}

// checkJWT verifies an App JWT as GitHub does: RS256 by the App's key,
// issued by the App, iat and exp present and at most 10 minutes apart.
func (g *githubStandIn) checkJWT(r *http.Request) bool {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	g.mu.Lock()
	pub, clock := g.pub, g.clock
	g.mu.Unlock()
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuedAt(), jwt.WithExpirationRequired(), jwt.WithTimeFunc(clock))
	if err != nil {
		return false
	}
	iss, _ := claims.GetIssuer()
	iat, _ := claims.GetIssuedAt()
	exp, _ := claims.GetExpirationTime()
	return iss == fmt.Sprint(g.appID) && iat != nil && exp != nil && exp.Sub(iat.Time) <= 10*time.Minute && clock().Sub(iat.Time) >= 50*time.Second
}

func (g *githubStandIn) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	appCall := r.Host == "api.github.com" && (strings.HasPrefix(r.URL.Path, "/app/") || strings.HasSuffix(r.URL.Path, "/installation"))
	if !appCall {
		g.mu.Lock()
		g.requests = append(g.requests, seen{Host: r.Host, Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: string(body)})
		revoked := g.revoked[appToken(r.Header).v]
		g.mu.Unlock()
		if revoked {
			w.Header().Set("X-Echo", r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "{\"message\":\"Bad credentials\",\"you_sent\":%q}\n", r.Header.Get("Authorization"))
			return
		}
		// A hostile upstream echoes the credential, in a header and
		// in the body.
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "you sent %s\n", r.Header.Get("Authorization"))
		return
	}
	if !g.checkJWT(r) {
		g.mu.Lock()
		g.jwtFails++
		g.mu.Unlock()
		http.Error(w, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && (r.URL.Path == "/orgs/acme/installation" || r.URL.Path == "/repos/acme/widgets/installation"):
		g.lookups++
		fmt.Fprint(w, `{"id": 4242, "account": {"login": "acme"}}`)
	case r.Method == http.MethodPost && r.URL.Path == "/app/installations/4242/access_tokens":
		if g.fail != 0 {
			http.Error(w, `{"message":"nope"}`, g.fail)
			return
		}
		var asked map[string]any
		if err := json.Unmarshal(body, &asked); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		g.asked = append(g.asked, asked)
		tok := fmt.Sprintf("ghs_%s_%d", strings.ReplaceAll(canary, "-", ""), len(g.minted))
		g.minted = append(g.minted, tok)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{
			"token": tok, "expires_at": g.clock().Add(g.lifetime).UTC().Format(time.RFC3339Nano),
			"permissions": asked["permissions"], "repository_selection": "selected",
		})
	default:
		http.NotFound(w, r)
	}
}

func (g *githubStandIn) tokens() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.minted...)
}

func (g *githubStandIn) seen() []seen {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]seen(nil), g.requests...)
}

// githubAppConfig mints one token for both of a Connection's hosts,
// narrowed as the compiler narrows it for these rules.
const githubAppConfig = configHead + `
  "scrubResponseBodies": true,
  "hosts": [
    {"name": "api.github.com", "connection": "github-app",
     "inject": {"secret": "acme-github-token", "githubApp": {"appId": 1234, "owner": "acme", "privateKeyKey": "private-key.pem",
       "api": "api.github.com", "scheme": "token", "repositories": ["widgets"],
       "permissions": {"contents": "read", "metadata": "read", "pull_requests": "write"}}},
     "rules": [{"methods": ["GET", "POST"], "pathPrefixes": ["/repos/acme/widgets/pulls"]}]},
    {"name": "github.com", "connection": "github-app",
     "inject": {"secret": "acme-github-token", "githubApp": {"appId": 1234, "owner": "acme", "privateKeyKey": "private-key.pem",
       "api": "api.github.com", "scheme": "basic", "repositories": ["widgets"],
       "permissions": {"contents": "read", "metadata": "read", "pull_requests": "write"}}},
     "rules": [{"methods": ["GET"], "pathPatterns": ["/acme/widgets.git/info/refs"]},
               {"methods": ["POST"], "pathPatterns": ["/acme/widgets.git/git-upload-pack"]}]}
  ]
}`

// newGitHubAppHarness runs the proxy with githubAppConfig, the App's key
// mounted in its Secret and both GitHub hosts resolved to the stand-in.
func newGitHubAppHarness(t testing.TB, key *rsa.PrivateKey, lifetime time.Duration) (*harness, *githubStandIn) {
	t.Helper()
	ghCA := newTestCA(t, "github stand-in CA")
	g := newGitHubStandIn(t, ghCA, 1234, &key.PublicKey, lifetime)
	h := newHarnessConfig(t, githubAppConfig, resolveTo(ghCA, g.srv.Listener.Addr().String(), "api.github.com", "github.com"))
	h.secrets.write(map[string]string{"private-key.pem": pemPKCS1(key)})
	return h, g
}

func (h *harness) do(method, url string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(""))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "token omnia-injected-github-app")
	resp, err := h.client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, readBody(h.t, resp)
}

// TestServerGitHubAppToken mints an installation token through the
// proxy over real sockets: the stand-in checks the JWT's signature and
// records the narrowed scope; the REST API gets Authorization: token and
// git gets basic x-access-token, one token for both; what the upstream
// echoes back reaches the sandbox scrubbed, and no log line holds the
// token or the key.
func TestServerGitHubAppToken(t *testing.T) {
	key, err := appKey()
	if err != nil {
		t.Fatal(err)
	}
	h, g := newGitHubAppHarness(t, key, time.Hour)
	var bodies []string
	for _, c := range []struct{ method, url string }{
		{"GET", "https://api.github.com/repos/acme/widgets/pulls"},
		{"POST", "https://api.github.com/repos/acme/widgets/pulls"},
		{"GET", "https://github.com/acme/widgets.git/info/refs?service=git-upload-pack"},
	} {
		resp, body := h.do(c.method, c.url)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s (%s)", c.method, c.url, resp.Status, resp.Header.Get(policy.RefusedHeader))
		}
		bodies = append(bodies, body, resp.Header.Get("X-Echo"))
	}
	toks := g.tokens()
	if len(toks) != 1 {
		t.Fatalf("minted %d tokens, want one for both hosts", len(toks))
	}
	tok := toks[0]
	seen := g.seen()
	if len(seen) != 3 {
		t.Fatalf("the stand-in saw %d sandbox requests, want 3", len(seen))
	}
	if got, want := seen[0].Header.Get("Authorization"), "token "+tok; got != want {
		t.Errorf("api.github.com got Authorization %q, want %q", got, want)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok))
	if got := seen[2].Header.Get("Authorization"); got != basic {
		t.Errorf("github.com got Authorization %q, want %q", got, basic)
	}
	g.mu.Lock()
	asked, lookups := g.asked[0], g.lookups
	g.mu.Unlock()
	b, _ := json.Marshal(asked)
	if got, want := string(b), `{"permissions":{"contents":"read","metadata":"read","pull_requests":"write"},"repositories":["widgets"]}`; got != want {
		t.Errorf("token request %s, want %s", got, want)
	}
	if lookups != 1 {
		t.Errorf("looked the installation up %d times, want 1", lookups)
	}
	pemKey := pemPKCS1(key)
	keyLine := strings.Split(pemKey, "\n")[1]
	for _, out := range append(bodies, h.logs.String(), h.get("/metrics")) {
		for _, leak := range []string{tok, base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tok)), keyLine} {
			if strings.Contains(out, leak) {
				t.Fatalf("output holds a minted credential or the App key: %q", out)
			}
		}
	}
	if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_token_mints_total{connection="github-app",result="ok"} 1`) {
		t.Errorf("metrics lack the mint:\n%s", m)
	}
}

// TestServerGitHubAppRenews renews a token that lives two seconds at
// half its life, and mints with a rotated key from the next mint on, with
// no restart: the stand-in then accepts only the new key.
func TestServerGitHubAppRenews(t *testing.T) {
	key, err := appKey()
	if err != nil {
		t.Fatal(err)
	}
	h, g := newGitHubAppHarness(t, key, 2*time.Second)
	get := func() {
		t.Helper()
		resp, _ := h.do("GET", "https://api.github.com/repos/acme/widgets/pulls")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s (%s)", resp.Status, resp.Header.Get(policy.RefusedHeader))
		}
	}
	get()
	get()
	if n := len(g.tokens()); n != 1 {
		t.Fatalf("minted %d tokens for two requests within the token's life, want 1", n)
	}
	time.Sleep(1100 * time.Millisecond)
	get()
	if n := len(g.tokens()); n != 2 {
		t.Fatalf("minted %d tokens after half the token's life, want 2", n)
	}
	rotated := newAppKey(t)
	h.secrets.write(map[string]string{"private-key.pem": pemPKCS1(rotated)})
	g.mu.Lock()
	g.pub = &rotated.PublicKey
	g.mu.Unlock()
	time.Sleep(1100 * time.Millisecond)
	get()
	toks := g.tokens()
	if len(toks) != 3 {
		t.Fatalf("minted %d tokens after the key's rotation, want 3", len(toks))
	}
	seen := g.seen()
	if got := seen[len(seen)-1].Header.Get("Authorization"); got != "token "+toks[2] {
		t.Errorf("Authorization %q, want the token minted with the rotated key", got)
	}
}

// TestServerGitHubAppRenewsOn401 revokes the installation token mid-run,
// behind the proxy's back: the API and the git host answer 401 to it,
// and the proxy mints another (the stand-in checks the new JWT) and sends
// the request again, so no 401 reaches the client, for the API's token
// scheme, git's basic one, a POST whose short body the proxy held, and a
// burst of concurrent requests, which share one mint. A request whose
// body streams (no length) cannot be sent again: its 401 comes back as it
// came, scrubbed, and the request after it renews the token.
func TestServerGitHubAppRenewsOn401(t *testing.T) {
	key, err := appKey()
	if err != nil {
		t.Fatal(err)
	}
	h, g := newGitHubAppHarness(t, key, time.Hour)
	const api = "https://api.github.com/repos/acme/widgets/pulls"
	const git = "https://github.com/acme/widgets.git/info/refs?service=git-upload-pack"
	ok := func(method, url, body string) string {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readBody(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s (%s): %s", method, url, resp.Status, resp.Header.Get(policy.RefusedHeader), b)
		}
		return b
	}
	ok("GET", api, "")
	var outs []string
	for i, c := range []struct{ method, url, body string }{
		{"GET", api, ""},
		{"GET", git, ""},
		{"POST", api, `{"title":"widget"}`},
	} {
		g.revoke()
		outs = append(outs, ok(c.method, c.url, c.body))
		if n := len(g.tokens()); n != i+2 {
			t.Fatalf("after %s %s: %d tokens minted, want %d", c.method, c.url, n, i+2)
		}
		seen := g.seen()
		last := seen[len(seen)-1]
		if got := appToken(last.Header).v; got != g.tokens()[i+1] {
			t.Fatalf("the request sent again carried %q, want the new token", got)
		}
		if last.Body != c.body {
			t.Fatalf("the request sent again carried the body %q, want %q", last.Body, c.body)
		}
		time.Sleep(staleGap) // one replacement of a refused token per staleGap
	}

	// A burst after a revocation: one mint serves every request.
	g.revoke()
	before := len(g.tokens())
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			resp, body := h.do("GET", api)
			if resp.StatusCode != http.StatusOK {
				errs <- resp.Status + ": " + body
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a request of the burst: %s", e)
	}
	if n := len(g.tokens()) - before; n != 1 {
		t.Errorf("%d mints for 8 concurrent requests refused with one token, want 1", n)
	}
	time.Sleep(staleGap)

	// A streamed body is not held: its 401 comes back.
	g.revoke()
	before = len(g.tokens())
	req, _ := http.NewRequest("POST", api, io.MultiReader(strings.NewReader(`{"title":`), strings.NewReader(`"gadget"}`)))
	req.ContentLength = -1
	resp, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a streamed POST after revocation: %s, want the API's 401", resp.Status)
	}
	outs = append(outs, body, resp.Header.Get("X-Echo"))
	if n := len(g.tokens()); n != before {
		t.Fatalf("the streamed POST's 401 minted %d tokens, want none", n-before)
	}
	ok("GET", api, "")
	if n := len(g.tokens()); n != before+1 {
		t.Fatalf("the GET after it minted %d tokens, want 1", n-before)
	}
	for _, out := range append(outs, h.logs.String()) {
		for _, tok := range g.tokens() {
			basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tok))
			if strings.Contains(out, tok) || strings.Contains(out, basic) {
				t.Fatalf("output holds a minted token: %q", out)
			}
		}
	}
	if m := h.get("/metrics"); !strings.Contains(m, fmt.Sprintf(`keyhole_proxy_token_mints_total{connection="github-app",result="ok"} %d`, len(g.tokens()))) {
		t.Errorf("metrics lack the mints:\n%s", m)
	}
}

// TestServerGitHubAppMintFails refuses a request whose token cannot be
// minted, with credential-unavailable, and sends nothing upstream: not
// the request without a credential, not with the placeholder.
func TestServerGitHubAppMintFails(t *testing.T) {
	key, err := appKey()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		breakIt func(h *harness, g *githubStandIn)
	}{
		"API refuses": {breakIt: func(_ *harness, g *githubStandIn) { g.fail = http.StatusForbidden }},
		"wrong key": {breakIt: func(_ *harness, g *githubStandIn) {
			g.pub = &newAppKey(t).PublicKey
		}},
		"key not PEM": {breakIt: func(h *harness, _ *githubStandIn) {
			h.secrets.write(map[string]string{"private-key.pem": canary})
		}},
		"key missing": {breakIt: func(h *harness, _ *githubStandIn) {
			h.secrets.write(map[string]string{"other": "x"})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			h, g := newGitHubAppHarness(t, key, time.Hour)
			g.mu.Lock()
			tc.breakIt(h, g)
			g.mu.Unlock()
			resp, body := h.do("GET", "https://api.github.com/repos/acme/widgets/pulls")
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(policy.RefusedHeader) != "credential-unavailable" {
				t.Fatalf("%s %q, want 502 credential-unavailable", resp.Status, resp.Header.Get(policy.RefusedHeader))
			}
			if n := len(g.seen()); n != 0 {
				t.Fatalf("the upstream got %d requests", n)
			}
			if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_injection_failures_total{host="api.github.com"} 1`) ||
				!strings.Contains(m, `keyhole_proxy_token_mints_total{connection="github-app",result="error"} 1`) {
				t.Errorf("metrics lack the failure:\n%s", m)
			}
			keyLine := strings.Split(pemPKCS1(key), "\n")[1]
			for _, out := range []string{body, h.logs.String()} {
				if strings.Contains(out, keyLine) || strings.Contains(out, canary) {
					t.Fatalf("output holds the key: %q", out)
				}
			}
		})
	}
}

// TestParseAppKey reads the key forms GitHub and openssl write and
// refuses others without quoting them.
func TestParseAppKey(t *testing.T) {
	key, err := appKey()
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		in      string
		wantErr string
	}{
		"PKCS #1":         {in: pemPKCS1(key)},
		"PKCS #8":         {in: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))},
		"not PEM":         {in: canary, wantErr: "not a PEM private key"},
		"a certificate":   {in: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(canary)})), wantErr: `a PEM block of type "CERTIFICATE"`},
		"PKCS #1 garbage": {in: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte(canary)})), wantErr: "not a valid PKCS #1 RSA private key"},
	} {
		t.Run(name, func(t *testing.T) {
			k, err := parseAppKey([]byte(tc.in))
			if tc.wantErr == "" {
				if err != nil || !k.Equal(key) {
					t.Fatalf("parseAppKey: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), canary) {
				t.Fatalf("error %v, want one saying %q without the input", err, tc.wantErr)
			}
		})
	}
}

// TestSignAppJWT checks the JWT against golang-jwt's reading of it.
func TestSignAppJWT(t *testing.T) {
	key, err := appKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s, err := signAppJWT(key, 99, now)
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.RegisteredClaims{}
	if _, err := jwt.ParseWithClaims(s, &claims, func(*jwt.Token) (any, error) { return &key.PublicKey, nil }, jwt.WithValidMethods([]string{"RS256"})); err != nil {
		t.Fatal(err)
	}
	if claims.Issuer != "99" || claims.IssuedAt.Unix() != now.Unix()-60 || claims.ExpiresAt.Sub(now) > 10*time.Minute {
		t.Fatalf("claims %+v", claims)
	}
}

// TestParseTokenResponse reads GitHub's answer and refuses a token no
// header may carry, never quoting the body.
func TestParseTokenResponse(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		wantErr bool
	}{
		"token":        {in: `{"token":"ghs_abc","expires_at":"2026-12-06T14:00:00Z"}`},
		"no token":     {in: `{"expires_at":"2026-12-06T14:00:00Z"}`, wantErr: true},
		"line break":   {in: `{"token":"ghs_a\nb","expires_at":"2026-12-06T14:00:00Z"}`, wantErr: true},
		"space":        {in: `{"token":"ghs a","expires_at":"2026-12-06T14:00:00Z"}`, wantErr: true},
		"no expiry":    {in: `{"token":"ghs_abc"}`, wantErr: true},
		"not JSON":     {in: canary, wantErr: true},
		"wrong expiry": {in: `{"token":"ghs_abc","expires_at":"` + canary + `"}`, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			tok, exp, err := parseTokenResponse([]byte(tc.in))
			if tc.wantErr {
				if err == nil || strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "ghs") {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err != nil || tok.Reveal() != "ghs_abc" || exp.IsZero() {
				t.Fatalf("%v %v %v", tok.Reveal(), exp, err)
			}
		})
	}
}

// FuzzParseTokenResponse: whatever the API answers, a token comes back
// only when it is a header value, and an error never quotes the answer.
func FuzzParseTokenResponse(f *testing.F) {
	f.Add([]byte(`{"token":"ghs_abc","expires_at":"2026-12-06T14:00:00Z"}`))
	f.Add([]byte(`{"token":"","expires_at":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, exp, err := parseTokenResponse(b)
		if err != nil {
			if len(b) > 8 && strings.Contains(err.Error(), string(b)) {
				t.Fatalf("error quotes the response: %v", err)
			}
			return
		}
		if v, verr := config.HeaderValue([]byte(tok.Reveal())); verr != nil || string(v) != tok.Reveal() || exp.IsZero() {
			t.Fatalf("token %q is not a header value", tok.Reveal())
		}
	})
}

// FuzzParseInstallationResponse: an id comes back only when positive.
func FuzzParseInstallationResponse(f *testing.F) {
	f.Add([]byte(`{"id": 4242}`))
	f.Add([]byte(`{"id": -1}`))
	f.Add([]byte(`{"id": "1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := parseInstallationResponse(b)
		if err == nil && id <= 0 {
			t.Fatalf("id %d", id)
		}
	})
}

// FuzzParseAppKey: no input panics, and an error never quotes it.
func FuzzParseAppKey(f *testing.F) {
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parseAppKey(b); err != nil && len(b) > 40 && strings.Contains(err.Error(), string(b)) {
			t.Fatalf("error quotes the input: %v", err)
		}
	})
}

// minterInput is what the minter tests mint with: the App's key
// (appKey), a reader that gives its PEM for any Secret and key, and the
// injection of App 1234's installation 4242 on api.github.com.
func minterInput(t *testing.T) (*rsa.PrivateKey, func(secret, k string) ([]byte, error), *config.GitHubAppInject) {
	t.Helper()
	key, err := appKey()
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := []byte(pemPKCS1(key))
	read := func(secret, k string) ([]byte, error) { return keyPEM, nil }
	return key, read, &config.GitHubAppInject{AppID: 1234, InstallationID: 4242, PrivateKeyKey: "k", API: "api.github.com", Scheme: "token"}
}

// TestMinterRenewal keeps a token until five minutes before its expiry
// (or half its life, when that is sooner), renews it then, and does not
// keep a token the proxy's clock already finds expired.
func TestMinterRenewal(t *testing.T) {
	key, read, g := minterInput(t)
	ca := newTestCA(t, "github stand-in CA")
	for name, tc := range map[string]struct {
		lifetime time.Duration
		steps    []time.Duration // clock offsets of successive requests
		mints    []int           // tokens minted after each
	}{
		"an hour's token": {lifetime: time.Hour, steps: []time.Duration{0, 30 * time.Minute, 54 * time.Minute, 56 * time.Minute, 57 * time.Minute}, mints: []int{1, 1, 1, 2, 2}},
		"a short token":   {lifetime: 4 * time.Minute, steps: []time.Duration{0, time.Minute, 2*time.Minute + time.Second}, mints: []int{1, 1, 2}},
		"already expired": {lifetime: -time.Minute, steps: []time.Duration{0, 0, time.Second}, mints: []int{1, 2, 3}},
	} {
		t.Run(name, func(t *testing.T) {
			s := newGitHubStandIn(t, ca, 1234, &key.PublicKey, tc.lifetime)
			addr := s.srv.Listener.Addr().String()
			client := &http.Client{Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: ca.pool},
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, addr)
				},
			}}
			m := newMinter(client, func(string, string) {})
			start := time.Now()
			for i, step := range tc.steps {
				clock := func() time.Time { return start.Add(step) }
				m.cache.now = clock
				s.mu.Lock()
				s.clock = clock
				s.mu.Unlock()
				if _, err := m.token("c", "s", g, read); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if got := len(s.tokens()); got != tc.mints[i] {
					t.Fatalf("after request %d at +%s: %d tokens minted, want %d", i, step, got, tc.mints[i])
				}
			}
		})
	}
}

// heldAPI answers POST .../access_tokens as GitHub would once release is
// closed, with status (a token when 201), and counts the calls.
type heldAPI struct {
	release chan struct{}
	status  int
	calls   atomic.Int64
}

func (a *heldAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	a.calls.Add(1)
	select {
	case <-a.release:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	body := `{"message":"nope"}`
	if a.status == http.StatusCreated {
		body = fmt.Sprintf(`{"token":"ghs_held_%d","expires_at":%q}`, a.calls.Load(), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}
	return &http.Response{StatusCode: a.status, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}, Request: r}, nil
}

// TestMinterOneFlight: the requests that need a token while one is being
// minted share that mint, its error included, and each waits at most the
// minter's wait. A slow API (answering after the wait) costs each
// request the wait and a credential-unavailable refusal, not a queue of
// mints each up to mintTimeout; a failing one is called once for all of
// them, not once each in turn.
func TestMinterOneFlight(t *testing.T) {
	_, read, g := minterInput(t)
	const waiters = 8
	for name, tc := range map[string]struct {
		status int
		wait   time.Duration
		// releaseAfter: the API answers this long after its first call.
		releaseAfter time.Duration
		wantErr      bool
	}{
		"a slow API":    {status: http.StatusCreated, wait: 200 * time.Millisecond, releaseAfter: time.Second, wantErr: true},
		"a failing API": {status: http.StatusInternalServerError, wait: 5 * time.Second, releaseAfter: 300 * time.Millisecond, wantErr: true},
		"a working API": {status: http.StatusCreated, wait: 5 * time.Second, releaseAfter: 300 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			api := &heldAPI{release: make(chan struct{}), status: tc.status}
			var once sync.Once
			defer once.Do(func() { close(api.release) })
			m := newMinter(&http.Client{Transport: api}, func(string, string) {})
			m.cache.flightWait = tc.wait
			type result struct {
				err  error
				took time.Duration
			}
			results := make(chan result, waiters)
			for range waiters {
				go func() {
					start := time.Now()
					_, err := m.token("c", "s", g, read)
					results <- result{err, time.Since(start)}
				}()
			}
			eventually(t, "the API's first call", func() bool { return api.calls.Load() > 0 })
			go func() { time.Sleep(tc.releaseAfter); once.Do(func() { close(api.release) }) }()
			deadline := time.After(tc.wait + 3*time.Second)
			for i := range waiters {
				select {
				case r := <-results:
					if tc.wantErr != (r.err != nil) {
						t.Errorf("request %d: error %v, want one: %v", i, r.err, tc.wantErr)
					}
					if r.err != nil && !errors.Is(r.err, ErrCredentialUnavailable) {
						t.Errorf("request %d: %v, want it to wrap ErrCredentialUnavailable", i, r.err)
					}
					if r.took > max(tc.wait, tc.releaseAfter)+time.Second {
						t.Errorf("request %d waited %s", i, r.took)
					}
				case <-deadline:
					t.Fatalf("%d of %d requests still waiting after %s; the API was called %d times", waiters-i, waiters, tc.wait+3*time.Second, api.calls.Load())
				}
			}
			if n := api.calls.Load(); n != 1 {
				t.Errorf("the API was called %d times for %d concurrent requests, want 1", n, waiters)
			}
			if tc.status != http.StatusCreated {
				return
			}
			// The slow mint ends after its waiters gave up: its token
			// serves the next request, with no other call.
			eventually(t, "the mint's end", func() bool {
				m.cache.mu.Lock()
				defer m.cache.mu.Unlock()
				e := m.cache.entries[appCacheKey("s", g)]
				return e != nil && e.flight == nil
			})
			if _, err := m.token("c", "s", g, read); err != nil {
				t.Fatalf("after the mint: %v", err)
			}
			if n := api.calls.Load(); n != 1 {
				t.Errorf("the API was called %d times, want 1", n)
			}
		})
	}
}

// TestMinterRetryAfterFailure: a failed mint's error answers the
// requests of its scope for the minter's retry without calling the API,
// however many come, so a sandbox cannot have the proxy spend the App's
// rate limit against an API that refuses; after it, the API is asked
// again, and a token it then gives serves at once.
func TestMinterRetryAfterFailure(t *testing.T) {
	_, read, g := minterInput(t)
	api := &heldAPI{release: make(chan struct{}), status: http.StatusTooManyRequests}
	close(api.release)
	m := newMinter(&http.Client{Transport: api}, func(string, string) {})
	m.cache.retry = 300 * time.Millisecond
	for i := range 20 {
		if _, err := m.token("c", "s", g, read); !errors.Is(err, ErrCredentialUnavailable) {
			t.Fatalf("request %d: %v, want ErrCredentialUnavailable", i, err)
		}
	}
	if n := api.calls.Load(); n != 1 {
		t.Fatalf("the API was called %d times for 20 requests within the retry, want 1", n)
	}
	time.Sleep(m.cache.retry + 50*time.Millisecond)
	api.status = http.StatusCreated
	if _, err := m.token("c", "s", g, read); err != nil {
		t.Fatalf("after the retry: %v", err)
	}
	if n := api.calls.Load(); n != 2 {
		t.Errorf("the API was called %d times, want 2", n)
	}
}
