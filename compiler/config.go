package compiler

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/access"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// The repository's own settings live in a document of kind Config, in
// keyhole.yaml at the repository's root (the loader refuses one anywhere
// else):
//
//	apiVersion: keyhole.dev/v1alpha1
//	kind: Config
//	namespace: agents          # where agent.yaml agents live
//	sandboxImage: ghcr.io/acme/sandbox:1   # their sandbox image
//	catalog: [...]             # connectors added to or replacing the built-in catalog
//	ignore:                    # codes not to report, everywhere or on one object
//	  - code: ConnectionUnbound
//	    object: Connection/agents/legacy
//	operator:                  # the omnia operator release the cluster runs
//	  version: v0.9.0-beta.17
//	flux:                      # how Flux reads the repository (the loader reads it)
//	  sources: [{kind: OCIRepository, name: flux-system, path: kubernetes}]
//	  entries: [clusters/production]
//
// It is a document like any other so that it carries its own version,
// with positions for its own mistakes.
const (
	ConfigAPIVersion = source.ConfigAPIVersion
	ConfigKind       = source.ConfigKind
)

const (
	codeConfigInvalid = source.CodeConfigInvalid
)

type configWire struct {
	APIVersion   string `yaml:"apiVersion"`
	Kind         string `yaml:"kind"`
	Metadata     metadata
	Namespace    string      `yaml:"namespace"`
	SandboxImage string      `yaml:"sandboxImage"`
	Catalog      []yaml.Node `yaml:"catalog"`
	// Include and Exclude are path patterns the loader reads before it
	// walks (source.Options.Exclude); here they are only validated.
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
	Ignore  []struct {
		Code   string `yaml:"code"`
		Object string `yaml:"object"`
		Path   string `yaml:"path"`
	} `yaml:"ignore"`
	// Operator is read by readOperator, with positions.
	Operator yaml.Node `yaml:"operator"`
	// Ceiling is read by readCeiling, with positions.
	Ceiling []yaml.Node `yaml:"ceiling"`
	// Flux is read by the loader (source.Options), which maps Flux
	// sources and entries with it; here it is only validated.
	Flux yaml.Node `yaml:"flux"`
	// ArgoCD is read by the loader, which finds Argo CD roots and
	// instances with it; here it is only validated.
	ArgoCD yaml.Node `yaml:"argocd"`
}

// repoConfig is the resolved Config.
type repoConfig struct {
	found        *item
	namespace    string
	hasNamespace bool
	sandboxImage string
	ignore       []ignoreRule
	// ceiling is what no sandbox may be allowed (docs/checks.md,
	// AccessAboveCeiling); ceilingAt holds each limit's index in
	// keyhole.yaml's ceiling list.
	ceiling   access.Ceiling
	ceilingAt []int
}

type ignoreRule struct {
	code   string // "" for every code
	object string // Kind/namespace/name or Kind/name; "" for every object
	// path matches the diagnostic's file: a .gitignore-style pattern
	// relative to the Config's directory; nil for every file.
	path *pathPattern
}

func (p *pass) configNamespace() (string, bool) {
	return p.config.namespace, p.config.hasNamespace
}

func isConfig(o diag.Object) bool { return o.APIVersion == ConfigAPIVersion && o.Kind == ConfigKind }

