package policy

import (
	"errors"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// slashConfig has a host of each kind an encoded '/' meets: without
// rules (a private npm registry the agent may publish to), with a rule
// for every GET (GitLab's read-only connector), with rules that name
// segments.
const slashConfig = `{
  "apiVersion": "proxy.keyhole.dev/v1alpha1", "kind": "ProxyConfig",
  "sandbox": {"namespace": "agents", "name": "support"},
  "hosts": [
    {"name": "npm.example", "connection": "registry",
     "inject": {"secret": "registry", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}}},
    {"name": "gitlab.example", "connection": "gitlab",
     "inject": {"secret": "gitlab", "header": {"name": "PRIVATE-TOKEN", "value": "{{ .token }}"}},
     "rules": [{"methods": ["GET", "HEAD"], "pathPrefixes": ["/"]},
               {"methods": ["POST"], "pathPatterns": ["/*/*/git-upload-pack"]}]},
    {"name": "npm-read.example", "connection": "registry-read",
     "inject": {"secret": "registry", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET"], "pathPatterns": ["/*"]}]},
    {"name": "api.example", "connection": "api",
     "inject": {"secret": "api", "header": {"name": "Authorization", "value": "Bearer {{ .token }}"}},
     "rules": [{"methods": ["GET"], "pathPrefixes": ["/repos/acme/widgets"]},
               {"methods": ["GET"], "pathPatterns": ["/projects/*/issues"]}]}
  ]
}`

// TestDecideEncodedSlash: an encoded '/' inside a segment is allowed
// where no rule could be confused by it, that is on a host without rules
// or where a rule allows the request both as sent and with the '/' read
// as a separator; everywhere else, and wherever it would leave an empty
// or dot segment, it is refused.
func TestDecideEncodedSlash(t *testing.T) {
	cfg, err := config.Decode([]byte(slashConfig))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		host, method, target string
		allowed              bool
		why                  string // in the refusal
	}{
		"scoped package, no rules":          {host: "npm.example", method: "GET", target: "/@acme%2fwidgets", allowed: true},
		"scoped package upper case":         {host: "npm.example", method: "GET", target: "/@acme%2Fwidgets", allowed: true},
		"scoped publish, no rules":          {host: "npm.example", method: "PUT", target: "/@acme%2fwidgets", allowed: true},
		"scoped tarball":                    {host: "npm.example", method: "GET", target: "/@acme/widgets/-/widgets-1.0.0.tgz", allowed: true},
		"dot part":                          {host: "npm.example", method: "GET", target: "/@acme%2f..%2fother", why: "dot segment"},
		"encoded dot part":                  {host: "npm.example", method: "GET", target: "/a%2F%2e%2e%2Fb", why: "dot segment"},
		"leading slash":                     {host: "npm.example", method: "GET", target: "/%2fetc", why: "empty segment"},
		"trailing slash":                    {host: "npm.example", method: "GET", target: "/a%2f/b", why: "empty segment"},
		"two slashes":                       {host: "npm.example", method: "GET", target: "/a%2f%2fb", why: "empty segment"},
		"encoded backslash":                 {host: "npm.example", method: "GET", target: "/a%5cb", why: `encoded '\'`},
		"GitLab project, GET everywhere":    {host: "gitlab.example", method: "GET", target: "/api/v4/projects/group%2Fproject/issues", allowed: true},
		"GitLab subgroup":                   {host: "gitlab.example", method: "GET", target: "/api/v4/projects/group%2Fsub%2Fproject", allowed: true},
		"GitLab write to the project":       {host: "gitlab.example", method: "POST", target: "/api/v4/projects/group%2Fproject/issues", why: "both as sent and with its encoded '/' read as a separator"},
		"git-upload-pack a segment short":   {host: "gitlab.example", method: "POST", target: "/group%2Fproject/git-upload-pack", why: "encoded '/'"},
		"a pattern's one segment":           {host: "npm-read.example", method: "GET", target: "/@acme%2fwidgets", why: "encoded '/'"},
		"a pattern's one segment, plain":    {host: "npm-read.example", method: "GET", target: "/widgets", allowed: true},
		"under a prefix either way":         {host: "api.example", method: "GET", target: "/repos/acme/widgets/contents/a%2Fb.txt", allowed: true},
		"a prefix's segment spelled across": {host: "api.example", method: "GET", target: "/repos/acme%2Fwidgets", why: "encoded '/'"},
		"out of a prefix by dots":           {host: "api.example", method: "GET", target: "/repos/acme/widgets%2F..%2F..%2Fother", why: "dot segment"},
		"a pattern read two ways":           {host: "api.example", method: "GET", target: "/projects/a%2Fb/issues", why: "encoded '/'"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(RequestInfo{Kind: KindTunnel, Method: tc.method, Target: tc.target, ConnectHost: tc.host + ":443", SNI: tc.host, Host: tc.host, BodyComplete: true})
			if d.Allowed() != tc.allowed {
				t.Fatalf("%s %s on %s: %s %s %q", tc.method, tc.target, tc.host, d.Action, d.Reason, d.Message)
			}
			if !tc.allowed && (d.Reason != ReasonL7NotAllowed || !strings.Contains(d.Message, tc.why)) {
				t.Fatalf("refused %s %q, want l7-not-allowed saying %q", d.Reason, d.Message, tc.why)
			}
		})
	}
}

// TestTargetPathSlashes: TargetPath itself still refuses every encoded
// '/' (explain's and the ceiling's reading of a path), marking the
// refusal so the decision can lift it; with slashes, what it accepts
// splits, at every encoded '/', into segments that are neither empty nor
// dot segments.
func TestTargetPathSlashes(t *testing.T) {
	for _, target := range []string{"/@acme%2fwidgets", "/a/b%2Fc/d?x=1", "/a%2Fb/"} {
		if _, err := TargetPath(target); !errors.Is(err, ErrTarget) || !errors.Is(err, errEncodedSlash) {
			t.Errorf("TargetPath(%q): %v, want the encoded '/' refused", target, err)
		}
		path, err := targetPath(target, true)
		if err != nil {
			t.Fatalf("targetPath(%q, true): %v", target, err)
		}
		if want, _, _ := strings.Cut(target, "?"); path != want {
			t.Errorf("targetPath(%q, true) = %q, want the path as sent", target, path)
		}
		if dec := decodeSlashes(path); strings.Contains(strings.TrimSuffix(dec, "/"), "//") || strings.Contains(dec, "%2") {
			t.Errorf("decodeSlashes(%q) = %q", path, dec)
		}
	}
	if _, err := TargetPath("/a%5cb"); errors.Is(err, errEncodedSlash) {
		t.Error("an encoded '\\' is marked as an encoded '/'")
	}
}

// assertEitherWay fails t unless h has no rules or one of them allows
// the request with path (holding an encoded '/') both as sent and with
// the '/' read as a separator.
func assertEitherWay(t *testing.T, h *HostPolicy, method, path string, body Body) {
	t.Helper()
	if len(h.Rules) == 0 {
		return
	}
	for _, r := range h.Rules {
		if MatchRule(r, method, path, body) && MatchRule(r, method, decodeSlashes(path), body) {
			return
		}
	}
	t.Fatalf("%s %s allowed with an encoded '/' though no rule allows it read either way", method, path)
}
