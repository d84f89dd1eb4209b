package proxy

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// errMint is wrapped, with ErrCredentialUnavailable, when a token
// cannot be minted: the key is unreadable or the API refused. Its
// messages name the App, the installation and the API's status, never a
// key, a JWT or a token.
var errMint = errors.New("cannot mint a token")

// The lifetimes of what the proxy mints and keeps.
const (
	// appJWTLifetime is the App JWT's: GitHub accepts at most 10
	// minutes; iat is set 60 s in the past for clock drift.
	appJWTLifetime = 9 * time.Minute
	// renewAhead is how long before its expiry a token is renewed, at
	// most; a token that lives less than twice as long is renewed at
	// half its life.
	renewAhead = 5 * time.Minute
	// mintTimeout bounds one mint, installation lookup included.
	mintTimeout = 30 * time.Second
	// mintWait bounds how long a request waits for a mint in flight;
	// the mint goes on, and its token serves the requests after it.
	mintWait = 10 * time.Second
	// mintRetry is how long a failed mint's error answers the
	// requests of its scope before the API is asked again: a sandbox
	// sending requests as fast as it can, while the API refuses, would
	// otherwise have the proxy call it as fast as it answers, with the
	// App's JWT, against the App's rate limit, which all its
	// installations share.
	mintRetry = 5 * time.Second
	// maxMintResponse bounds an API response the minter reads.
	maxMintResponse = 1 << 20
	// maxMintEntries bounds the tokens kept: a config names a few
	// Connections, and reloads may name others.
	maxMintEntries = 256
)

// minter mints GitHub App installation tokens and keeps them in a
// tokenCache, one per scope: each is renewed on the first request close
// to its expiry, or after an upstream refused it with a 401 (revoked, or
// expired early). One token serves every host of a Connection that asks
// for the same scope. The cache runs one mint at a time per scope, which
// the requests that need a token meanwhile share, error included, each
// waiting at most the cache's flightWait (mintWait); a failed mint's error
// answers its scope's requests for the cache's retry (mintRetry) without
// asking the API again, since all the App's installations share its rate
// limit.
type minter struct {
	client *http.Client
	cache  *tokenCache
	// count records a mint's result for the metrics.
	count func(connection, result string)

	mu sync.Mutex
	// installations holds the installation looked up from a scope's
	// owner, by cache key.
	installations map[string]int64
}

// injectorFor returns how st's requests get their credential: minted
// for a GitHub App injection, read from the mounted Secret otherwise.
func (s *Server) injectorFor(st *state) injector {
	return func(hp *policy.HostPolicy, h http.Header) (Injected, error) {
		if hp.Inject.GitHubApp != nil {
			return s.mint.inject(hp, h, nil, st.secrets.ReadRaw)
		}
		if hp.Inject.AWSSigV4 != nil {
			return Injected{}, nil // signed once the request is whole: signAWSRequest
		}
		if renewable(hp) {
			return s.oauth.inject(hp, h, nil, st.secrets.Lookup, st.secrets.ReadRaw)
		}
		return Inject(hp, h, st.secrets.Lookup)
	}
}

// renewInjection replaces the minted token in h, which an upstream just
// refused with a 401, with a renewed one, and returns what the response
// must then be scrubbed of. The cache renews a refused token once, however
// many requests it refused, and passes errRenewedRecently for a token it
// replaced less than staleGap ago.
func (s *Server) renewInjection(st *state, hp *policy.HostPolicy, h http.Header) (Injected, error) {
	if hp.Inject.GitHubApp != nil {
		stale := appToken(h)
		return s.mint.inject(hp, h, &stale, st.secrets.ReadRaw)
	}
	stale, _ := bearerToken(h)
	return s.oauth.inject(hp, h, &stale, st.secrets.Lookup, st.secrets.ReadRaw)
}

// appToken returns the installation token an App injection set on h:
// Authorization: token, or Basic x-access-token.
func appToken(h http.Header) Secret {
	v := h.Get("Authorization")
	if t, ok := strings.CutPrefix(v, "token "); ok {
		return Secret{v: t}
	}
	if b, ok := strings.CutPrefix(v, "Basic "); ok {
		if raw, err := base64.StdEncoding.DecodeString(b); err == nil {
			if t, ok := strings.CutPrefix(string(raw), "x-access-token:"); ok {
				return Secret{v: t}
			}
		}
	}
	return Secret{}
}