// addConfig reads a Config document.
func (p *pass) addConfig(v *schema.Validator, doc *source.Document, it item) {
	if p.config.found != nil {
		prev := p.config.found.doc
		p.report(codeConfigInvalid, &it, path{"kind"}, false,
			"a second Config; the first is at %s:%d; keep one keyhole.yaml per repository", prev.File, prev.Pos.Line)
		return
	}
	p.config.found = &it
	known := []string{"apiVersion", "kind", "metadata", "namespace", "sandboxImage", "catalog", "include", "exclude", "ignore", "operator", "ceiling", "flux", "argocd"}
	for i := 0; i+1 < len(doc.Node.Content); i += 2 {
		k := doc.Node.Content[i].Value
		if !slices.Contains(known, k) {
			p.report(codeConfigInvalid, &it, path{k}, true, "unknown field %q in Config%s", clip(k), didYouMean(k, known))
		}
	}
	var w configWire
	if err := doc.Node.Decode(&w); err != nil {
		p.report(codeConfigInvalid, &it, nil, false, "cannot read Config: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return
	}
	if w.Namespace != "" {
		p.config.namespace, p.config.hasNamespace = w.Namespace, true
	}
	p.config.sandboxImage = w.SandboxImage
	if w.Operator.Kind != 0 {
		p.readOperator(&it, &w.Operator)
	}
	p.readCeiling(p.config.found, w.Ceiling)
	if w.Flux.Kind != 0 {
		for _, vi := range v.Validate(schema.KindFluxConfig, &w.Flux) {
			p.diags = append(p.diags, p.diagnostic(codeConfigInvalid, &it, diag.Pos{File: doc.File, Line: vi.Line, Column: vi.Column}, joinPath("flux", vi.Path), vi.Message))
		}
	}
	if w.ArgoCD.Kind != 0 {
		for _, vi := range v.Validate(schema.KindArgoCDConfig, &w.ArgoCD) {
			p.diags = append(p.diags, p.diagnostic(codeConfigInvalid, &it, diag.Pos{File: doc.File, Line: vi.Line, Column: vi.Column}, joinPath("argocd", vi.Path), vi.Message))
		}
	}
	for i, r := range w.Ignore {
		if r.Code == "" && r.Object == "" && r.Path == "" {
			p.report(codeConfigInvalid, &it, path{"ignore", i}, false, "ignore entry %d names no code, object or path, so it would silence everything; give at least one", i)
			continue
		}
		if r.Code != "" && !slices.ContainsFunc(table(), func(c Check) bool { return c.Code == r.Code }) {
			p.report(codeConfigInvalid, &it, path{"ignore", i, "code"}, false, "%q is not a keyhole code%s; see docs/checks.md", clip(r.Code), didYouMean(r.Code, codes()))
			continue
		}
		rule := ignoreRule{code: r.Code, object: r.Object}
		if r.Path != "" {
			rule.path = newPathPattern(r.Path, pathDir(doc.File))
		}
		p.config.ignore = append(p.config.ignore, rule)
	}
	extra := map[string]schema.Connector{}
	for i := range w.Catalog {
		n := &w.Catalog[i]
		if vs := v.Validate(schema.KindConnector, n); len(vs) > 0 {
			for _, vi := range vs {
				p.diags = append(p.diags, p.diagnostic(codeSchemaInvalid, &it, diag.Pos{File: doc.File, Line: vi.Line, Column: vi.Column}, joinPath(fmt.Sprintf("catalog[%d]", i), vi.Path), vi.Message))
			}
			continue
		}
		var c schema.Connector
		if err := n.Decode(&c); err != nil {
			p.report(codeConfigInvalid, &it, path{"catalog", i}, false, "cannot read catalog entry %d: %s", i, strings.TrimPrefix(err.Error(), "yaml: "))
			continue
		}
		for j, h := range c.Hosts {
			if h.Inject.Header != nil && config.HeaderForbidden(h.Inject.Header.Name) {
				p.report(codeHeaderForbidden, &it, path{"catalog", i, "hosts", j, "inject", "header", "name"}, false,
					"connector %s sets %s on %s, which the proxy never injects: it frames the request or is hop-by-hop, so the proxy would refuse the config of an agent's sandbox; name the header the API reads, e.g. Authorization", c.Name, h.Inject.Header.Name, h.Host)
			}
		}
		for k, r := range c.ReadOnly {
			at := path{"catalog", i, "readOnly", k}
			for x, prefix := range r.PathPrefixes {
				if why := prefixProblem(prefix, r.EncodedSlash); why != "" {
					p.report(codePathPrefixInvalid, &it, at.with("pathPrefixes", x), false, "path prefix %q of connector %s %s", clip(prefix), c.Name, why)
				}
			}
			for x, pattern := range r.PathPatterns {
				if err := config.CheckRulePath(pattern, true, r.EncodedSlash); err != nil {
					p.report(codePathPrefixInvalid, &it, at.with("pathPatterns", x), false, "path pattern of connector %s is refused by the proxy: %v", c.Name, err)
				}
			}
			if r.GraphQL != nil {
				checkCatalogGraphQL(p, &it, at, c.Name, r)
			}
			if r.MCP != nil {
				for _, pr := range mcpProblems(r.Methods, false, r.MCP) {
					p.report(codeMCPInvalid, &it, slices.Concat(at, pr.at), false, "read-only rule of connector %s %s", c.Name, pr.msg)
				}
			}
			for x, h := range r.Hosts {
				if !slices.ContainsFunc(c.Hosts, func(ch schema.ConnectorHost) bool { return ch.Host == h }) {
					p.report(codeConfigInvalid, &it, at.with("hosts", x), false,
						"read-only rule of connector %s names host %s, which is not one of the connector's hosts, so the rule holds nowhere; name one of its hosts or add %s to them", c.Name, h, h)
				}
			}
		}
		if c.ReadOnly != nil {
			for j, h := range c.Hosts {
				if rules, _ := c.ReadOnlyOn(h.Host); len(rules) == 0 {
					p.report(codeConfigInvalid, &it, path{"catalog", i, "hosts", j, "host"}, false,
						"no read-only rule of connector %s holds on %s, so a read-only sandbox could not be given the credential there; give a rule without hosts, or name %s in a rule's hosts", c.Name, h.Host, h.Host)
				}
			}
		}
		if slices.Contains(reservedEnvNames(), c.Env) {
			p.report(codePlaceholderReserved, &it, path{"catalog", i, "env"}, false,
				"%s is set by keyhole in every sandbox (proxy, CA-bundle and tool variables), so an agent's sandbox could not hold the placeholder of connector %s; choose another name", c.Env, c.Name)
		}
		extra[c.Name] = c
	}
	p.catalog = schema.MergeCatalog(p.catalog, extra)
}

// applyConfigIgnores marks the diagnostics keyhole.yaml silences: the
// loader's and the compiler's alike. A rule matches when each of its
// code, object and path that it gives matches.
func (p *pass) applyConfigIgnores(ds diag.List) {
	for i := range ds {
		d := &ds[i]
		if d.Suppressed != "" {
			continue
		}
		for _, r := range p.config.ignore {
			if (r.code == "" || r.code == d.Code) &&
				(r.object == "" || r.object == d.Object.String()) &&
				(r.path == nil || r.path.match(d.Pos.File)) {
				d.Suppressed = "config"
				if p.opts.OmitSuppressedMessages {
					d.Message = ""
				}
				break
			}
		}
	}
}

// joinPath appends a violation's path, which may be empty or start with
// an index, to a field path.
func joinPath(base, rest string) string {
	if rest == "" || strings.HasPrefix(rest, "[") {
		return base + rest
	}
	return base + "." + rest
}

func codes() []string {
	var cs []string
	for _, c := range table() {
		cs = append(cs, c.Code)
	}
	return cs
}

// checkCatalogGraphQL refuses what the proxy would refuse, or never
// match, in a catalog rule's GraphQL condition: a rule with a body
// condition as well (the proxy's config has one body condition per
// rule), and a rule that allows no POST, the method GraphQL requests
// with a body are sent with.
func checkCatalogGraphQL(p *pass, it *item, at path, connector string, r schema.Rule) {
	if len(r.Body) > 0 {
		p.report(codeConfigInvalid, it, at.with("graphql"), false,
			"read-only rule of connector %s sets both body and graphql, which the proxy refuses: a rule has one body condition; split it into two rules", connector)
	}
	if !slices.Contains(r.Methods, "POST") {
		p.report(codeConfigInvalid, it, at.with("graphql"), false,
			"read-only rule of connector %s has a graphql condition but does not allow POST, so it matches no GraphQL request; add POST to its methods", connector)
	}
	seen := map[string]bool{}
	for x, op := range r.GraphQL.Operations {
		if seen[op] {
			p.report(codeConfigInvalid, it, at.with("graphql", "operations", x), false, "%s is listed twice in this condition; remove the repeat", op)
		}
		seen[op] = true
	}
}
