package proxy

import (
	"net/http"

	"keyhole.dev/keyhole/proxy/policy"
)

// audited logs, loudly, a request forwarded in audit mode without the
// credential (policy.ActionAudit): what the rules would refuse, why, and
// the rule that would allow it, in keyhole suggest's words; and counts
// it in keyhole_proxy_audited_total. The request line follows as for
// every request, with decision "audit" and the refusal's reason, which
// keyhole suggest reads as a refusal.
func (s *Server) audited(st *state, r *http.Request, d policy.Decision) {
	s.metrics.audited(s.metricHost(st, d.Host), d.Connection, string(d.Reason))
	s.log.Warn("audit mode: forwarded without the credential a request the rules refuse",
		"host", d.Host, "connection", d.Connection, "method", policy.Clip(r.Method), "path", logPath(r),
		"reason", string(d.Reason), "message", d.Message, "would_allow", d.WouldAllow)
}
