package proxy

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"keyhole.dev/keyhole/proxy/policy"
)

// authStandIn stands in, on loopback, for an OAuth 2.0 authorization
// server (auth.example's token endpoint), Google's token endpoint
// (oauth2.googleapis.com, checking each JWT grant's RS256 signature
// against the service account's public key with golang-jwt) and an API
// (api.example) that accepts only the live tokens they handed out and
// echoes the Authorization header it got, as a hostile upstream could.
type authStandIn struct {
	srv      *httptest.Server
	lifetime time.Duration

	mu           sync.Mutex
	clientSecret string
	refresh      string // the refresh token the server accepts now
	rotate       bool   // hand out a new refresh token with each refresh
	fail         int    // answer this status to token requests, when not 0
	delay        time.Duration
	saPub        *rsa.PublicKey
	live         map[string]time.Time // token → expiry
	minted       []string
	params       []url.Values
	jwtClaims    []jwt.MapClaims
	requests     []seen
	unauthorized int
	// slow API requests left, each checked slowDelay after it arrived, as
	// an API behind a loaded link sees the token late.
	slow      int
	slowDelay time.Duration
}

func newAuthStandIn(t testing.TB, ca *testCA, lifetime time.Duration) *authStandIn {
	a := &authStandIn{lifetime: lifetime, clientSecret: "cs-" + canary, refresh: "rt-" + canary + "-0", live: map[string]time.Time{}}
	a.srv = ca.serve(t, http.HandlerFunc(a.serve), "auth.example", "api.example", "oauth2.googleapis.com")
	return a
}

func (a *authStandIn) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch r.Host {
	case "auth.example":
		a.token(w, r, body)
	case "oauth2.googleapis.com":
		a.google(w, r, body)
	default:
		a.api(w, r, body)
	}
}

func (a *authStandIn) issue(w http.ResponseWriter, extra map[string]any) {
	tok := fmt.Sprintf("at_%s_%d", strings.ReplaceAll(canary, "-", ""), len(a.minted))
	a.minted = append(a.minted, tok)
	a.live[tok] = time.Now().Add(a.lifetime)
	ans := map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(a.lifetime / time.Second)}
	for k, v := range extra {
		ans[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ans)
}

