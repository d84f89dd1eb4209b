//go:build e2e

package e2e

import (
	"os"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// TestExplainAgreesWithCurl asks keyhole explain's decision (DecideURL)
// and the running proxy, through real curl, about the same URLs, tricky
// ones included. explain judges a URL as typed, less its fragment; curl
// rewrites some before sending (it removes dot segments, decodes an
// escaped host name, reads port 0443 as 443), so for those the proxy sees
// another request. What must hold: whatever the proxy injected, explain
// allows as the request reached it, and explain allows nothing the proxy
// refused; where curl sends the URL as typed, the two agree exactly.
func TestExplainAgreesWithCurl(t *testing.T) {
	w := newWorld(t, "github-acme.json")
	raw, err := os.ReadFile("testdata/github-acme.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		method, url string
		args        []string
		// rewritten: curl sends another request than the URL typed.
		rewritten bool
		// want is the proxy's verdict: "inject", or the refusal reason.
		want string
	}{
		"allowed":                               {url: "https://api.github.com/repos/acme/widgets", want: "inject"},
		"fragment":                              {url: "https://api.github.com/repos/acme/widgets#frag", want: "inject"},
		"query and fragment":                    {url: "https://api.github.com/repos/acme/widgets?x=1#frag", want: "inject"},
		"fragment hiding dot segments":          {url: "https://api.github.com/repos/acme/widgets#/../../user", want: "inject"},
		"fragment hiding a host":                {url: "https://evil.example#@api.github.com/repos/acme/widgets", want: "host-not-allowed"},
		"upper-case host":                       {url: "https://API.GITHUB.COM/repos/acme/widgets", want: "inject"},
		"trailing dot":                          {url: "https://api.github.com./repos/acme/widgets", want: "inject"},
		"explicit port":                         {url: "https://api.github.com:443/repos/acme/widgets", want: "inject"},
		"port 0443":                             {url: "https://api.github.com:0443/repos/acme/widgets", rewritten: true, want: "inject"},
		"userinfo":                              {url: "https://user:pw@api.github.com/repos/acme/widgets", want: "inject"},
		"backslash in userinfo":                 {url: "https://evil.example\\@api.github.com/repos/acme/widgets", want: "inject"},
		"dot-dot into the prefix":               {url: "https://api.github.com/repos/acme/x/../widgets", rewritten: true, want: "inject"},
		"dot-dot into the prefix, --path-as-is": {url: "https://api.github.com/repos/acme/x/../widgets", args: []string{"--path-as-is"}, want: "l7-not-allowed"},
		"dot-dot out of the prefix":             {url: "https://api.github.com/repos/acme/widgets/../../../user", rewritten: true, want: "l7-not-allowed"},
		"encoded dot-dot":                       {url: "https://api.github.com/repos/acme/widgets/%2e%2e/%2e%2e/%2e%2e/user", want: "l7-not-allowed"},
		"empty segment":                         {url: "https://api.github.com//repos/acme/widgets", want: "l7-not-allowed"},
		"_method":                               {url: "https://api.github.com/repos/acme/widgets?_method=DELETE", want: "l7-not-allowed"},
		"at in the path":                        {url: "https://api.github.com/repos/acme/widgets@evil.example/", want: "l7-not-allowed"},
		"at in the query":                       {url: "https://api.github.com?@evil.example/", want: "l7-not-allowed"},
		"no path":                               {url: "https://api.github.com", want: "l7-not-allowed"},
		"escaped host name":                     {url: "https://api%2egithub.com/repos/acme/widgets", rewritten: true, want: "inject"},
		"lower-case method":                     {method: "get", url: "https://api.github.com/repos/acme/widgets", want: "l7-not-allowed"},
		"raw UTF-8 in the path":                 {url: "https://api.github.com/repos/acme/widgets/\u00e4", want: "inject"},
		"http to an injected host":              {url: "http://api.github.com/repos/acme/widgets", want: "l7-not-allowed"},
		"upper-case scheme":                     {url: "HTTPS://api.github.com/repos/acme/widgets", want: "inject"},
		"IPv6 literal":                          {url: "https://[::1]/repos/acme/widgets", want: "host-not-allowed"},
		"another host":                          {url: "https://evil.example/repos/acme/widgets", want: "host-not-allowed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "GET"
			}
			typed := p.DecideURL(method, tc.url, nil)
			before := len(w.api.requests())
			res := w.curl(t, tc.url, append([]string{"-X", method}, tc.args...)...)
			seen := w.api.requests()[before:]
			got := res.header.Get(refusal)
			if len(seen) > 0 {
				if seen[0].Header.Get("Authorization") != "Bearer "+w.token {
					t.Fatalf("the upstream got %s without the credential", seen[0].URI)
				}
				got = "inject"
				// What the proxy injected, explain allows as it
				// arrived.
				if d := p.DecideURL(seen[0].Method, "https://api.github.com"+seen[0].URI, nil); !d.Allowed() {
					t.Errorf("the proxy injected %s %s, which explain refuses: %s", seen[0].Method, seen[0].URI, d)
				}
			}
			if got != tc.want {
				t.Fatalf("the proxy: %q, want %q (curl: %d, CONNECT %d, %v)", got, tc.want, res.code, res.connect, res.exit)
			}
			if got != "inject" && typed.Allowed() {
				t.Errorf("explain allows what the proxy refused (%s): %s", got, typed)
			}
			if tc.rewritten {
				return
			}
			if want := string(typed.Reason); typed.Allowed() {
				if typed.Action != policy.ActionInject || got != "inject" {
					t.Errorf("explain: %s; the proxy: %s", typed, got)
				}
			} else if got != want {
				t.Errorf("explain: %s; the proxy: %s", typed, got)
			}
		})
	}
}
