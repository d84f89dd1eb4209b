package compiler

import "strings"

// EnforcementAudit is the value of a Connection's spec.enforcement that
// puts it in audit mode: the egress proxy forwards, without the
// credential, a request to one of its injected hosts that only its rules
// refuse, and logs it (docs/spec.md §6, docs/connections.md).
// "enforce", the default, refuses it.
const (
	EnforcementAudit   = "audit"
	EnforcementEnforce = "enforce"
)

// codeAuditMode is the warning every Connection in audit mode gets.
const codeAuditMode = "ConnectionAuditMode"

// checkAuditMode says, loudly, that a Connection is in audit mode: its
// rules bound the credential still, but no longer what reaches its hosts.
func checkAuditMode(p *pass) {
	for _, c := range p.connList {
		if c.w.Spec.Enforcement != EnforcementAudit {
			continue
		}
		var hosts []string
		for _, in := range c.w.Spec.Placement.Inject {
			hosts = append(hosts, in.Hosts...)
		}
		on := "its injected hosts"
		if len(hosts) > 0 {
			on = strings.Join(hosts, ", ")
		}
		p.report(codeAuditMode, &c.item, path{"spec", "enforcement"}, false,
			"Connection %s is in audit mode: the egress proxy forwards requests its rules refuse on %s, without the credential, and logs each with the rule that would allow it; set enforcement: enforce (or remove the field) once keyhole suggest finds nothing to add",
			c.obj().Name, on)
	}
}