func (a *authStandIn) token(w http.ResponseWriter, r *http.Request, body []byte) {
	a.mu.Lock()
	delay := a.delay
	a.mu.Unlock()
	time.Sleep(delay)
	a.mu.Lock()
	defer a.mu.Unlock()
	form, err := url.ParseQuery(string(body))
	if err != nil || r.Method != http.MethodPost || r.URL.Path != "/oauth/token" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	id, sec, ok := r.BasicAuth()
	if !ok {
		id, sec = form.Get("client_id"), form.Get("client_secret")
	}
	if id != "keyhole-client" || sec != a.clientSecret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"invalid_client","error_description":"you sent %s"}`, sec)
		return
	}
	if a.fail != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.fail)
		fmt.Fprintf(w, `{"error":"server_error","error_description":"secret %s"}`, sec)
		return
	}
	a.params = append(a.params, form)
	switch form.Get("grant_type") {
	case "client_credentials":
		a.issue(w, nil)
	case "refresh_token":
		if form.Get("refresh_token") != a.refresh {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		var extra map[string]any
		if a.rotate {
			n := 0
			fmt.Sscanf(a.refresh[strings.LastIndex(a.refresh, "-")+1:], "%d", &n)
			a.refresh = fmt.Sprintf("rt-%s-%d", canary, n+1)
			extra = map[string]any{"refresh_token": a.refresh}
		}
		a.issue(w, extra)
	default:
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
	}
}

// google checks a JWT grant as Google's token endpoint does: RS256 by
// the service account's key, issued by its address, for the token
// endpoint, with scopes or a target audience.
func (a *authStandIn) google(w http.ResponseWriter, r *http.Request, body []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	form, _ := url.ParseQuery(string(body))
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(form.Get("assertion"), claims, func(*jwt.Token) (any, error) { return a.saPub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer("agent@acme-project.iam.gserviceaccount.com"),
		jwt.WithAudience("https://oauth2.googleapis.com/token"), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil || form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
		return
	}
	a.jwtClaims = append(a.jwtClaims, claims)
	if aud, ok := claims["target_audience"].(string); ok {
		id, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"aud": aud, "exp": time.Now().Add(a.lifetime).Unix(),
			"sub": canary}).SignedString([]byte("stand-in"))
		a.minted = append(a.minted, id)
		a.live[id] = time.Now().Add(a.lifetime)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id_token": id})
		return
	}
	a.issue(w, nil)
}

func (a *authStandIn) api(w http.ResponseWriter, r *http.Request, body []byte) {
	a.mu.Lock()
	var wait time.Duration
	if a.slow > 0 {
		a.slow--
		wait = a.slowDelay
	}
	a.mu.Unlock()
	time.Sleep(wait)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = append(a.requests, seen{Host: r.Host, Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: string(body)})
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	exp, ok := a.live[tok]
	w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	if !ok || time.Now().After(exp) {
		a.unauthorized++
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "not a live token: %s\n", r.Header.Get("Authorization"))
		return
	}
	fmt.Fprintf(w, "you sent %s and %d bytes\n", r.Header.Get("Authorization"), len(body))
}

// revoke makes the API refuse every token handed out so far.
func (a *authStandIn) revoke() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.live)
}

func (a *authStandIn) tokens() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.minted...)
}

func (a *authStandIn) seen() []seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]seen(nil), a.requests...)
}

const oauthConfig = configHead + `
  "scrubResponseBodies": true,
  "hosts": [
    {"name": "api.example", "connection": "acme-api",
     "inject": {"secret": "acme-github-token", "oauth2": {"tokenUrl": "https://auth.example/oauth/token", "grant": "%s",
       "clientIdKey": "client-id", "clientSecretKey": "client-secret"%s,
       "scopes": ["read", "write"], "audience": "https://api.example", "resource": "https://api.example/v1"}},
     "rules": [{"methods": ["GET", "POST"], "pathPrefixes": ["/v1"]}]}
  ],
  "passthrough": ["auth.example"]
}`

// newOAuthHarness runs the proxy with oauthConfig for grant, the client's
// credentials mounted in its Secret and every stand-in host resolved to
// the stand-in.
func newOAuthHarness(t testing.TB, grant string, lifetime time.Duration, opts ...harnessOpt) (*harness, *authStandIn) {
	t.Helper()
	caStandIn := newTestCA(t, "authorization server stand-in CA")
	a := newAuthStandIn(t, caStandIn, lifetime)
	refresh := ""
	if grant == "refreshToken" {
		refresh = `, "refreshTokenKey": "refresh-token"`
	}
	h := newHarnessConfig(t, fmt.Sprintf(oauthConfig, grant, refresh),
		append([]harnessOpt{resolveTo(caStandIn, a.srv.Listener.Addr().String(), "auth.example", "api.example", "oauth2.googleapis.com")}, opts...)...)
	h.secrets.write(map[string]string{"client-id": "keyhole-client", "client-secret": a.clientSecret, "refresh-token": a.refresh})
	return h, a
}

// bearer sends one request with the placeholder, as a sandbox's client
// configured with it does.
func (h *harness) bearer(method, url, body string) (*http.Response, string) {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer omnia-injected-acme-api")
	resp, err := h.client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, readBody(h.t, resp)
}

// noLeak fails when any output holds one of secrets.
func noLeak(t testing.TB, outputs []string, secrets ...string) {
	t.Helper()
	for _, out := range outputs {
		for _, s := range secrets {
			if s != "" && strings.Contains(out, s) {
				t.Fatalf("output holds a credential or its root material %q: %q", s, out)
			}
		}
	}
}

// TestServerOAuth2ClientCredentials obtains a token with the client
// credentials grant through the proxy over real sockets: the token
// endpoint gets the client's credentials, scopes, audience and
// resource; the API gets Authorization: Bearer with the token; one
// exchange serves several requests; what the upstream echoes back
// reaches the sandbox scrubbed, and no log line or metric holds the
// token or the client secret.
func TestServerOAuth2ClientCredentials(t *testing.T) {
	h, a := newOAuthHarness(t, "clientCredentials", time.Hour)
	var outs []string
	for range 3 {
		resp, body := h.bearer("GET", "https://api.example/v1/things", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s (%s): %s", resp.Status, resp.Header.Get(policy.RefusedHeader), body)
		}
		outs = append(outs, body, resp.Header.Get("X-Echo"))
	}
	toks := a.tokens()
	if len(toks) != 1 {
		t.Fatalf("%d exchanges for three requests within the token's life, want 1", len(toks))
	}
	if got := a.seen()[0].Header.Get("Authorization"); got != "Bearer "+toks[0] {
		t.Errorf("the API got Authorization %q, want the token", got)
	}
	p := a.params[0]
	for k, want := range map[string]string{"grant_type": "client_credentials", "scope": "read write", "audience": "https://api.example", "resource": "https://api.example/v1"} {
		if p.Get(k) != want {
			t.Errorf("token request %s=%q, want %q", k, p.Get(k), want)
		}
	}
	outs = append(outs, h.logs.String(), h.get("/metrics"))
	noLeak(t, outs, toks[0], a.clientSecret, base64.StdEncoding.EncodeToString([]byte("keyhole-client:"+a.clientSecret)))
	if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_token_mints_total{connection="acme-api",result="ok"} 1`) {
		t.Errorf("metrics lack the exchange:\n%s", m)
	}
}

