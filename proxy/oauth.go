package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// oauthMinter obtains the tokens of OAuth 2.0 and Google service account
// injections from their token endpoints, keeps them in one tokenCache,
// and sets them as Authorization: Bearer. Each exchange reads the
// Secret's keys anew, so a rotated client secret, refresh token or key is
// used from the next exchange on.
type oauthMinter struct {
	client *http.Client
	cache  *tokenCache
	// count records an exchange's result for the metrics.
	count func(connection, result string)
	// refresh keeps the refresh tokens servers rotated.
	refresh *refreshStore
	// warn logs what goes wrong beside a good token.
	warn func(msg string, args ...any)
	// identity obtains the proxy's own credentials, for the injections
	// of identity workload; a test swaps it. Their tokens are kept in
	// workload, which holds a failure for mintRetry: the metadata
	// server and STS rate-limit a pod.
	identity atomic.Pointer[workloadIdentity]
	workload *tokenCache
}

func newOAuthMinter(client *http.Client, count func(connection, result string), refresh *refreshStore, warn func(string, ...any)) *oauthMinter {
	m := &oauthMinter{client: client, cache: newTokenCache(), workload: newTokenCache(), count: count, refresh: refresh, warn: warn}
	m.workload.retry = mintRetry
	m.identity.Store(newWorkloadIdentity())
	return m
}

// renewable reports whether hp's credential is one an upstream's 401
// renews: a token the proxy obtains from a token endpoint or mints.
func renewable(hp *policy.HostPolicy) bool {
	return hp != nil && (hp.Inject.OAuth2 != nil || hp.Inject.Google != nil || hp.Inject.GitHubApp != nil)
}

// inject sets hp's token on header as Authorization: Bearer and returns
// what the response must be scrubbed of. stale, when set, is a token an
// upstream refused, to be replaced. Errors wrap ErrCredentialUnavailable
// and errMint; the header is then not to be sent.
func (m *oauthMinter) inject(hp *policy.HostPolicy, header http.Header, stale *Secret, lookup SecretLookup, read rawLookup) (Injected, error) {
	var key string
	var ex exchange
	switch {
	case hp.Inject.OAuth2 != nil:
		o := hp.Inject.OAuth2
		key = oauthCacheKey(hp.Inject.Secret, o)
		ex = func(ctx context.Context) (Secret, time.Time, error) {
			return m.exchangeOAuth2(ctx, hp.Inject.Secret, o, lookup)
		}
	case hp.Inject.Google != nil:
		g := hp.Inject.Google
		key = googleCacheKey(hp.Inject.Secret, g)
		ex = func(ctx context.Context) (Secret, time.Time, error) {
			return m.exchangeGoogle(ctx, hp.Inject.Secret, g, read)
		}
		if g.Identity == config.IdentityWorkload {
			ex = m.googleWorkload(g)
		}
	default:
		return Injected{}, fmt.Errorf("%w: %w: not a token endpoint injection", ErrCredentialUnavailable, errMint)
	}
	cache := m.cache
	if hp.Inject.Workload() {
		cache = m.workload
	}
	tok, fresh, err := cache.get(key, stale, ex)
	if errors.Is(err, errRenewedRecently) {
		return Injected{}, err // the upstream's 401 goes back as it came
	}
	if err != nil {
		m.count(hp.Connection, "error")
		return Injected{}, fmt.Errorf("%w: %w: connection %s: %w", ErrCredentialUnavailable, errMint, hp.Connection, err)
	}
	if fresh {
		m.count(hp.Connection, "ok")
	}
	var inj Injected
	inj.addEncoded(tok.v)
	setHeader(header, "Authorization", "Bearer "+tok.Reveal())
	return inj, nil
}

// bearerToken returns the token of an Authorization: Bearer header.
func bearerToken(h http.Header) (Secret, bool) {
	v, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	return Secret{v: v}, ok && v != ""
}

func oauthCacheKey(secret string, o *config.OAuth2Inject) string {
	return strings.Join([]string{"oauth2", secret, o.TokenURL, o.Grant, o.ClientIDKey, o.ClientSecretKey, o.RefreshTokenKey,
		strings.Join(o.Scopes, " "), o.Audience, o.Resource}, "\x00")
}

