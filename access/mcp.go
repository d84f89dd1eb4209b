package access

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
)

// mcpClasses returns one MCP POST body per class of JSON-RPC message the
// rules' MCP conditions tell apart, none when no rule has one. A
// condition decides a message by its method (each named, and one no
// condition names), a tools/call by its tool (each named, and another)
// and by its arguments as a JSON body condition reads them (the classes
// of jsonBodyClasses over the fields the tool's conditions name), a
// resources/read by its URI (each prefix named, and one under none),
// and a response by being one. A batch passes a rule only when each of
// its messages does, so it reaches nothing its messages do not, and is
// left out. Only a JSON condition naming a field of a JSON-RPC message
// could match an MCP body too; such rules beside an MCP condition are
// beyond the comparison (ok false).
func mcpClasses(rules []config.Rule) (bodies [][]byte, ok bool) {
	methods, tools, prefixes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	args := map[string][]config.Rule{}
	has := false
	for _, r := range rules {
		m := r.MCP
		if m == nil {
			continue
		}
		has = true
		for _, meth := range m.Methods {
			methods[meth] = true
		}
		for _, t := range m.Tools {
			tools[t] = true
		}
		for t, cond := range m.Arguments {
			tools[t] = true
			args[t] = append(args[t], config.Rule{Body: cond})
		}
		for _, p := range m.Resources {
			prefixes[p] = true
		}
	}
	if !has {
		return nil, true
	}
	for _, r := range rules {
		for field := range r.Body {
			for _, f := range []string{"jsonrpc", "id", "method", "params", "result", "error"} {
				if strings.EqualFold(strings.NewReplacer("_", "", "-", "").Replace(field), f) {
					return nil, false
				}
			}
		}
	}
	msg := func(method string, params map[string]any) []byte {
		m := map[string]any{"jsonrpc": "2.0", "method": method}
		if !strings.HasPrefix(method, "notifications/") {
			m["id"] = 1
		}
		if params != nil {
			m["params"] = params
		}
		b, _ := json.Marshal(m) // maps of strings, numbers and raw JSON always marshal, keys sorted
		return b
	}
	names := slices.Sorted(maps.Keys(methods))
	names = append(names, fresh(config.MCPMethods(), methods, "other/method"))
	for _, meth := range names {
		switch meth {
		case config.MCPToolsCall:
			toolNames := slices.Sorted(maps.Keys(tools))
			toolNames = append(toolNames, fresh([]string{"other_tool", "x"}, tools, "other_tool"))
			for _, t := range toolNames {
				argBodies, ok := jsonBodyClasses(args[t])
				if !ok {
					return nil, false
				}
				for _, a := range argBodies {
					p := map[string]any{"name": t}
					if a != nil {
						p["arguments"] = json.RawMessage(a)
					} else {
						p["arguments"] = map[string]any{}
					}
					bodies = append(bodies, msg(meth, p))
				}
			}
		case config.MCPResourcesRead:
			uris := slices.Sorted(maps.Keys(prefixes))
			uris = append(uris, fresh([]string{"other:", "x:"}, prefixes, "other:"))
			for _, u := range uris {
				bodies = append(bodies, msg(meth, map[string]any{"uri": u}))
			}
		default:
			bodies = append(bodies, msg(meth, nil))
		}
		if len(bodies) > MaxBodies {
			return nil, false
		}
	}
	bodies = append(bodies, []byte(`{"id":1,"jsonrpc":"2.0","result":{}}`))
	return bodies, true
}