// TestServerOAuth2SharedExchange sends concurrent requests before any
// token is held: they share one exchange, however slow.
func TestServerOAuth2SharedExchange(t *testing.T) {
	h, a := newOAuthHarness(t, "clientCredentials", time.Hour)
	a.mu.Lock()
	a.delay = 300 * time.Millisecond
	a.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for range 16 {
		wg.Go(func() {
			resp, body := h.bearer("GET", "https://api.example/v1/things", "")
			if resp.StatusCode != http.StatusOK {
				errs <- resp.Status + ": " + body
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := len(a.tokens()); n != 1 {
		t.Errorf("%d exchanges for 16 concurrent requests, want 1", n)
	}
}

// TestServerOAuth2RenewsOn401 renews a token the API stopped accepting
// (revoked before its expiry) once, and sends the request again when it
// can: a GET, and a POST whose short body the proxy held. A POST whose
// body streams (no length) gets the API's 401 as it came, scrubbed.
func TestServerOAuth2RenewsOn401(t *testing.T) {
	h, a := newOAuthHarness(t, "clientCredentials", time.Hour)
	if resp, _ := h.bearer("GET", "https://api.example/v1/things", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %s", resp.Status)
	}
	a.revoke()
	resp, body := h.bearer("GET", "https://api.example/v1/things", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET after revocation: %s: %s", resp.Status, body)
	}
	time.Sleep(staleGap) // one replacement of a refused token per staleGap
	a.revoke()
	resp, body = h.bearer("POST", "https://api.example/v1/things", `{"name":"widget"}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "and 17 bytes") {
		t.Fatalf("POST after revocation: %s: %s", resp.Status, body)
	}
	seen := a.seen()
	if last := seen[len(seen)-1]; last.Body != `{"name":"widget"}` {
		t.Errorf("the retried POST carried %q", last.Body)
	}
	// Within staleGap of that renewal, another 401 is passed on as it
	// came: an upstream refusing every token makes no exchange per
	// request.
	a.revoke()
	if r3, _ := h.bearer("GET", "https://api.example/v1/things", ""); r3.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a GET refused again within staleGap: %s, want the API's 401", r3.Status)
	}
	time.Sleep(staleGap)
	a.revoke()
	req, _ := http.NewRequest("POST", "https://api.example/v1/things", io.MultiReader(strings.NewReader(`{"name":`), strings.NewReader(`"gadget"}`)))
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer omnia-injected-acme-api")
	r2, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body = readBody(t, r2)
	if r2.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a streamed POST after revocation: %s, want the API's 401", r2.Status)
	}
	toks := a.tokens()
	if len(toks) != 3 {
		t.Fatalf("%d exchanges, want 3: the first and one per replayable 401", len(toks))
	}
	noLeak(t, []string{body, r2.Header.Get("X-Echo"), h.logs.String()}, toks...)
}

// TestServerOAuth2RenewsTwiceOnSlowRequests sends a request that the
// API checks later than its token's whole life, twice: the first token
// and the one renewed on the 401 both expire on the way. The proxy
// renews a second time, the third send is in time, and the client gets
// the API's 200; no request is sent a fourth time.
func TestServerOAuth2RenewsTwiceOnSlowRequests(t *testing.T) {
	life := 2 * time.Second
	h, a := newOAuthHarness(t, "clientCredentials", life)
	a.mu.Lock()
	a.slow, a.slowDelay = 2, life+200*time.Millisecond
	a.mu.Unlock()
	resp, body := h.bearer("POST", "https://api.example/v1/things", `{"name":"widget"}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "and 17 bytes") {
		t.Fatalf("a POST slower than its token's life: %s: %s", resp.Status, body)
	}
	seen := a.seen()
	if len(seen) != 3 {
		t.Fatalf("the API saw the request %d times, want 3 (two 401s, then the 200)", len(seen))
	}
	toks := a.tokens()
	if len(toks) != 3 {
		t.Fatalf("%d exchanges, want 3: the first and one per expired token", len(toks))
	}
	for i, s := range seen {
		if s.Body != `{"name":"widget"}` {
			t.Errorf("send %d carried %q", i+1, s.Body)
		}
		if want := "Bearer " + toks[i]; s.Header.Get("Authorization") != want {
			t.Errorf("send %d carried another token than exchange %d's", i+1, i+1)
		}
	}
	noLeak(t, []string{body, resp.Header.Get("X-Echo"), h.logs.String()}, toks...)
}

// TestServerOAuth2RefreshRotation uses the refresh token grant with a
// server that rotates the refresh token at each refresh, revoking the
// old: the proxy keeps the new one, in memory and in its state file, so
// a restarted proxy refreshes with it; once the Secret holds another
// refresh token (an operator rotated it), that one is used, without a
// restart.
func TestServerOAuth2RefreshRotation(t *testing.T) {
	state := filepath.Join(t.TempDir(), "refresh-tokens.json")
	withState := func(o *Options) { o.StateFile = state }
	h, a := newOAuthHarness(t, "refreshToken", 2*time.Second, withState)
	a.mu.Lock()
	a.rotate = true
	a.mu.Unlock()
	get := func(h *harness) {
		t.Helper()
		resp, body := h.bearer("GET", "https://api.example/v1/things", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s (%s): %s", resp.Status, resp.Header.Get(policy.RefusedHeader), body)
		}
	}
	get(h)
	time.Sleep(1100 * time.Millisecond) // past half the token's life
	get(h)
	if n := len(a.tokens()); n != 2 {
		t.Fatalf("%d exchanges, want 2", n)
	}
	a.mu.Lock()
	current := a.refresh
	a.mu.Unlock()
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), current) {
		t.Fatalf("the state file lacks the rotated refresh token")
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the state file's mode is %v, want 0600", fi.Mode().Perm())
	}
	// A restarted proxy: the Secret still holds the first refresh
	// token, which the server no longer accepts.
	h.shutdown()
	h2 := newHarnessConfig(t, fmt.Sprintf(oauthConfig, "refreshToken", `, "refreshTokenKey": "refresh-token"`), func(o *Options) {
		o.SecretsDir, o.StateFile = h.srv.opts.SecretsDir, state
		o.Resolve, o.UpstreamRoots = h.srv.opts.Resolve, h.srv.opts.UpstreamRoots
	})
	get(h2)
	// The operator puts a new refresh token in the Secret.
	a.mu.Lock()
	a.rotate = false
	a.refresh = "rt-" + canary + "-operator"
	a.mu.Unlock()
	h.secrets.write(map[string]string{"client-id": "keyhole-client", "client-secret": a.clientSecret, "refresh-token": "rt-" + canary + "-operator"})
	time.Sleep(1100 * time.Millisecond)
	get(h2)
	a.mu.Lock()
	last := a.params[len(a.params)-1].Get("refresh_token")
	a.mu.Unlock()
	if last != "rt-"+canary+"-operator" {
		t.Errorf("refreshed with %q after the Secret's rotation, want the Secret's", last)
	}
	noLeak(t, []string{h.logs.String(), h2.logs.String(), h2.get("/metrics")}, current, a.clientSecret)
}

// TestServerOAuth2ExchangeFails refuses a request whose token cannot be
// obtained, with credential-unavailable, and sends nothing upstream: not
// the request without a credential, not with the placeholder. The log
// says why, without what the token endpoint's answer quoted.
func TestServerOAuth2ExchangeFails(t *testing.T) {
	for name, breakIt := range map[string]func(h *harness, a *authStandIn){
		"server error":  func(_ *harness, a *authStandIn) { a.mu.Lock(); a.fail = 503; a.mu.Unlock() },
		"wrong secret":  func(_ *harness, a *authStandIn) { a.mu.Lock(); a.clientSecret = "another"; a.mu.Unlock() },
		"secret absent": func(h *harness, _ *authStandIn) { h.secrets.write(map[string]string{"client-id": "keyhole-client"}) },
	} {
		t.Run(name, func(t *testing.T) {
			h, a := newOAuthHarness(t, "clientCredentials", time.Hour)
			breakIt(h, a)
			resp, body := h.bearer("GET", "https://api.example/v1/things", "")
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(policy.RefusedHeader) != "credential-unavailable" {
				t.Fatalf("%s (%s): %s", resp.Status, resp.Header.Get(policy.RefusedHeader), body)
			}
			if n := len(a.seen()); n != 0 {
				t.Fatalf("the API got %d requests, want none", n)
			}
			if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_token_mints_total{connection="acme-api",result="error"} 1`) {
				t.Errorf("metrics lack the failure:\n%s", m)
			}
			noLeak(t, []string{body, h.logs.String()}, "cs-"+canary)
		})
	}
}

const googleConfig = configHead + `
  "scrubResponseBodies": true,
  "hosts": [
    {"name": "api.example", "connection": "acme-api",
     "inject": {"secret": "acme-github-token", "googleServiceAccount": {"keyKey": "key.json",
       "tokenUrl": "https://oauth2.googleapis.com/token", %s}},
     "rules": [{"methods": ["GET"], "pathPrefixes": ["/v1"]}]}
  ],
  "passthrough": ["oauth2.googleapis.com"]
}`

func serviceAccountJSON(t testing.TB, k *rsa.PrivateKey, tokenURI string) string {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "acme-project", "private_key_id": "0123abcd",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "agent@acme-project.iam.gserviceaccount.com", "client_id": "1234567890",
		"token_uri": tokenURI,
	})
	return string(b)
}

// TestServerGoogleServiceAccount mints Google tokens with a service
// account's key through the proxy: the token endpoint stand-in checks
// the JWT grant's signature against the key's public key; an access
// token carries the scopes, an ID token the audience; a key naming
// another token_uri is refused; a rotated key is used from the next
// exchange on. The key and the tokens stay out of every output.
func TestServerGoogleServiceAccount(t *testing.T) {
	key, err := appKey()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		form  string
		claim string
		want  string
	}{
		"access token": {form: `"scopes": ["https://www.googleapis.com/auth/cloud-platform"]`, claim: "scope", want: "https://www.googleapis.com/auth/cloud-platform"},
		"ID token":     {form: `"audience": "https://api.example"`, claim: "target_audience", want: "https://api.example"},
	} {
		t.Run(name, func(t *testing.T) {
			caStandIn := newTestCA(t, "google stand-in CA")
			a := newAuthStandIn(t, caStandIn, time.Hour)
			a.saPub = &key.PublicKey
			h := newHarnessConfig(t, fmt.Sprintf(googleConfig, tc.form), resolveTo(caStandIn, a.srv.Listener.Addr().String(), "api.example", "oauth2.googleapis.com"))
			keyJSON := serviceAccountJSON(t, key, "https://oauth2.googleapis.com/token")
			h.secrets.write(map[string]string{"key.json": keyJSON})
			resp, body := h.bearer("GET", "https://api.example/v1/things", "")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s (%s): %s", resp.Status, resp.Header.Get(policy.RefusedHeader), body)
			}
			toks := a.tokens()
			if len(toks) != 1 || a.seen()[0].Header.Get("Authorization") != "Bearer "+toks[0] {
				t.Fatalf("the API did not get the minted token")
			}
			if got := a.jwtClaims[0][tc.claim]; got != tc.want {
				t.Errorf("the grant's %s is %v, want %s", tc.claim, got, tc.want)
			}
			keyLine := strings.Split(strings.Split(keyJSON, `\n`)[1], `\n`)[0]
			noLeak(t, []string{body, resp.Header.Get("X-Echo"), h.logs.String(), h.get("/metrics")}, toks[0], keyLine)

			// A key whose token_uri is elsewhere is refused.
			a.revoke()
			h.secrets.write(map[string]string{"key.json": serviceAccountJSON(t, key, "https://evil.example/token")})
			resp, _ = h.bearer("GET", "https://api.example/v1/things", "")
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a revoked token with an unusable key: %s, want the API's 401 passed on", resp.Status)
			}
			// A rotated key, which the stand-in alone accepts now, past
			// the gap between two replacements of a refused token.
			time.Sleep(staleGap)
			rotated := newAppKey(t)
			a.mu.Lock()
			a.saPub = &rotated.PublicKey
			a.mu.Unlock()
			h.secrets.write(map[string]string{"key.json": serviceAccountJSON(t, rotated, "")})
			resp, body = h.bearer("GET", "https://api.example/v1/things", "")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("after the key's rotation: %s: %s", resp.Status, body)
			}
		})
	}
}
