package compiler

import (
	"cmp"
	"slices"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
)

// A Connection whose credential is kind oauth2 or googleServiceAccount
// has the proxy obtain tokens from a token endpoint with what the Secret
// holds (a client's credentials or refresh token, a service account's
// key) and inject those: the Secret stays in the proxy. This file reads
// the two credential blocks, checks them and builds the proxy's
// injections.

// The credential kinds whose tokens come from a token endpoint.
const (
	CredentialKindOAuth2 = "oauth2"
	CredentialKindGoogle = "googleServiceAccount"
)

// The Secret keys the token endpoint credentials read when their fields
// do not name others.
const (
	DefaultOAuth2ClientIDKey     = "client-id"
	DefaultOAuth2ClientSecretKey = "client-secret"
	DefaultOAuth2RefreshTokenKey = "refresh-token"
	DefaultGoogleKeyKey          = "key.json"
)

const (
	codeOAuth2Invalid = "OAuth2CredentialInvalid"
	codeGoogleInvalid = "GoogleServiceAccountCredentialInvalid"
)

// oauth2Wire is an oauth2 credential's token endpoint and grant.
type oauth2Wire struct {
	TokenURL        string   `yaml:"tokenUrl"`
	Grant           string   `yaml:"grant"`
	ClientIDKey     string   `yaml:"clientIdKey"`
	ClientSecretKey string   `yaml:"clientSecretKey"`
	RefreshTokenKey string   `yaml:"refreshTokenKey"`
	Scopes          []string `yaml:"scopes"`
	Audience        string   `yaml:"audience"`
	Resource        string   `yaml:"resource"`
}

// googleWire is a googleServiceAccount credential's key and what it
// mints.
type googleWire struct {
	KeyKey   string   `yaml:"keyKey"`
	TokenURL string   `yaml:"tokenUrl"`
	Scopes   []string `yaml:"scopes"`
	Audience string   `yaml:"audience"`
	// Identity is config.IdentityWorkload for the proxy's own identity
	// (workload.go); ServiceAccount is then GKE's Google service account,
	// if named.
	Identity       string `yaml:"identity"`
	ServiceAccount string `yaml:"serviceAccount"`
}

// inject is the proxy's injection, with every default filled in.
func (o *oauth2Wire) inject() *config.OAuth2Inject {
	in := &config.OAuth2Inject{
		TokenURL: o.TokenURL, Grant: cmp.Or(o.Grant, config.OAuth2GrantClientCredentials),
		ClientIDKey: cmp.Or(o.ClientIDKey, DefaultOAuth2ClientIDKey), ClientSecretKey: o.ClientSecretKey,
		Scopes: sortedSet(o.Scopes), Audience: o.Audience, Resource: o.Resource,
	}
	if in.Grant == config.OAuth2GrantRefreshToken {
		in.RefreshTokenKey = cmp.Or(o.RefreshTokenKey, DefaultOAuth2RefreshTokenKey)
	} else {
		in.ClientSecretKey = cmp.Or(o.ClientSecretKey, DefaultOAuth2ClientSecretKey)
	}
	return in
}

// inject is the proxy's injection, with every default filled in.
func (g *googleWire) inject() *config.GoogleInject {
	return &config.GoogleInject{
		KeyKey: cmp.Or(g.KeyKey, DefaultGoogleKeyKey), TokenURL: cmp.Or(g.TokenURL, config.GoogleTokenURL),
		Scopes: sortedSet(g.Scopes), Audience: g.Audience,
	}
}

func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(s)))
}

// minted reports whether the proxy mints the Connection's credential
// from what its Secret holds, which must then never reach the sandbox.
func (w *connectionWire) minted() bool {
	switch w.Spec.Credential.Kind {
	case CredentialKindGitHubApp, CredentialKindOAuth2, CredentialKindGoogle:
		return true
	}
	return false
}

// tokenHost is the host of the token endpoint an oauth2 or
// googleServiceAccount credential names, "" for other kinds: listed in
// spec.hosts so that the proxy may dial it, not to be injected.
func (w *connectionWire) tokenHost() string {
	cred := &w.Spec.Credential
	var u string
	switch {
	case cred.Kind == CredentialKindOAuth2 && cred.OAuth2 != nil:
		u = cred.OAuth2.TokenURL
	case cred.Kind == CredentialKindGoogle && cred.Google != nil && cred.Google.Identity != config.IdentityWorkload:
		u = cmp.Or(cred.Google.TokenURL, config.GoogleTokenURL)
	default:
		return ""
	}
	host, _ := config.CheckTokenURL(u)
	return host
}

