package proxy

import (
	"net/http"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/policy"
)

// auditConfig is testConfig with api.github.com's Connection in audit
// mode.
var auditConfig = strings.Replace(testConfig, `{"name": "api.github.com", "connection": "github-acme",`, `{"name": "api.github.com", "connection": "github-acme", "audit": true,`, 1)

// TestServerAuditMode: in audit mode a request that only the rules
// refuse is forwarded without the credential, logged loudly with the
// reason and the rule that would allow it, and counted; a request the
// rules allow is injected as ever; and what is refused for a security
// reason (a method override, a method never sent with a credential,
// hosts that disagree) is refused still.
func TestServerAuditMode(t *testing.T) {
	if auditConfig == testConfig {
		t.Fatal("the audit config is the test config: its host line changed")
	}
	h := newHarnessConfig(t, auditConfig)
	c := h.client()
	t.Cleanup(c.CloseIdleConnections)

	get := func(method, url string, header http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		return resp
	}
	// Allowed by a rule: injected.
	if resp := get("GET", "https://api.github.com/repos/acme/widgets", nil); resp.StatusCode != 200 {
		t.Fatalf("allowed request: %s", resp.Status)
	}
	// Refused by the rules only: forwarded, without the credential.
	resp := get("DELETE", "https://api.github.com/orgs/acme", http.Header{"Authorization": {"Bearer omnia-injected-github-acme"}})
	if resp.StatusCode != 200 || resp.Header.Get(policy.RefusedHeader) != "" {
		t.Fatalf("audited request: %s %q, want the upstream's 200", resp.Status, resp.Header.Get(policy.RefusedHeader))
	}
	seen := h.api.seen()
	if len(seen) != 2 {
		t.Fatalf("the upstream saw %d requests, want 2", len(seen))
	}
	if got := seen[0].Header.Get("Authorization"); got != "Bearer "+canary {
		t.Errorf("the allowed request was not injected: %q", got)
	}
	if got := seen[1].Header.Get("Authorization"); got != "Bearer omnia-injected-github-acme" || seen[1].Method != "DELETE" {
		t.Errorf("the audited request went out as %s with Authorization %q, want DELETE with the sandbox's placeholder", seen[1].Method, got)
	}
	eventually(t, "the audited request's line", func() bool { return strings.Contains(h.logs.String(), `"decision":"audit"`) })
	logs := h.logs.String()
	for _, want := range []string{
		`"level":"WARN","msg":"audit mode: forwarded without the credential a request the rules refuse","host":"api.github.com","connection":"github-acme","method":"DELETE","path":"/orgs/acme","reason":"l7-not-allowed"`,
		`"would_allow":"methods [DELETE], pathPrefixes [/orgs/acme]"`,
		`"method":"DELETE","path":"/orgs/acme","decision":"audit","reason":"l7-not-allowed","connection":"github-acme","status":200`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}
	if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_audited_total{host="api.github.com",connection="github-acme",reason="l7-not-allowed"} 1`) {
		t.Errorf("metrics lack the audited request")
	}
	// Refused for a security reason: refused in audit mode too.
	for name, tc := range map[string]struct {
		method string
		header http.Header
		reason policy.Reason
	}{
		"method override header": {method: "GET", header: http.Header{"X-Http-Method-Override": {"DELETE"}}, reason: policy.ReasonL7NotAllowed},
		"TRACE":                  {method: "TRACE", reason: policy.ReasonL7NotAllowed},
	} {
		resp := get(tc.method, "https://api.github.com/repos/acme/widgets", tc.header)
		if resp.StatusCode != tc.reason.Status() || resp.Header.Get(policy.RefusedHeader) != string(tc.reason) {
			t.Errorf("%s: %s %q, want %s", name, resp.Status, resp.Header.Get(policy.RefusedHeader), tc.reason)
		}
	}
	if n := len(h.api.seen()); n != 2 {
		t.Errorf("the upstream saw %d requests; the refused ones reached it", n)
	}
	if strings.Contains(h.logs.String(), canary) {
		t.Errorf("the log holds the credential")
	}
}

// TestServerAuditModeNeedsTheCredential: in audit mode a request the
// rules allow still needs its credential: one the proxy cannot read is
// refused credential-unavailable, never sent without it.
func TestServerAuditModeNeedsTheCredential(t *testing.T) {
	h := newHarnessConfig(t, auditConfig)
	h.secrets.write(map[string]string{"user": "x-access-token"}) // no token
	resp, _ := h.fetch(t, "https://api.github.com/repos/acme/widgets")
	if resp.StatusCode != 502 || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonCredentialUnavailable) {
		t.Fatalf("%s %q, want 502 credential-unavailable", resp.Status, resp.Header.Get(policy.RefusedHeader))
	}
	if n := len(h.api.seen()); n != 0 {
		t.Errorf("the upstream saw %d requests", n)
	}
}
