package proxy

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/policy"
)

// TestServerInjectionConfusion: requests written by hand in a tunnel
// that try to make the proxy put the credential somewhere its entry does
// not say, or send it to another host: the placeholder spelt or placed
// in ways a substitution could read too loosely (twice, as a prefix of
// a longer name, in letter-case variants, base64 without padding), the
// injected header sent several times or folded, names that differ from
// Authorization by a space or a Unicode character, and targets and Host
// values naming another host through userinfo or a port.
func TestServerInjectionConfusion(t *testing.T) {
	h := newHarness(t)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	const ph = "omnia-injected-github" // uploads.github.com's substitute placeholder
	tests := map[string]struct {
		host, raw string
		status    int
		refused   policy.Reason
		// auth is every Authorization value the upstream must see; nil
		// when it must see no request at all.
		auth []string
	}{
		"header form: Authorization in three letter cases": {host: "api.github.com",
			raw:    "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: Bearer a\r\nauthorization: Bearer b\r\nAUTHORIZATION: c\r\n\r\n",
			status: 200, auth: []string{"Bearer " + canary}},
		"header form: Authorization folded onto a second line": {host: "api.github.com",
			raw:    "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: Bearer a\r\n\tBearer b\r\n\r\n",
			status: 200, auth: []string{"Bearer " + canary}},
		"header form: a folded line reading as Authorization": {host: "api.github.com",
			raw:    "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nX-Note: a\r\n Authorization: Bearer mine\r\n\r\n",
			status: 200, auth: []string{"Bearer " + canary}},
		"a space before the colon": {host: "api.github.com",
			raw:    "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nAuthorization : Bearer a\r\n\r\n",
			status: 400},
		"a no-break space in the name": {host: "api.github.com",
			raw:    "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\nAuthorization\u00a0: Bearer a\r\n\r\n",
			status: 400},
		"substitute: the placeholder twice in one value": {host: "uploads.github.com",
			raw:    "GET /x HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: " + ph + " " + ph + "\r\n\r\n",
			status: 200, auth: []string{canary + " " + canary}},
		"substitute: two Authorization lines": {host: "uploads.github.com",
			raw:    "GET /x HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer " + ph + "\r\nAuthorization: token other\r\n\r\n",
			status: 200, auth: []string{"Bearer " + canary, "token other"}},
		"substitute: user and password both the placeholder": {host: "uploads.github.com",
			raw:    "GET /x HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Basic " + b64(ph+":"+ph) + "\r\n\r\n",
			status: 200, auth: []string{"Basic " + b64(canary+":"+canary)}},
		"substitute: a longer name the placeholder is a prefix of": {host: "uploads.github.com",
			raw:    "GET /x HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer " + ph + "-acme\r\n\r\n",
			status: 200, auth: []string{"Bearer " + canary + "-acme"}},
		"substitute: a shorter name, prefix of the placeholder": {host: "uploads.github.com",
			raw:    "GET /x HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer omnia-injected-githu\r\n\r\n",
			status: 200, auth: []string{"Bearer omnia-injected-githu"}},
		"substitute: the placeholder in upper case": {host: "uploads.github.com",
			raw:    "GET /x HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Bearer " + strings.ToUpper(ph) + "\r\n\r\n",
			status: 200, auth: []string{"Bearer " + strings.ToUpper(ph)}},
		"substitute: base64 without padding": {host: "uploads.github.com",
			raw:    "GET /x HTTP/1.1\r\nHost: uploads.github.com\r\nAuthorization: Basic " + base64.RawStdEncoding.EncodeToString([]byte("git:"+ph)) + "\r\n\r\n",
			status: 200, auth: []string{"Basic " + base64.RawStdEncoding.EncodeToString([]byte("git:"+ph))}},
		"absolute form, the tunnel's host as userinfo of another": {host: "api.github.com",
			raw:    "GET https://api.github.com@evil.example/repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n",
			status: 403, refused: policy.ReasonHostMismatch},
		"absolute form, another host as userinfo of the tunnel's": {host: "api.github.com",
			raw:    "GET https://evil.example@api.github.com/repos/acme/widgets HTTP/1.1\r\nHost: api.github.com\r\n\r\n",
			status: 403, refused: policy.ReasonHostMismatch},
		"Host with userinfo": {host: "api.github.com",
			raw:    "GET /repos/acme/widgets HTTP/1.1\r\nHost: evil.example@api.github.com\r\n\r\n",
			status: 400},
		"Host with another port": {host: "api.github.com",
			raw:    "GET /repos/acme/widgets HTTP/1.1\r\nHost: api.github.com:8443\r\n\r\n",
			status: 403, refused: policy.ReasonHostMismatch},
		"Host in upper case with a trailing dot": {host: "api.github.com",
			raw:    "GET /repos/acme/widgets HTTP/1.1\r\nHost: API.GITHUB.COM.\r\n\r\n",
			status: 200, auth: []string{"Bearer " + canary}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(h.api.seen())
			c, br := h.tlsTunnel(tc.host, tc.host, false)
			defer c.Close()
			resp := roundTrip(t, c, br, tc.raw)
			if resp.StatusCode != tc.status || resp.Header.Get(policy.RefusedHeader) != string(tc.refused) {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, resp.Header.Get(policy.RefusedHeader), tc.status, tc.refused)
			}
			got := h.api.seen()[before:]
			if tc.auth == nil {
				if len(got) != 0 {
					t.Fatalf("the upstream got %d requests", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("the upstream got %d requests, want 1", len(got))
			}
			if got[0].Host != tc.host {
				t.Errorf("the upstream was asked for %q", got[0].Host)
			}
			var auth []string
			for k, vv := range got[0].Header {
				if strings.EqualFold(k, "Authorization") {
					auth = append(auth, vv...)
				}
			}
			slices.Sort(auth)
			slices.Sort(tc.auth)
			if !slices.Equal(auth, tc.auth) {
				t.Errorf("Authorization upstream = %q, want %q", auth, tc.auth)
			}
			for k, vv := range got[0].Header {
				if !strings.EqualFold(k, "Authorization") && strings.Contains(strings.Join(vv, ","), canary) {
					t.Errorf("the credential went out in %s", k)
				}
			}
		})
	}
}