// injector sets a host's credential on an outbound request's header and
// returns what the response must be scrubbed of; errors wrap
// ErrCredentialUnavailable.
type injector func(hp *policy.HostPolicy, h http.Header) (Injected, error)

// secretInjector injects the Secret-templated forms only, through lookup.
func secretInjector(lookup SecretLookup) injector {
	return func(hp *policy.HostPolicy, h http.Header) (Injected, error) { return Inject(hp, h, lookup) }
}

func newMinter(client *http.Client, count func(connection, result string)) *minter {
	c := newTokenCache()
	c.flightWait, c.retry, c.useExpired = mintWait, mintRetry, true
	return &minter{client: client, cache: c, count: count, installations: map[string]int64{}}
}

// rawLookup reads a Secret key's bytes as they are: a PEM key spans
// lines, which a header value may not.
type rawLookup func(secret, key string) ([]byte, error)

// inject sets the minted token of hp's GitHub App injection on header,
// as its scheme says, and returns what the response must be scrubbed of.
// stale, when set, is a token an upstream refused, to be replaced.
// Errors wrap ErrCredentialUnavailable, but for errRenewedRecently; the
// header is then not to be sent.
func (m *minter) inject(hp *policy.HostPolicy, header http.Header, stale *Secret, read rawLookup) (Injected, error) {
	g := hp.Inject.GitHubApp
	tok, err := m.get(hp.Connection, hp.Inject.Secret, g, read, stale)
	if err != nil {
		return Injected{}, err
	}
	var inj Injected
	inj.addEncoded(tok.v)
	switch g.Scheme {
	case config.GitHubSchemeBasic:
		enc := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tok.Reveal()))
		setHeader(header, "Authorization", "Basic "+enc)
		inj.add(enc)
	default:
		setHeader(header, "Authorization", "token "+tok.Reveal())
	}
	return inj, nil
}

// token returns the scope's token, minting one when there is none or it
// is due for renewal.
func (m *minter) token(connection, secret string, g *config.GitHubAppInject, read rawLookup) (Secret, error) {
	return m.get(connection, secret, g, read, nil)
}

// get returns the scope's token, minting one when there is none, it is
// due for renewal, or it is stale (refused by an upstream). A renewal that
// fails, or takes longer than the wait, while the token still has a
// second to live returns the token: a later request tries again, or
// takes the mint's token.
func (m *minter) get(connection, secret string, g *config.GitHubAppInject, read rawLookup, stale *Secret) (Secret, error) {
	key := appCacheKey(secret, g)
	tok, _, err := m.cache.get(key, stale, func(ctx context.Context) (Secret, time.Time, error) {
		tok, expires, err := m.mint(ctx, key, secret, g, read)
		result := "ok"
		if err != nil {
			result = "error"
		}
		m.count(connection, result) // before the waiters go on: they may read the metrics
		return tok, expires, err
	})
	switch {
	case err == nil, errors.Is(err, errRenewedRecently), errors.Is(err, ErrCredentialUnavailable):
		return tok, err
	case errors.Is(err, errFlightWait):
		return Secret{}, fmt.Errorf("%w: %w: GitHub App %d: no token after waiting %s for the mint in progress", ErrCredentialUnavailable, errMint, g.AppID, m.cache.flightWait)
	}
	return Secret{}, fmt.Errorf("%w: %w: GitHub App %d: %w", ErrCredentialUnavailable, errMint, g.AppID, err)
}

// appCacheKey names a scope: the Secret, the App, the installation and
// what the token is narrowed to. The scheme is not part of it:
// api.github.com and github.com share one token.
func appCacheKey(secret string, g *config.GitHubAppInject) string {
	scope := *g
	scope.Scheme = ""
	b, _ := json.Marshal(struct {
		Secret string
		Scope  config.GitHubAppInject
	}{secret, scope})
	return "githubApp\x00" + string(b)
}

// installation returns the installation looked up for key, or 0.
func (m *minter) installation(key string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.installations[key]
}