// exchangeOAuth2 runs o's grant once: client credentials, or the refresh
// token (the one the server last rotated to, when it rotated the one the
// Secret holds now). A new refresh token in the answer is kept.
func (m *oauthMinter) exchangeOAuth2(ctx context.Context, secret string, o *config.OAuth2Inject, lookup SecretLookup) (Secret, time.Time, error) {
	id, err := lookup(secret, o.ClientIDKey)
	if err != nil {
		return Secret{}, time.Time{}, err
	}
	var clientSecret Secret
	if o.ClientSecretKey != "" {
		if clientSecret, err = lookup(secret, o.ClientSecretKey); err != nil {
			return Secret{}, time.Time{}, err
		}
	}
	params := url.Values{}
	if o.Audience != "" {
		params.Set("audience", o.Audience)
	}
	if o.Resource != "" {
		params.Set("resource", o.Resource)
	}
	var seed Secret
	var refreshKey string
	if o.Grant == config.OAuth2GrantRefreshToken {
		if seed, err = lookup(secret, o.RefreshTokenKey); err != nil {
			return Secret{}, time.Time{}, err
		}
		refreshKey = secret + "/" + o.RefreshTokenKey + " " + o.TokenURL
		// clientcredentials lets grant_type be replaced, as it says, for
		// servers that need another: here the refresh token grant,
		// sent with the same client authentication and read the same way.
		params.Set("grant_type", "refresh_token")
		params.Set("refresh_token", m.refresh.current(refreshKey, seed).Reveal())
	}
	cc := clientcredentials.Config{
		ClientID: id.Reveal(), ClientSecret: clientSecret.Reveal(), TokenURL: o.TokenURL,
		Scopes: o.Scopes, EndpointParams: params,
	}
	t, err := cc.Token(context.WithValue(ctx, oauth2.HTTPClient, m.client))
	if err != nil {
		return Secret{}, time.Time{}, tokenError(o.TokenURL, err)
	}
	tok, err := checkAccessToken(t)
	if err != nil {
		return Secret{}, time.Time{}, err
	}
	if refreshKey != "" && t.RefreshToken != "" && t.RefreshToken != params.Get("refresh_token") {
		if err := m.refresh.rotated(refreshKey, seed, Secret{v: t.RefreshToken}); err != nil {
			// The token is good and the rotated refresh token kept in
			// memory; only its copy in the state file is missing.
			m.warn("rotated refresh token not saved", "secret", secret, "key", o.RefreshTokenKey, "error", logText(err.Error()))
		}
	}
	return tok, t.Expiry, nil
}

// checkAccessToken reads what a token endpoint handed out: a Bearer
// token (or one of no stated type) usable in a header.
func checkAccessToken(t *oauth2.Token) (Secret, error) {
	if tt := t.TokenType; tt != "" && !strings.EqualFold(tt, "bearer") {
		return Secret{}, fmt.Errorf("the token endpoint sent a token of type %q, which the proxy does not send", policy.Clip(tt))
	}
	v, err := config.HeaderValue([]byte(t.AccessToken))
	if err != nil || len(v) == 0 || len(v) != len(t.AccessToken) || strings.ContainsAny(t.AccessToken, " \t") {
		return Secret{}, errors.New("the token endpoint sent no token usable in a header")
	}
	return Secret{v: t.AccessToken}, nil
}

// errorCode is an OAuth error code as RFC 6749 §5.2 spells them.
var errorCode = regexp.MustCompile(`^[a-z_]{1,64}$`)

// tokenError says why a token request failed, from the endpoint's status
// and error code, or the network's error: never the library's text,
// which can quote the endpoint's answer.
func tokenError(tokenURL string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		msg := fmt.Sprintf("the token endpoint %s answered %d %s", tokenURL, status, http.StatusText(status))
		if errorCode.MatchString(re.ErrorCode) {
			msg += ", error " + re.ErrorCode
		}
		return errors.New(msg)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		var dr *dialRefusedError
		if errors.As(ue.Err, &dr) {
			return fmt.Errorf("the token endpoint %s: %w", tokenURL, dr)
		}
		if errors.Is(ue.Err, context.DeadlineExceeded) || ue.Timeout() {
			return fmt.Errorf("the token endpoint %s did not answer in time", tokenURL)
		}
		return fmt.Errorf("the token endpoint %s cannot be reached", tokenURL)
	}
	return fmt.Errorf("the token endpoint %s sent an answer that is not a token response", tokenURL)
}

// fingerprint names a secret value in the state file without holding it.
func fingerprint(s Secret) string {
	sum := sha256.Sum256([]byte(s.v))
	return hex.EncodeToString(sum[:])
}
