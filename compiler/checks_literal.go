package compiler

import (
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
)

// Codes of the literal credential checks: a credential belongs in the
// Secret a Connection names, never in the objects render copies into the
// proxy's ConfigMap and git holds in plain text.
const (
	codeValueLiteral      = "ConnectionValueLiteral"
	codeCredentialLiteral = "CredentialLiteral"
)

// checkValueLiterals reports an inject value that reads no Secret key:
// whatever it holds (a token, or a ${VAR} nothing expands) would be
// rendered as written into the proxy's config and sent as the header.
func checkValueLiterals(p *pass) {
	for _, c := range p.connList {
		w := c.w
		for i, in := range w.Spec.Placement.Inject {
			if in.Value == nil {
				continue
			}
			t, err := config.ParseTemplate(*in.Value)
			if err != nil || len(t.Keys()) > 0 {
				continue // ConnectionTemplateInvalid says why, or it reads a key
			}
			why := "it is literal text"
			switch {
			case strings.Contains(*in.Value, "$"):
				why = "a ${...} in it is not expanded: neither keyhole nor the proxy reads environment variables"
			case c.item.doc != nil && c.item.doc.Unit().Helm != nil:
				why = "it is literal text as Helm rendered it: Helm expands a {{ .key }} written in a template itself; write it as {{ \"{{ .token }}\" }} for the proxy to read"
			}
			p.report(codeValueLiteral, &c.item, path{"spec", "placement", "inject", i, "value"}, false,
				"value of inject entry %d reads no key of Secret %s (%s), so render would write it as it is into the proxy's ConfigMap; keep the credential in the Secret and read it with a key reference, e.g. \"Bearer {{ .token }}\"",
				i, w.Spec.Credential.SecretRef.Name, why)
		}
	}
}

// checkCredentialLiterals reports each string of a Connection, an agent
// or the Config that has the shape of a known service's token, naming the
// shape and the field, never the value.
func checkCredentialLiterals(p *pass) {
	for _, c := range p.connList {
		reportCredentials(p, &c.item, "Connection")
	}
	for _, a := range p.agents {
		reportCredentials(p, &a.item, "agent")
	}
	if p.config.found != nil && p == p.units[0] {
		// The Config is every unit's: reported once.
		reportCredentials(p, p.config.found, "Config")
	}
}

func reportCredentials(p *pass, it *item, kind string) {
	for _, f := range credentialsOf(p, it) {
		where := "field " + f.at.String()
		if f.key {
			where = "a key of " + f.at.String()
			if len(f.at) == 0 {
				where = "a top-level key"
			}
		}
		p.report(codeCredentialLiteral, it, f.at, false,
			"%s of this %s holds a token of the shape %s (the value is not shown); a credential never belongs in git in plain text: revoke it, and keep it in a Secret that a Connection reads by key",
			where, kind, f.shape)
	}
}

// credentialsOf returns the token findings of it's document: those the
// digest took while the document was parsed, else those of its tree.
func credentialsOf(p *pass, it *item) []credentialFinding {
	if dg := p.digests.of(it.doc); dg != nil {
		if k := dg.schemaKind(); k == schema.KindConnection || k == schema.KindAgent {
			if dg.more == nil {
				return nil
			}
			return dg.more.credentials
		}
	}
	n, _ := it.tree()
	if n == nil {
		return nil
	}
	return findCredentials(n)
}

// redactCredentials replaces, in every diagnostic's message and path, a
// token the message quotes from the input (a schema finding on a
// token-shaped host or header name) by the name of its shape: what check
// prints never holds one. It returns ds, changed in place.
func redactCredentials(ds diag.List) diag.List {
	for i := range ds {
		ds[i].Message = RedactCredentials(ds[i].Message)
		ds[i].Path = RedactCredentials(ds[i].Path)
	}
	return ds
}
