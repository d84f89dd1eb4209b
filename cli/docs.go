package cli

import (
	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/render"
)

// ChecksDoc returns docs/checks.md: every code keyhole check reports, and
// those the omnia and agent-sandbox targets add. cli/docgen writes it; a test keeps
// the committed file equal to it.
func ChecksDoc() []byte {
	return compiler.ChecksDoc(map[string][]diag.Rule{
		"Reported by `keyhole render --target omnia`":         render.OmniaRules(),
		"Reported by `keyhole render --target agent-sandbox`": render.AgentSandboxRules(),
	})
}