// tokenInject returns the proxy's injection of an oauth2 or
// googleServiceAccount Connection whose block the proxy can use, nil
// otherwise (checkTokenCredentials says why).
func (w *connectionWire) tokenInject() *config.Inject {
	cred := &w.Spec.Credential
	in := &config.Inject{Secret: cred.SecretRef.Name}
	switch {
	case cred.Kind == CredentialKindOAuth2 && cred.OAuth2 != nil:
		in.OAuth2 = cred.OAuth2.inject()
		if _, err := config.CheckTokenURL(in.OAuth2.TokenURL); err != nil {
			return nil
		}
	case cred.Kind == CredentialKindGoogle && cred.Google != nil && cred.Google.Identity == config.IdentityWorkload:
		if (len(cred.Google.Scopes) == 0) == (cred.Google.Audience == "") || cred.SecretRef.Name != "" || cred.Google.KeyKey != "" || cred.Google.TokenURL != "" {
			return nil // checkWorkloadIdentity and checkTokenCredentials say why
		}
		return &config.Inject{Google: &config.GoogleInject{Identity: config.IdentityWorkload, Scopes: sortedSet(cred.Google.Scopes), Audience: cred.Google.Audience}}
	case cred.Kind == CredentialKindGoogle && cred.Google != nil:
		in.Google = cred.Google.inject()
		if _, err := config.CheckTokenURL(in.Google.TokenURL); err != nil || (len(in.Google.Scopes) == 0) == (in.Google.Audience == "") {
			return nil
		}
	default:
		return nil
	}
	tokenURL := ""
	if in.Google != nil {
		tokenURL = in.Google.TokenURL
	}
	if in.OAuth2 != nil {
		tokenURL = in.OAuth2.TokenURL
	}
	if host, _ := config.CheckTokenURL(tokenURL); !slices.Contains(w.Spec.Hosts, host) {
		return nil // the checks report it
	}
	return in
}

// tokenCredentialChecks are the rows of the check table for oauth2 and
// googleServiceAccount credentials.
func tokenCredentialChecks() []Check {
	return []Check{
		{Code: codeOAuth2Invalid, Severity: diag.Error, run: checkTokenCredentials(CredentialKindOAuth2),
			Purpose: "A Connection's credential does not say how the proxy obtains its OAuth 2.0 tokens, or lets the client's credentials reach the sandbox: kind `oauth2` without `oauth2` (or `oauth2` under another kind), a `tokenUrl` that is not an https URL on one of the Connection's `hosts` (the proxy dials it under the Connection's own address rules), a `refreshTokenKey` with the clientCredentials grant, an inject entry that sets `header`, `value` or `basic` (the proxy sets the token itself), an `env` or `files` placement, or an agent.yaml connector naming the Connection.",
			Help:    "Give `oauth2` the token endpoint as `tokenUrl` and list its host in the Connection's `hosts`; drop `header`, `value` and `basic` from the inject entries and the env and files placements; bind the Connection from an AgentRuntime: the sandbox gets a placeholder, never the client's secret or a token."},
		{Code: codeGoogleInvalid, Severity: diag.Error, run: checkTokenCredentials(CredentialKindGoogle),
			Purpose: "A Connection's credential does not say what the proxy mints with a Google service account's key, or lets the key reach the sandbox: kind `googleServiceAccount` without `googleServiceAccount` (or the block under another kind), neither or both of `scopes` (an access token) and `audience` (an ID token), a `tokenUrl` that is not an https URL on one of the Connection's `hosts`, an inject entry that sets `header`, `value` or `basic`, an `env` or `files` placement, or an agent.yaml connector naming the Connection.",
			Help:    "Give `googleServiceAccount` the `scopes` of an access token or the `audience` of an ID token, list the token endpoint's host (oauth2.googleapis.com) in the Connection's `hosts`, and inject the minted token: drop `header`, `value`, `basic`, env and files."},
	}
}

// checkTokenCredentials returns the check of kind's credentials (oauth2
// or googleServiceAccount): it reports one the proxy cannot use, and
// placements that would give the sandbox the Secret.
func checkTokenCredentials(kind string) func(*pass) {
	return func(p *pass) {
		for _, c := range p.connList {
			checkTokenCredential(p, c, kind)
		}
	}
}

