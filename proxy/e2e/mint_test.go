//go:build e2e

package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// appStandIn is GitHub's App API on loopback, in front of the world's
// fake REST API: it checks each App JWT's RS256 signature against the
// App's public key (golang-jwt, not the proxy's code), looks up the
// installation of acme, mints tokens that live lifetime, records the
// permissions each mint asked for, and makes the world's API and git
// server accept only the newest token.
type appStandIn struct {
	w        *world
	t        testing.TB
	pub      *rsa.PublicKey
	lifetime time.Duration

	mu     sync.Mutex
	asked  []string
	minted int
}

func (s *appStandIn) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/app/") && !strings.HasSuffix(r.URL.Path, "/installation") {
		s.w.apiState.ServeHTTP(rw, r)
		return
	}
	raw, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	claims := jwt.RegisteredClaims{}
	if _, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return s.pub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer("4321"), jwt.WithExpirationRequired()); err != nil ||
		claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute {
		http.Error(rw, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/orgs/acme/installation":
		fmt.Fprint(rw, `{"id": 77}`)
	case r.Method == http.MethodPost && r.URL.Path == "/app/installations/77/access_tokens":
		body, _ := io.ReadAll(r.Body)
		tok := "ghs_" + strings.TrimPrefix(canary(s.t), "ghp_")
		s.mu.Lock()
		s.asked = append(s.asked, string(body))
		s.minted++
		s.mu.Unlock()
		s.w.setToken(s.t, tok)
		s.w.apiState.setToken(tok)
		s.w.gitState.setToken(tok)
		rw.WriteHeader(http.StatusCreated)
		json.NewEncoder(rw).Encode(map[string]any{"token": tok, "expires_at": time.Now().Add(s.lifetime).UTC().Format(time.RFC3339Nano)})
	default:
		http.NotFound(rw, r)
	}
}

func (s *appStandIn) mints() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.minted, append([]string(nil), s.asked...)
}

// newGitHubAppWorld runs the proxy binary with github-app.json, the App's
// key mounted in its Secret (a line of it a secret of the world) and
// api.github.com resolved to an appStandIn whose tokens live lifetime.
func newGitHubAppWorld(t *testing.T, lifetime time.Duration) (*world, *appStandIn) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, "github-app.json", "--resolve", "api.github.com:443:"+ln.Addr().String())
	s := &appStandIn{w: w, t: t, pub: &key.PublicKey, lifetime: lifetime}
	serveUpstream(t, ln, w.upstreamCA, []string{"api.github.com"}, s)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	newSecretVolume(t, w.secretsDir, "acme-github-app", map[string]string{"private-key.pem": keyPEM})
	w.plantSecret(strings.Split(keyPEM, "\n")[1])
	return w, s
}

// TestGitHubAppTokens runs the proxy binary with a githubApp injection:
// real git clones through it and curl and gh call the API with no token
// of their own; the proxy mints an installation token narrowed to the
// config's scope, sends it as x-access-token to git and as
// Authorization: token to the API, renews it as it nears expiry, and no
// output holds the token or the App's key.
func TestGitHubAppTokens(t *testing.T) {
	w, s := newGitHubAppWorld(t, 4*time.Second)

	w.gitClone(t, "https://github.com/acme/widgets.git")
	if !w.sawBasicToken(w.git.find("POST", "/acme/widgets.git/git-upload-pack")) {
		t.Errorf("git-upload-pack did not carry the minted token as x-access-token")
	}
	if got := w.curl(t, "https://api.github.com/repos/acme/widgets/pulls"); got.code != http.StatusOK {
		t.Errorf("curl: %d %s", got.code, got.stderr)
	}
	env := w.ghEnv(t)
	if res := w.runClient(t, t.TempDir(), env, requireTool(t, "gh"), "api", "/repos/acme/widgets"); res.err != nil {
		t.Errorf("gh api /repos/acme/widgets: %v\n%s", res.err, res.stderr)
	}
	n, asked := s.mints()
	if n != 1 {
		t.Errorf("minted %d tokens for requests within one token's life, want 1", n)
	}
	if want := `{"repositories":["widgets"],"permissions":{"contents":"read","metadata":"read","pull_requests":"write"}}`; len(asked) == 0 || asked[0] != want {
		t.Errorf("the token request asked %q, want %s", asked, want)
	}
	// Past half the token's life the next request renews it.
	time.Sleep(2500 * time.Millisecond)
	w.gitClone(t, "https://github.com/acme/widgets.git")
	if n, _ := s.mints(); n != 2 {
		t.Errorf("minted %d tokens after half the token's life, want 2", n)
	}
	if !w.sawBasicToken(w.git.find("POST", "/acme/widgets.git/git-upload-pack")) {
		t.Errorf("the clone after renewal did not carry the renewed token")
	}
	w.wantLog(t, logQuery{host: "github.com", path: "/acme/widgets.git/git-upload-pack", reason: "allowed"})
}

// TestGitHubAppTokenRevoked revokes the installation token mid-run,
// behind the proxy's back (the API and the git server then answer 401 to
// it, as GitHub does to a token its owner deleted): curl, gh and a git
// clone through the proxy see no 401, since the proxy mints a new token
// (the stand-in checks its JWT) and sends the request again.
func TestGitHubAppTokenRevoked(t *testing.T) {
	w, s := newGitHubAppWorld(t, time.Hour)
	revoke := func() {
		time.Sleep(1100 * time.Millisecond) // one renewal of a refused token a second
		w.apiState.setToken("revoked-by-the-owner")
		w.gitState.setToken("revoked-by-the-owner")
	}

	if got := w.curl(t, "https://api.github.com/repos/acme/widgets/pulls"); got.code != http.StatusOK {
		t.Fatalf("curl: %d %s", got.code, got.stderr)
	}
	revoke()
	if got := w.curl(t, "https://api.github.com/repos/acme/widgets/pulls"); got.code != http.StatusOK {
		t.Errorf("curl after the revocation: %d %s", got.code, got.stderr)
	}
	revoke()
	env := w.ghEnv(t)
	if res := w.runClient(t, t.TempDir(), env, requireTool(t, "gh"), "api", "/repos/acme/widgets"); res.err != nil {
		t.Errorf("gh api after the revocation: %v\n%s", res.err, res.stderr)
	}
	revoke()
	w.gitClone(t, "https://github.com/acme/widgets.git")
	if n, _ := s.mints(); n != 4 {
		t.Errorf("minted %d tokens, want 4: the first and one per revocation", n)
	}
}
