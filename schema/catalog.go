package schema

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

//go:embed catalog.json
var catalogSource []byte

// Connector is one entry of the connector catalog: what a connector named
// in agent.yaml means. The built-in entries come from catalog.cue; a
// repository's extension decodes into the same types (JSON or YAML) after
// Validate(KindConnector, ...) has accepted it.
type Connector struct {
	Name string `json:"name" yaml:"name"`
	// Env is the sandbox variable that holds the placeholder, such as
	// GITHUB_TOKEN.
	Env   string          `json:"env" yaml:"env"`
	Hosts []ConnectorHost `json:"hosts" yaml:"hosts"`
	// ReadOnly is the allow-list a read-only connector's requests must
	// match. Nil means the API cannot tell reads from writes by method,
	// path and body (a GraphQL API, say), so read-only cannot be enforced.
	ReadOnly []Rule `json:"readOnly,omitempty" yaml:"readOnly,omitempty"`
	// Tools are the tools the connector offers an agent.
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
}

// Rule is a proxy rule as the catalog writes it. It has the fields of
// proxy/config.Rule (the compiler converts it field by field); it is its
// own type because the catalog is also decoded from YAML, and the proxy's
// wire type has only JSON names.
type Rule struct {
	Methods      []string `json:"methods" yaml:"methods"`
	PathPrefixes []string `json:"pathPrefixes,omitempty" yaml:"pathPrefixes,omitempty"`
	PathPatterns []string `json:"pathPatterns,omitempty" yaml:"pathPatterns,omitempty"`
	// EncodedSlash is proxy/config.Rule's: "segment" reads an encoded
	// '/' in a request's path as part of its segment.
	EncodedSlash string              `json:"encodedSlash,omitempty" yaml:"encodedSlash,omitempty"`
	Body         map[string][]string `json:"body,omitempty" yaml:"body,omitempty"`
	GraphQL      *GraphQL            `json:"graphql,omitempty" yaml:"graphql,omitempty"`
	MCP          *MCP                `json:"mcp,omitempty" yaml:"mcp,omitempty"`
	// Hosts, when set, are the connector's hosts the rule holds on; a
	// rule without them holds on each. It is the catalog's own field, not
	// the proxy's: the compiler gives each host only the rules that hold
	// on it.
	Hosts []string `json:"hosts,omitempty" yaml:"hosts,omitempty"`
}

// ReadOnlyOn returns the read-only rules that hold on host, and for each
// its index in c.ReadOnly, for messages that name a catalog rule. It is
// empty when none does; the caller must then not send the credential to
// host, since a proxy host without rules allows every request.
func (c Connector) ReadOnlyOn(host string) (rules []Rule, index []int) {
	for i, r := range c.ReadOnly {
		if len(r.Hosts) == 0 || slices.Contains(r.Hosts, host) {
			rules = append(rules, r)
			index = append(index, i)
		}
	}
	return rules, index
}

// GraphQL is a rule's GraphQL body condition, as proxy/config.GraphQL.
type GraphQL struct {
	Operations       []string `json:"operations" yaml:"operations"`
	PersistedQueries bool     `json:"persistedQueries,omitempty" yaml:"persistedQueries,omitempty"`
	Batches          bool     `json:"batches,omitempty" yaml:"batches,omitempty"`
}

// MCP is a rule's MCP condition, as proxy/config.MCP.
type MCP struct {
	Methods   []string                       `json:"methods" yaml:"methods"`
	Tools     []string                       `json:"tools,omitempty" yaml:"tools,omitempty"`
	Arguments map[string]map[string][]string `json:"arguments,omitempty" yaml:"arguments,omitempty"`
	Resources []string                       `json:"resources,omitempty" yaml:"resources,omitempty"`
	Responses bool                           `json:"responses,omitempty" yaml:"responses,omitempty"`
}

// ConnectorHost is one host the connector's credential may be sent to.
type ConnectorHost struct {
	Host   string          `json:"host" yaml:"host"`
	Inject ConnectorInject `json:"inject" yaml:"inject"`
}

// ConnectorInject says how clients present the credential on a host: in a
// header, as the basic-auth password, or (gitlab.com) either. At least one
// is set. They say what a client is expected to send, for docs, explain
// and the placeholder's shape, and where the proxy substitutes it: only in
// the header named here, and in Authorization when basic is set.
type ConnectorInject struct {
	Header *ConnectorHeader `json:"header,omitempty" yaml:"header,omitempty"`
	Basic  *ConnectorBasic  `json:"basic,omitempty" yaml:"basic,omitempty"`
}

// ConnectorHeader is a header whose value is ValuePrefix followed by the
// credential, e.g. Authorization: Bearer <token>.
type ConnectorHeader struct {
	Name        string `json:"name" yaml:"name"`
	ValuePrefix string `json:"valuePrefix,omitempty" yaml:"valuePrefix,omitempty"`
}

// ConnectorBasic is basic auth with a fixed user name and the credential
// as the password, as git sends it.
type ConnectorBasic struct {
	Username string `json:"username" yaml:"username"`
}

// Catalog returns the built-in connector catalog, keyed by name. Each call
// decodes afresh, so callers may modify what they get.
func Catalog() (map[string]Connector, error) {
	var file struct {
		Connectors map[string]Connector `json:"connectors"`
	}
	if err := json.Unmarshal(catalogSource, &file); err != nil {
		return nil, fmt.Errorf("decoding the built-in connector catalog: %w", err)
	}
	for name, c := range file.Connectors {
		if c.Name != name {
			return nil, fmt.Errorf("built-in connector catalog: entry %q is named %q", name, c.Name)
		}
	}
	return file.Connectors, nil
}

// MergeCatalog returns base with extra's entries added. An entry of extra
// replaces base's entry of the same name whole, not field by field, so an
// override never inherits hosts or rules it did not write. Neither input
// is modified.
func MergeCatalog(base, extra map[string]Connector) map[string]Connector {
	out := make(map[string]Connector, len(base)+len(extra))
	maps.Copy(out, base)
	maps.Copy(out, extra)
	return out
}