// setInstallation keeps (or, with 0, forgets) key's installation.
func (m *minter) setInstallation(key string, id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id == 0 {
		delete(m.installations, key)
		return
	}
	if len(m.installations) >= maxMintEntries {
		clear(m.installations)
	}
	m.installations[key] = id
}

// mint signs an App JWT with the key read now (so a rotated key is used
// from the next mint on), finds the installation if the config names an
// owner, and asks for a token narrowed to the config's scope.
func (m *minter) mint(ctx context.Context, key, secret string, g *config.GitHubAppInject, read rawLookup) (Secret, time.Time, error) {
	pemBytes, err := read(secret, g.PrivateKeyKey)
	if err != nil {
		return Secret{}, time.Time{}, err
	}
	rk, err := parseAppKey(pemBytes)
	if err != nil {
		return Secret{}, time.Time{}, fmt.Errorf("%w: %w: key %q of secret %q: %w", ErrCredentialUnavailable, errMint, g.PrivateKeyKey, secret, err)
	}
	jwt, err := signAppJWT(rk, g.AppID, m.cache.now())
	if err != nil {
		return Secret{}, time.Time{}, fmt.Errorf("%w: %w: signing the JWT of GitHub App %d: %w", ErrCredentialUnavailable, errMint, g.AppID, err)
	}
	id := g.InstallationID
	if id == 0 {
		if id = m.installation(key); id == 0 {
			if id, err = m.findInstallation(ctx, g, jwt); err != nil {
				return Secret{}, time.Time{}, err
			}
			m.setInstallation(key, id)
		}
	}
	req := struct {
		Repositories []string          `json:"repositories,omitempty"`
		Permissions  map[string]string `json:"permissions,omitempty"`
	}{g.Repositories, g.Permissions}
	body, _ := json.Marshal(req)
	path := "/app/installations/" + strconv.FormatInt(id, 10) + "/access_tokens"
	status, resp, err := m.call(ctx, g, jwt, http.MethodPost, path, body)
	if err != nil {
		return Secret{}, time.Time{}, fmt.Errorf("%w: %w: GitHub App %d, installation %d: POST %s: %w", ErrCredentialUnavailable, errMint, g.AppID, id, path, err)
	}
	if status != http.StatusCreated {
		if status == http.StatusNotFound && g.InstallationID == 0 {
			m.setInstallation(key, 0) // the App may have been installed anew
		}
		return Secret{}, time.Time{}, fmt.Errorf("%w: %w: GitHub App %d, installation %d: POST %s: %d %s", ErrCredentialUnavailable, errMint, g.AppID, id, path, status, http.StatusText(status))
	}
	tok, expires, err := parseTokenResponse(resp)
	if err != nil {
		return Secret{}, time.Time{}, fmt.Errorf("%w: %w: GitHub App %d, installation %d: %w", ErrCredentialUnavailable, errMint, g.AppID, id, err)
	}
	return tok, expires, nil
}

// findInstallation looks the installation up from the config's owner:
// a repository's, else an organisation's, else a user's.
func (m *minter) findInstallation(ctx context.Context, g *config.GitHubAppInject, jwt string) (int64, error) {
	var paths []string
	if owner, repo, ok := strings.Cut(g.Owner, "/"); ok {
		paths = []string{"/repos/" + owner + "/" + repo + "/installation"}
	} else {
		paths = []string{"/orgs/" + owner + "/installation", "/users/" + owner + "/installation"}
	}
	var last string
	for _, p := range paths {
		status, resp, err := m.call(ctx, g, jwt, http.MethodGet, p, nil)
		if err != nil {
			return 0, fmt.Errorf("%w: %w: GitHub App %d: GET %s: %w", ErrCredentialUnavailable, errMint, g.AppID, p, err)
		}
		if status == http.StatusOK {
			id, err := parseInstallationResponse(resp)
			if err != nil {
				return 0, fmt.Errorf("%w: %w: GitHub App %d: GET %s: %w", ErrCredentialUnavailable, errMint, g.AppID, p, err)
			}
			return id, nil
		}
		last = fmt.Sprintf("GET %s: %d %s", p, status, http.StatusText(status))
		if status != http.StatusNotFound {
			break
		}
	}
	return 0, fmt.Errorf("%w: %w: GitHub App %d has no installation for %s: %s", ErrCredentialUnavailable, errMint, g.AppID, g.Owner, last)
}