func checkTokenCredential(p *pass, c *connection, kind string) {
	{
		w := c.w
		cred := w.Spec.Credential
		at := path{"spec", "credential"}
		for _, k := range []struct {
			kind, field, code, what string
			set                     bool
		}{
			{CredentialKindOAuth2, "oauth2", codeOAuth2Invalid, "the token endpoint's tokenUrl", cred.OAuth2 != nil},
			{CredentialKindGoogle, "googleServiceAccount", codeGoogleInvalid, "the scopes or audience of the token", cred.Google != nil},
		} {
			if k.kind != kind {
				continue
			}
			switch {
			case cred.Kind == k.kind && !k.set:
				p.report(k.code, &c.item, at.with("kind"), false, "kind %s needs %s with %s", k.kind, k.field, k.what)
			case cred.Kind != k.kind && k.set:
				p.report(k.code, &c.item, at.with(k.field), true, "%s is read only with kind %s; this credential is of kind %s", k.field, k.kind, cred.Kind)
			}
		}
		var code, field, tokenURL, holds string
		var keys []string
		switch {
		case kind == CredentialKindOAuth2 && cred.Kind == kind && cred.OAuth2 != nil:
			o := cred.OAuth2.inject()
			code, field, tokenURL, holds = codeOAuth2Invalid, "oauth2", o.TokenURL, "the OAuth 2.0 client's credentials"
			keys = []string{o.ClientIDKey, o.ClientSecretKey, o.RefreshTokenKey}
			if cred.OAuth2.RefreshTokenKey != "" && o.Grant != config.OAuth2GrantRefreshToken {
				p.report(code, &c.item, at.with(field).with("refreshTokenKey"), true, "refreshTokenKey is read by the refreshToken grant only; this credential's grant is %s", o.Grant)
			}
			for i, s := range cred.OAuth2.Scopes {
				if slices.Index(cred.OAuth2.Scopes, s) < i {
					p.report(code, &c.item, at.with(field).with("scopes").with(i), false, "scope %s is listed twice", clip(s))
				}
			}
		case kind == CredentialKindGoogle && cred.Kind == kind && cred.Google != nil:
			g := cred.Google.inject()
			code, field, tokenURL, holds = codeGoogleInvalid, "googleServiceAccount", g.TokenURL, "the service account's key"
			keys = []string{g.KeyKey}
			switch {
			case len(g.Scopes) == 0 && g.Audience == "":
				p.report(code, &c.item, at.with(field), true, "googleServiceAccount names neither scopes nor audience; give the scopes of an access token or the audience of an ID token")
			case len(g.Scopes) > 0 && g.Audience != "":
				p.report(code, &c.item, at.with(field).with("audience"), true, "googleServiceAccount names both scopes and audience; an access token has scopes, an ID token an audience: keep one")
			}
		default:
			return
		}
		if cred.Kind == CredentialKindGoogle && cred.Google.Identity == config.IdentityWorkload {
			// No key and no token endpoint: the metadata server
			// (checkWorkloadIdentity).
			p.proxyHeldPlacements(code, c, "the proxy sets the token it obtains itself (Authorization: Bearer)", "the token of the proxy's own identity", "inject the token instead")
			return
		}
		urlAt := at.with(field).with("tokenUrl")
		if host, err := config.CheckTokenURL(tokenURL); err != nil {
			p.report(code, &c.item, urlAt, false, "tokenUrl %v", err)
		} else if !slices.Contains(w.Spec.Hosts, host) {
			if field == "googleServiceAccount" && cred.Google.TokenURL == "" {
				urlAt = at.with(field)
			}
			p.report(code, &c.item, urlAt, urlAt[len(urlAt)-1] == field, "the token endpoint's host %s is not one of the Connection's hosts; list it in spec.hosts, so that the proxy may dial it under the Connection's address rules", host)
		}
		p.proxyHeldPlacements(code, c, "the proxy sets the token it obtains itself (Authorization: Bearer)", holds, "inject the token instead")
		if s, r := p.secretOf(c); s != nil && !s.keysUnknown && !s.merges {
			for _, k := range keys {
				if _, ok := s.values.get(k); k != "" && !ok {
					p.reportNamedKeyMissing(c, at.with(field), s, r, k, "which "+field+" reads")
				}
			}
		}
	}
}
