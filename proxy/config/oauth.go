package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// OAuth2Inject injects an OAuth 2.0 access token the proxy obtains
// itself from an authorization server's token endpoint (RFC 6749): with
// the client credentials grant (§4.4), or the refresh token grant (§6)
// from a refresh token held in the injection's Secret. The proxy caches
// the token, renews it before it expires, and sets Authorization: Bearer
// on the request; the client secret, the refresh token and the access
// token never reach the sandbox.
type OAuth2Inject struct {
	// TokenURL is the token endpoint: https, its host one the config
	// lists (injected or passed through), so that the proxy's own
	// address rules govern the dial.
	TokenURL string `json:"tokenUrl"`
	// Grant is OAuth2GrantClientCredentials or OAuth2GrantRefreshToken.
	Grant string `json:"grant"`
	// ClientIDKey is the Secret key of the client id.
	ClientIDKey string `json:"clientIdKey"`
	// ClientSecretKey is the Secret key of the client secret; a refresh
	// token grant of a public client has none.
	ClientSecretKey string `json:"clientSecretKey,omitempty"`
	// RefreshTokenKey is the Secret key of the refresh token, for the
	// refresh token grant only.
	RefreshTokenKey string `json:"refreshTokenKey,omitempty"`
	// Scopes are asked for, sorted, each once; none leaves the
	// authorization server's default.
	Scopes []string `json:"scopes,omitempty"`
	// Audience and Resource, when set, are sent as the audience
	// parameter (as Auth0 and others read it) and the resource parameter
	// (RFC 8707).
	Audience string `json:"audience,omitempty"`
	Resource string `json:"resource,omitempty"`
}

// The grants an OAuth2Inject uses.
const (
	OAuth2GrantClientCredentials = "clientCredentials"
	OAuth2GrantRefreshToken      = "refreshToken"
)

// OAuth2Grants lists the grants, in the order documents give them.
func OAuth2Grants() []string {
	return []string{OAuth2GrantClientCredentials, OAuth2GrantRefreshToken}
}

// GoogleInject injects a Google access token, or an ID token, the proxy
// obtains itself with a service account's key held in the injection's
// Secret: it signs a JWT grant (RFC 7523, RS256) with the key and posts
// it to the token endpoint. The key and the tokens never reach the
// sandbox.
type GoogleInject struct {
	// Identity is IdentityWorkload when the proxy asks its own pod's
	// metadata server (GKE workload identity) for the token: the
	// injection then names no Secret, KeyKey and TokenURL are empty.
	Identity string `json:"identity,omitempty"`
	// KeyKey is the Secret key holding the service account's JSON key,
	// as the console and gcloud hand it out.
	KeyKey string `json:"keyKey,omitempty"`
	// TokenURL is the token endpoint, which the key's token_uri must
	// name too: https, its host one the config lists.
	TokenURL string `json:"tokenUrl,omitempty"`
	// Scopes are the access token's scopes, sorted, each once. Exactly
	// one of Scopes and Audience is set.
	Scopes []string `json:"scopes,omitempty"`
	// Audience, when set, asks for an ID token for this audience
	// instead of an access token (the target_audience claim).
	Audience string `json:"audience,omitempty"`
}

// GoogleTokenURL is Google's token endpoint, the token_uri of the keys
// it hands out.
const GoogleTokenURL = "https://oauth2.googleapis.com/token"

// CheckTokenURL reports whether s is a token endpoint the proxy posts
// to: an absolute https URL with a host on port 443, no user
// information, no fragment and no query. It returns the host as the
// config lists hosts.
func CheckTokenURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil || s == "":
		return "", fmt.Errorf("%q is not a URL", clip(s))
	case u.Scheme != "https":
		return "", fmt.Errorf("%q is not an https URL: the proxy sends the client's secret to it", clip(s))
	case u.User != nil:
		return "", fmt.Errorf("%q holds user information; the client's credentials come from the Secret", clip(s))
	case u.Fragment != "" || u.RawQuery != "" || u.Opaque != "":
		return "", fmt.Errorf("%q has a query or fragment; a token endpoint is a plain https URL", clip(s))
	}
	host := strings.ToLower(u.Host)
	if h, port, err := net.SplitHostPort(host); err == nil {
		if port != "443" {
			return "", fmt.Errorf("%q names port %s; the proxy reaches hosts on 443 only", clip(s), clip(port))
		}
		host = h
	}
	if err := CheckHostName(host); err != nil {
		return "", fmt.Errorf("%q: %w", clip(s), err)
	}
	return host, nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// checkScope reports whether s is an OAuth scope token (RFC 6749 §3.3):
// printable ASCII but space, '"' and '\'.
func checkScope(s string) error {
	if s == "" {
		return fmt.Errorf("a scope is empty")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return fmt.Errorf("scope %q holds a character a scope may not (RFC 6749 §3.3)", clip(s))
		}
	}
	return nil
}

// checkParam reports whether an audience or resource is printable
// text, sent as a form parameter.
func checkParam(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return fmt.Errorf("%q holds a control character", clip(s))
		}
	}
	return nil
}

func (v *validator) scopes(at string, scopes []string) {
	if !slices.IsSorted(scopes) || len(slices.Compact(slices.Clone(scopes))) != len(scopes) {
		v.addf(at, "is not sorted with each scope once")
	}
	for i, s := range scopes {
		if err := checkScope(s); err != nil {
			v.addf(fmt.Sprintf("%s[%d]", at, i), "%v", err)
		}
	}
}

