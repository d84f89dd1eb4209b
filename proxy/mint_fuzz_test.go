package proxy

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// FuzzAppToken: any Authorization header reads as an App token, or none,
// without a panic, and the token an App injection sets, in either
// scheme, reads back as itself: the token an upstream refused is the
// one the cache replaces.
func FuzzAppToken(f *testing.F) {
	f.Add("token ghs_abc", "ghs_abc")
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:ghs_x")), "ghs_x")
	f.Add("Basic !!", "")
	f.Add("Bearer x", "ghs_y:z")
	f.Fuzz(func(t *testing.T, header, tok string) {
		_ = appToken(http.Header{"Authorization": {header}})
		if v, err := config.HeaderValue([]byte(tok)); err != nil || string(v) != tok || tok == "" || strings.ContainsAny(tok, " \t") {
			return // parseTokenResponse hands out no such token
		}
		for _, scheme := range []string{config.GitHubSchemeToken, config.GitHubSchemeBasic} {
			h := http.Header{}
			m := newMinter(nil, func(string, string) {})
			g := &config.GitHubAppInject{AppID: 1, InstallationID: 2, PrivateKeyKey: "k", API: config.GitHubAPIHost, Scheme: scheme}
			hp := &policy.HostPolicy{Host: config.Host{Connection: "c", Inject: config.Inject{Secret: "s", GitHubApp: g}}}
			m.cache.entries[appCacheKey("s", g)] = &tokenEntry{token: Secret{v: tok}, expires: m.cache.now().Add(1e12), renewAt: m.cache.now().Add(1e12)}
			if _, err := m.inject(hp, h, nil, nil); err != nil {
				t.Fatal(err)
			}
			if got := appToken(h); got.v != tok {
				t.Fatalf("scheme %s: read back %q from %q, want %q", scheme, got.v, h.Get("Authorization"), tok)
			}
		}
	})
}

// FuzzStripAWSAuth: whatever a sandbox's query holds, none of the
// presigned form's X-Amz-* parameters, in any letter case or escaping,
// reaches the upstream beside the proxy's signature, nor any of the
// signature's headers; the other parameters go as they came, in order.
func FuzzStripAWSAuth(f *testing.F) {
	f.Add("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=omnia-injected-aws%2F20261206%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00&list-type=2", "X-Amz-Date")
	f.Add("x-amz-signature=1;X%2DAmz%2DSecurity%2DToken=2&a=%zz", "x_amz_security_token")
	f.Add("prefix=a%2Bb&X-Amz-Expires", "AUTHORIZATION")
	f.Fuzz(func(t *testing.T, query, header string) {
		u := &url.URL{Scheme: "https", Host: "s3.us-east-1.amazonaws.com", Path: "/b", RawQuery: query}
		r := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}
		if header != "" && !strings.ContainsAny(header, "\r\n:\x00") {
			r.Header[header] = []string{"sandbox"}
		}
		stripAWSAuth(r)
		for k := range r.Header {
			if slices.ContainsFunc(awsAuthHeaders(), func(a string) bool { return strings.EqualFold(strings.ReplaceAll(k, "_", "-"), a) }) {
				t.Fatalf("header %q kept", k)
			}
		}
		v, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			t.Fatalf("the stripped query %q does not parse: %v", r.URL.RawQuery, err)
		}
		for k := range v {
			if slices.ContainsFunc(awsAuthQuery(), func(a string) bool { return strings.EqualFold(k, a) }) {
				t.Fatalf("query %q kept %q of %q", r.URL.RawQuery, k, query)
			}
		}
		clean, _ := url.ParseQuery(cleanQuery(query))
		for k, vs := range clean {
			if slices.ContainsFunc(awsAuthQuery(), func(a string) bool { return strings.EqualFold(k, a) }) {
				continue
			}
			if !slices.Equal(v[k], vs) {
				t.Fatalf("parameter %q went as %q, came as %q", k, v[k], vs)
			}
		}
	})
}
