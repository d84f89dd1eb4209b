package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestDecideURL(t *testing.T) {
	p := testPolicy(t)
	tests := map[string]struct {
		method, url, body string
		action            Action
		reason            Reason
	}{
		"allowed":           {method: "GET", url: "https://api.github.com/repos/acme/widgets", action: ActionInject, reason: ReasonAllowed},
		"allowed with port": {method: "GET", url: "https://API.github.com:443/repos/acme/widgets?x=1", action: ActionInject, reason: ReasonAllowed},
		"no path":           {method: "GET", url: "https://api.github.com", action: ActionRefuse, reason: ReasonL7NotAllowed},
		"query only":        {method: "GET", url: "https://uploads.github.com?x=1", action: ActionInject, reason: ReasonAllowed},
		"l7":                {method: "GET", url: "https://api.github.com/user", action: ActionRefuse, reason: ReasonL7NotAllowed},
		"dot segment":       {method: "GET", url: "https://api.github.com/repos/acme/widgets/../../x", action: ActionRefuse, reason: ReasonL7NotAllowed},
		"other port":        {method: "GET", url: "https://api.github.com:8443/repos/acme/widgets", action: ActionRefuse, reason: ReasonHostNotAllowed},
		"unknown host":      {method: "GET", url: "https://evil.example/", action: ActionRefuse, reason: ReasonHostNotAllowed},
		"passthrough":       {method: "GET", url: "https://pypi.org/simple/", action: ActionTunnel, reason: ReasonAllowed},
		"plain passthrough": {method: "GET", url: "http://pypi.org/simple/", action: ActionForward, reason: ReasonAllowed},
		"plain injected":    {method: "GET", url: "http://api.github.com/repos/acme/widgets", action: ActionRefuse, reason: ReasonL7NotAllowed},
		"lfs upload":        {method: "POST", url: "https://github.com/acme/w.git/info/lfs/objects/batch", body: `{"operation":"upload"}`, action: ActionRefuse, reason: ReasonL7NotAllowed},
		"lfs download":      {method: "POST", url: "https://github.com/acme/w.git/info/lfs/objects/batch", body: `{"operation":"download"}`, action: ActionInject, reason: ReasonAllowed},
		"userinfo":          {method: "GET", url: "https://x-access-token:t@github.com/acme/w.git/info/refs", action: ActionInject, reason: ReasonAllowed},
		"ftp":               {method: "GET", url: "ftp://pypi.org/", action: ActionRefuse, reason: ReasonHostNotAllowed},
		"not a url":         {method: "GET", url: "/user", action: ActionRefuse, reason: ReasonHostNotAllowed},
		// Clients drop the fragment; what it hides is never sent.
		"fragment":             {method: "GET", url: "https://api.github.com/repos/acme/widgets#x", action: ActionInject, reason: ReasonAllowed},
		"fragment hiding dots": {method: "GET", url: "https://api.github.com/repos/acme/widgets#/../../user", action: ActionInject, reason: ReasonAllowed},
		"fragment before path": {method: "GET", url: "https://api.github.com#/repos/acme/widgets", action: ActionRefuse, reason: ReasonL7NotAllowed},
		"fragment hiding host": {method: "GET", url: "https://evil.example#@api.github.com/repos/acme/widgets", action: ActionRefuse, reason: ReasonHostNotAllowed},
		"plain, fragment":      {method: "GET", url: "http://pypi.org/simple/#x", action: ActionForward, reason: ReasonAllowed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.DecideURL(tc.method, tc.url, []byte(tc.body))
			if d.Action != tc.action || d.Reason != tc.reason {
				t.Fatalf("DecideURL(%s %s) = %+v, want %s/%s", tc.method, tc.url, d, tc.action, tc.reason)
			}
			s := d.String()
			if strings.ContainsAny(s, "\n") || !strings.Contains(s, string(d.Reason)) {
				t.Errorf("String() = %q", s)
			}
		})
	}
}

func FuzzDecideURL(f *testing.F) {
	p := testPolicy(f)
	for _, u := range []string{"https://api.github.com/repos/acme/widgets", "http://pypi.org/", "https://a@[::1]:443/x", "https://github.com?x", "https://",
		"https://uploads.github.com/@acme%2fwidgets", "https://api.github.com/repos/acme/widgets/a%2Fb", "https://github.com/acme%2Fwidgets/git-upload-pack"} {
		f.Add("GET", u, []byte(nil))
	}
	f.Fuzz(func(t *testing.T, method, rawURL string, body []byte) {
		d := p.DecideURL(method, rawURL, body)
		if d.Action == "" || d.Reason == "" || strings.Contains(d.String(), "\n") {
			t.Fatalf("bad decision %+v", d)
		}
		if d.Action != ActionInject {
			return
		}
		h := p.Host(d.Host)
		if h == nil {
			t.Fatalf("inject on unconfigured host %q", d.Host)
		}
		// What is injected is a clean path on that host that one of its
		// rules allows, read from the URL as typed less its fragment,
		// which clients never send.
		sent, _, _ := strings.Cut(rawURL, "#")
		_, rest, _ := strings.Cut(sent, "://")
		authority, target := rest, "/"
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			authority, target = rest[:i], rest[i:]
		}
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			authority = authority[i+1:]
		}
		if c, err := CanonicalHost(authority, "443"); err != nil || c != d.Host {
			t.Fatalf("%q injected for host %q", rawURL, d.Host)
		}
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		path, err := TargetPath(target)
		b := Body{Data: body, Complete: true, ContentType: []string{"application/json"}}
		if errors.Is(err, errEncodedSlash) {
			if path, err = targetPath(target, true); err == nil {
				assertEitherWay(t, h, method, path, b)
				return
			}
		}
		if err != nil {
			t.Fatalf("%q injected with an unclean target: %v", rawURL, err)
		}
		if len(h.Rules) == 0 {
			return
		}
		for _, r := range h.Rules {
			if MatchRule(r, method, path, b) {
				return
			}
		}
		t.Fatalf("%s %q injected though no rule of %s allows it", method, rawURL, d.Host)
	})
}