func (v *validator) oauth2(at string, o *OAuth2Inject) {
	if _, err := CheckTokenURL(o.TokenURL); err != nil {
		v.addf(at+".tokenUrl", "%v", err)
	}
	v.key(at+".clientIdKey", o.ClientIDKey)
	switch o.Grant {
	case OAuth2GrantClientCredentials:
		v.key(at+".clientSecretKey", o.ClientSecretKey)
		if o.RefreshTokenKey != "" {
			v.addf(at+".refreshTokenKey", "is read by the refreshToken grant only")
		}
	case OAuth2GrantRefreshToken:
		if o.ClientSecretKey != "" {
			v.key(at+".clientSecretKey", o.ClientSecretKey)
		}
		v.key(at+".refreshTokenKey", o.RefreshTokenKey)
	default:
		v.addf(at+".grant", "is %q, want one of %s", o.Grant, strings.Join(OAuth2Grants(), ", "))
	}
	v.scopes(at+".scopes", o.Scopes)
	if err := checkParam(o.Audience); err != nil {
		v.addf(at+".audience", "%v", err)
	}
	if err := checkParam(o.Resource); err != nil {
		v.addf(at+".resource", "%v", err)
	}
}

func (v *validator) google(at string, g *GoogleInject) {
	switch g.Identity {
	case IdentityWorkload:
		if g.KeyKey != "" || g.TokenURL != "" {
			v.addf(at, "names a key or a token endpoint, but identity %q asks the metadata server", IdentityWorkload)
		}
	case "":
		v.key(at+".keyKey", g.KeyKey)
		if _, err := CheckTokenURL(g.TokenURL); err != nil {
			v.addf(at+".tokenUrl", "%v", err)
		}
	default:
		v.addf(at+".identity", "is %q, want %q or none", clipName(g.Identity), IdentityWorkload)
	}
	v.scopes(at+".scopes", g.Scopes)
	if err := checkParam(g.Audience); err != nil {
		v.addf(at+".audience", "%v", err)
	}
	switch {
	case len(g.Scopes) == 0 && g.Audience == "":
		v.addf(at, "sets neither scopes nor audience; one says whether an access token or an ID token is minted")
	case len(g.Scopes) > 0 && g.Audience != "":
		v.addf(at, "sets both scopes and audience; one says whether an access token or an ID token is minted")
	}
}

// TokenHost returns the host of the token endpoint an OAuth 2.0 or
// Google injection posts to, "" for other injections.
func (in *Inject) TokenHost() string {
	var u string
	switch {
	case in.OAuth2 != nil:
		u = in.OAuth2.TokenURL
	case in.Google != nil:
		u = in.Google.TokenURL
	default:
		return ""
	}
	host, _ := CheckTokenURL(u)
	return host
}

// tokenHosts checks that each token endpoint the config's injections
// post to is on a host the config lists, whose address rules then
// govern the proxy's dial.
func (v *validator) tokenHosts(c *Config, listed map[string]string) {
	for i, h := range c.Hosts {
		at := fmt.Sprintf("hosts[%d].inject.oauth2.tokenUrl", i)
		if h.Inject.Google != nil {
			at = fmt.Sprintf("hosts[%d].inject.googleServiceAccount.tokenUrl", i)
		}
		if host := h.Inject.TokenHost(); host != "" && listed[host] == "" {
			v.addf(at, "names host %s, which the config neither injects nor passes through", host)
		}
	}
}

// Scope describes what an OAuth 2.0 token is asked for. It names no
// secret.
func (o *OAuth2Inject) Scope() string {
	return describeScope(o.Scopes, "audience", o.Audience, o.Resource)
}

// Scope describes what a Google token is minted for. It names no
// secret.
func (g *GoogleInject) Scope() string {
	if g.Audience != "" {
		return "an ID token for audience " + g.Audience
	}
	return describeScope(g.Scopes, "", "", "")
}

func describeScope(scopes []string, audWord, aud, resource string) string {
	s := "scopes " + strings.Join(scopes, " ")
	if len(scopes) == 0 {
		s = "the authorization server's default scopes"
	}
	if aud != "" {
		s += ", " + audWord + " " + aud
	}
	if resource != "" {
		s += ", resource " + resource
	}
	return s
}

// SameClient reports whether o and p obtain tokens from the same
// endpoint with the same grant and Secret keys: their tokens then differ
// only in what they are asked for.
func (o *OAuth2Inject) SameClient(p *OAuth2Inject) bool {
	return o.TokenURL == p.TokenURL && o.Grant == p.Grant && o.ClientIDKey == p.ClientIDKey &&
		o.ClientSecretKey == p.ClientSecretKey && o.RefreshTokenKey == p.RefreshTokenKey
}

// Covers reports whether every token p asks for o could ask for too:
// p's scopes are among o's, with the same audience and resource. No
// scopes is the server's default, which only no scopes covers.
func (o *OAuth2Inject) Covers(p *OAuth2Inject) bool {
	return o.Audience == p.Audience && o.Resource == p.Resource && coversScopes(o.Scopes, p.Scopes)
}

// SameAccount reports whether g and o mint with the same key from the
// same endpoint.
func (g *GoogleInject) SameAccount(o *GoogleInject) bool {
	return g.Identity == o.Identity && g.KeyKey == o.KeyKey && g.TokenURL == o.TokenURL
}

// Covers reports whether every token o mints g could mint too: the same
// audience, or o's scopes among g's.
func (g *GoogleInject) Covers(o *GoogleInject) bool {
	return g.Audience == o.Audience && coversScopes(g.Scopes, o.Scopes)
}

func coversScopes(have, want []string) bool {
	if len(have) == 0 || len(want) == 0 {
		return len(have) == len(want)
	}
	return containsAll(have, want)
}
