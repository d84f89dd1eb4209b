package policy

import "fmt"

// Audit mode (a Connection's enforcement: audit, config.Host.Audit)
// lets a rollout see what a Connection's rules would refuse without the
// proxy stopping the agent: a request to one of its hosts that no rule
// allows is forwarded, without the credential, and logged. Only that
// refusal is relaxed. What Decide refuses before it looks at the rules
// stays refused in audit mode, since it guards the proxy, not the
// Connection's scope: a host not injected or no longer (host-not-allowed),
// hosts that disagree (host-mismatch), a method never sent with a
// credential, a target that is not a clean origin-form path, a method or
// path override in a header, query parameter or body, a body a rule's
// condition cannot be checked against as the upstream reads it; and so
// does what the server refuses after Decide: an internal address,
// a credential it cannot read, a body too large or too slow to check.
//
// The credential is not injected on an audited request. The rules are
// what bounds the credential's authority, and a review of the rules
// (keyhole diff) is what widens it: forwarding an audited request with
// the credential would let whatever the sandbox sends during the rollout
// act with it, which is no rules at all. Without it the upstream answers
// as it would anyone (a public read succeeds; a private one gets the
// upstream's 401 or 404), the log line names the rule that would allow
// the request, and keyhole suggest turns those lines into the edit.

// auditDecision turns d, a refusal by the rules of a host in audit mode,
// into the decision to forward the request without the credential, with
// the rule that would allow it in the words keyhole suggest uses for the
// edit it proposes: "methods [GET], pathPrefixes [/repos/acme/gadgets]".
// A rule with a body or GraphQL condition may be what the owner wants
// instead.
func auditDecision(d Decision, method, path string) Decision {
	d.Action = ActionAudit
	d.WouldAllow = fmt.Sprintf("methods [%s], pathPrefixes [%s]", Clip(method), Clip(path))
	return d
}