// call sends one API request with the App JWT and returns the status and
// up to maxMintResponse bytes of the body. Errors never quote the body.
func (m *minter) call(ctx context.Context, g *config.GitHubAppInject, jwt, method, path string, body []byte) (int, []byte, error) {
	base := "https://" + g.API
	if g.API != config.GitHubAPIHost {
		base += "/api/v3" // GitHub Enterprise Server
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("Authorization", "Bearer "+jwt)
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "keyhole-proxy")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMintResponse+1))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the response: %w", err)
	}
	if len(b) > maxMintResponse {
		return 0, nil, fmt.Errorf("the response is larger than %d bytes", maxMintResponse)
	}
	return resp.StatusCode, b, nil
}

// parseAppKey reads an App's private key: PEM, an RSA key in PKCS #1 (as
// GitHub hands them out) or PKCS #8. Errors never quote the key.
func parseAppKey(b []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("not a PEM private key")
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("not a valid PKCS #1 RSA private key")
		}
		return k, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("not a valid PKCS #8 private key")
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("not an RSA key: GitHub Apps sign with RS256")
		}
		return rk, nil
	}
	return nil, fmt.Errorf("a PEM block of type %q, want RSA PRIVATE KEY or PRIVATE KEY", clipType(block.Type))
}

func clipType(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// signAppJWT returns the App's JWT: RS256 over {iat, exp, iss}, issued
// 60 s in the past (GitHub's advice for clock drift) and expiring
// appJWTLifetime after now, within GitHub's 10 minutes.
func signAppJWT(key *rsa.PrivateKey, appID int64, now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	claims := fmt.Sprintf(`{"iat":%d,"exp":%d,"iss":"%d"}`, now.Add(-60*time.Second).Unix(), now.Add(appJWTLifetime).Unix(), appID)
	signed := head + "." + enc.EncodeToString([]byte(claims))
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

// parseTokenResponse reads POST /app/installations/{id}/access_tokens's
// answer: the token, which must be usable in a header, and its expiry.
// Errors never quote the body.
func parseTokenResponse(b []byte) (Secret, time.Time, error) {
	var r struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Secret{}, time.Time{}, errors.New("the token response is not the JSON object GitHub sends")
	}
	v, err := config.HeaderValue([]byte(r.Token))
	if err != nil || len(v) != len(r.Token) || strings.ContainsAny(r.Token, " \t") {
		return Secret{}, time.Time{}, errors.New("the token response holds no token usable in a header")
	}
	if r.ExpiresAt.IsZero() {
		return Secret{}, time.Time{}, errors.New("the token response has no expires_at")
	}
	return Secret{v: r.Token}, r.ExpiresAt, nil
}

// parseInstallationResponse reads GET .../installation's answer: the
// installation's id.
func parseInstallationResponse(b []byte) (int64, error) {
	var r struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, errors.New("the installation response is not the JSON object GitHub sends")
	}
	if r.ID <= 0 {
		return 0, errors.New("the installation response has no id")
	}
	return r.ID, nil
}

// ReadRaw reads secret/key's bytes as they are, up to the size Lookup
// allows: what a minter needs of a key that is not itself a header value,
// such as a PEM private key. It is read anew on each call: the minter
// reads a key only to mint, minutes apart. Errors wrap
// ErrCredentialUnavailable and name the key, never its content.
func (d SecretDir) ReadRaw(secret, key string) ([]byte, error) {
	path, ok := d.paths.path(d.Dir, secret, key)
	if !ok {
		return nil, fmt.Errorf("%w: invalid secret or key name", ErrCredentialUnavailable)
	}
	var f *os.File
	var err error
	for range lookupAttempts { // as Lookup: a rotation may swap ..data under us
		if f, err = os.Open(path); err == nil {
			break
		}
	}
	if err != nil {
		return nil, notMounted(secret, key)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: key %q of secret %q cannot be read", ErrCredentialUnavailable, key, secret)
	}
	if len(b) > maxSecretSize {
		return nil, fmt.Errorf("%w: key %q of secret %q is larger than %d bytes", ErrCredentialUnavailable, key, secret, maxSecretSize)
	}
	return b, nil
}
