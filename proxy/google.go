package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/jwt"

	"keyhole.dev/keyhole/proxy/config"
)

// serviceAccountKey is what the proxy reads of a Google service
// account's JSON key.
type serviceAccountKey struct {
	email    string
	keyID    string
	pem      Secret // the private key, PEM
	tokenURI string
}

// parseServiceAccountKey reads a service account's JSON key as the
// console and gcloud hand it out: type service_account, client_email,
// private_key (an RSA key, PEM, PKCS #8 or PKCS #1), and optionally
// private_key_id and token_uri. Errors never quote the key.
func parseServiceAccountKey(b []byte) (serviceAccountKey, error) {
	var k struct {
		Type         string `json:"type"`
		ClientEmail  string `json:"client_email"`
		PrivateKey   string `json:"private_key"`
		PrivateKeyID string `json:"private_key_id"`
		TokenURI     string `json:"token_uri"`
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return serviceAccountKey{}, errors.New("the service account key is not a JSON object")
	}
	if k.Type != "service_account" {
		return serviceAccountKey{}, errors.New(`the service account key's type is not "service_account"`)
	}
	if a, err := mail.ParseAddress(k.ClientEmail); err != nil || a.Address != k.ClientEmail || a.Name != "" {
		return serviceAccountKey{}, errors.New("the service account key's client_email is not an address")
	}
	if _, err := parseAppKey([]byte(k.PrivateKey)); err != nil {
		return serviceAccountKey{}, fmt.Errorf("the service account key's private_key: %w", err)
	}
	for _, c := range k.PrivateKeyID {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') || len(k.PrivateKeyID) > 128 {
			return serviceAccountKey{}, errors.New("the service account key's private_key_id is not a key id")
		}
	}
	if k.TokenURI != "" {
		if _, err := config.CheckTokenURL(k.TokenURI); err != nil {
			return serviceAccountKey{}, errors.New("the service account key's token_uri is not an https URL")
		}
	}
	return serviceAccountKey{email: k.ClientEmail, keyID: k.PrivateKeyID, pem: Secret{v: k.PrivateKey}, tokenURI: k.TokenURI}, nil
}

func googleCacheKey(secret string, g *config.GoogleInject) string {
	return strings.Join([]string{"google", g.Identity, secret, g.KeyKey, g.TokenURL, strings.Join(g.Scopes, " "), g.Audience}, "\x00")
}

// exchangeGoogle signs a JWT grant with the service account's key and
// posts it to the token endpoint: for an access token of g's scopes, or
// an ID token for g's audience (target_audience). The key's token_uri,
// when it names one, must be g's: a key cannot send the proxy's signed
// grant to a host the config does not list.
func (m *oauthMinter) exchangeGoogle(ctx context.Context, secret string, g *config.GoogleInject, read rawLookup) (Secret, time.Time, error) {
	raw, err := read(secret, g.KeyKey)
	if err != nil {
		return Secret{}, time.Time{}, err
	}
	k, err := parseServiceAccountKey(raw)
	if err != nil {
		return Secret{}, time.Time{}, fmt.Errorf("key %q of secret %q: %w", g.KeyKey, secret, err)
	}
	if k.tokenURI != "" && k.tokenURI != g.TokenURL {
		return Secret{}, time.Time{}, fmt.Errorf("key %q of secret %q names token_uri %s, not the Connection's %s", g.KeyKey, secret, policyClipURL(k.tokenURI), g.TokenURL)
	}
	c := jwt.Config{
		Email: k.email, PrivateKey: []byte(k.pem.Reveal()), PrivateKeyID: k.keyID,
		Scopes: g.Scopes, TokenURL: g.TokenURL,
	}
	if g.Audience != "" {
		c.PrivateClaims = map[string]any{"target_audience": g.Audience}
		c.UseIDToken = true
	}
	t, err := c.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, m.client)).Token()
	if err != nil {
		return Secret{}, time.Time{}, tokenError(g.TokenURL, err)
	}
	tok, err := checkAccessToken(&oauth2.Token{AccessToken: t.AccessToken, TokenType: bearerOrEmpty(t.TokenType, g.Audience != "")})
	if err != nil {
		return Secret{}, time.Time{}, err
	}
	return tok, t.Expiry, nil
}

// bearerOrEmpty is the token type to check: an ID token is sent as a
// Bearer token whatever the access token beside it was typed.
func bearerOrEmpty(tt string, idToken bool) string {
	if idToken {
		return ""
	}
	return tt
}

func policyClipURL(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
