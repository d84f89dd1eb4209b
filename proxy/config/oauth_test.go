package config

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateTokenInjections: an OAuth 2.0 or Google injection is valid
// only with an https token endpoint on a host the config lists, the keys
// its grant reads, well-formed scopes, and, for Google, one of scopes and
// audience.
func TestValidateTokenInjections(t *testing.T) {
	oauth := func(edit func(o *OAuth2Inject)) Inject {
		o := &OAuth2Inject{TokenURL: "https://auth.example/token", Grant: OAuth2GrantClientCredentials, ClientIDKey: "client-id", ClientSecretKey: "client-secret", Scopes: []string{"a", "b"}}
		edit(o)
		return Inject{Secret: "s", OAuth2: o}
	}
	google := func(edit func(g *GoogleInject)) Inject {
		g := &GoogleInject{KeyKey: "key.json", TokenURL: "https://auth.example/token", Scopes: []string{"openid"}}
		edit(g)
		return Inject{Secret: "s", Google: g}
	}
	for name, tc := range map[string]struct {
		in          Inject
		passthrough []string
		want        string // "" for valid
	}{
		"client credentials": {in: oauth(func(*OAuth2Inject) {}), passthrough: []string{"auth.example"}},
		"refresh token, public": {in: oauth(func(o *OAuth2Inject) {
			o.Grant, o.ClientSecretKey, o.RefreshTokenKey = OAuth2GrantRefreshToken, "", "rt"
		}), passthrough: []string{"auth.example"}},
		"token host not listed":      {in: oauth(func(*OAuth2Inject) {}), want: "names host auth.example, which the config neither injects nor passes through"},
		"token host on another port": {in: oauth(func(o *OAuth2Inject) { o.TokenURL = "https://auth.example:8443/token" }), passthrough: []string{"auth.example"}, want: "names port 8443; the proxy reaches hosts on 443 only"},
		"not https":                  {in: oauth(func(o *OAuth2Inject) { o.TokenURL = "http://auth.example/token" }), passthrough: []string{"auth.example"}, want: "is not an https URL"},
		"user information":           {in: oauth(func(o *OAuth2Inject) { o.TokenURL = "https://id:secret@auth.example/token" }), passthrough: []string{"auth.example"}, want: "holds user information"},
		"query":                      {in: oauth(func(o *OAuth2Inject) { o.TokenURL = "https://auth.example/token?x=1" }), passthrough: []string{"auth.example"}, want: "has a query or fragment"},
		"unknown grant":              {in: oauth(func(o *OAuth2Inject) { o.Grant = "password" }), passthrough: []string{"auth.example"}, want: `grant: is "password"`},
		"refresh key, wrong grant":   {in: oauth(func(o *OAuth2Inject) { o.RefreshTokenKey = "rt" }), passthrough: []string{"auth.example"}, want: "is read by the refreshToken grant only"},
		"scopes unsorted":            {in: oauth(func(o *OAuth2Inject) { o.Scopes = []string{"b", "a"} }), passthrough: []string{"auth.example"}, want: "is not sorted with each scope once"},
		"scope with a space":         {in: oauth(func(o *OAuth2Inject) { o.Scopes = []string{"a b"} }), passthrough: []string{"auth.example"}, want: "holds a character a scope may not"},
		"audience with a line break": {in: oauth(func(o *OAuth2Inject) { o.Audience = "a\nb" }), passthrough: []string{"auth.example"}, want: "holds a control character"},
		"google access token":        {in: google(func(*GoogleInject) {}), passthrough: []string{"auth.example"}},
		"google ID token":            {in: google(func(g *GoogleInject) { g.Scopes, g.Audience = nil, "https://run.example" }), passthrough: []string{"auth.example"}},
		"google both":                {in: google(func(g *GoogleInject) { g.Audience = "https://run.example" }), passthrough: []string{"auth.example"}, want: "sets both scopes and audience"},
		"google neither":             {in: google(func(g *GoogleInject) { g.Scopes = nil }), passthrough: []string{"auth.example"}, want: "sets neither scopes nor audience"},
		"google token host unlisted": {in: google(func(*GoogleInject) {}), want: "googleServiceAccount.tokenUrl: names host auth.example"},
		"google workload identity":   {in: Inject{Google: &GoogleInject{Identity: IdentityWorkload, Scopes: []string{"openid"}}}},
		"google workload with a Secret": {in: Inject{Secret: "s", Google: &GoogleInject{Identity: IdentityWorkload, Scopes: []string{"openid"}}},
			want: "secret: is \"s\", but the credential is the proxy's workload identity"},
		"google workload with a key": {in: google(func(g *GoogleInject) { g.Identity = IdentityWorkload }), passthrough: []string{"auth.example"},
			want: "names a key or a token endpoint, but identity \"workload\" asks the metadata server"},
		"google workload, neither": {in: Inject{Google: &GoogleInject{Identity: IdentityWorkload}}, want: "sets neither scopes nor audience"},
		"google unknown identity":  {in: google(func(g *GoogleInject) { g.Identity = "node" }), passthrough: []string{"auth.example"}, want: `identity: is "node", want "workload" or none`},
		"aws workload identity":    {in: Inject{AWSSigV4: &AWSSigV4Inject{Identity: IdentityWorkload, Region: "us-east-1", Service: "s3"}}},
		"aws workload with a Secret": {in: Inject{Secret: "s", AWSSigV4: &AWSSigV4Inject{Identity: IdentityWorkload, Region: "us-east-1", Service: "s3"}},
			want: "but the credential is the proxy's workload identity, which reads no Secret"},
		"aws workload with keys": {in: Inject{AWSSigV4: &AWSSigV4Inject{Identity: IdentityWorkload, AccessKeyIDKey: "AWS_ACCESS_KEY_ID", Region: "us-east-1", Service: "s3"}},
			want: "names Secret keys, but identity \"workload\" signs with the proxy's own credentials"},
		"aws keys without a Secret": {in: Inject{AWSSigV4: &AWSSigV4Inject{AccessKeyIDKey: "a", SecretAccessKeyKey: "b", Region: "us-east-1", Service: "s3"}}, want: "secret:"},
		"aws unknown identity":      {in: Inject{Secret: "s", AWSSigV4: &AWSSigV4Inject{Identity: "irsa", AccessKeyIDKey: "a", SecretAccessKeyKey: "b", Region: "us-east-1", Service: "s3"}}, want: `identity: is "irsa"`},
		"two forms":                 {in: Inject{Secret: "s", OAuth2: oauth(func(*OAuth2Inject) {}).OAuth2, Google: google(func(*GoogleInject) {}).Google}, passthrough: []string{"auth.example"}, want: "sets 2 of header, basic, substitute, githubApp, awsSigV4, oauth2 and googleServiceAccount"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Config{APIVersion: APIVersion, Kind: Kind, Sandbox: SandboxRef{Name: "s"},
				Hosts: []Host{{Name: "api.example", Connection: "c", Inject: tc.in}}, Passthrough: tc.passthrough}
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid)):
				t.Fatalf("got %v, want an ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}
