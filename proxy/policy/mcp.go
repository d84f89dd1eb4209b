package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
)

// An MCP condition (config.MCP) is decided on what a Model Context
// Protocol client POSTs to a server's streamable HTTP endpoint: one
// JSON-RPC 2.0 message, or a batch (a JSON array) of them. The body is
// read as CheckBody reads one (declared as uncompressed UTF-8 JSON, one
// JSON value, printable ASCII names, no two names one field to a reader
// that folds case) and each message is held to the condition; a batch is
// allowed only when every message of it is.

// mcpMessage is what an MCP condition decides on in one JSON-RPC
// message.
type mcpMessage struct {
	// id is the message's id as sent (JSON), nil for a notification.
	id json.RawMessage
	// method is a request's or notification's method, "" for a
	// response.
	method string
	// tool is a tools/call's tool, and args its arguments object as
	// sent (nil when absent).
	tool string
	args json.RawMessage
	// uri is a resources/read's URI.
	uri string
}

// The top-level fields of a JSON-RPC message: a request or notification
// has jsonrpc, method, params and (a request) id; a response jsonrpc, id
// and one of result and error.
var mcpFields = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// CheckMCP reports whether b, the body of a POST, satisfies the MCP
// condition m. It returns nil when it does, and an error wrapping ErrBody
// saying why not. What two readers could take differently is refused
// rather than judged:
//
//   - the body is read as CheckBody reads one; a batch is a non-empty
//     array of messages, none of them an array;
//   - a message's fields are those of JSON-RPC 2.0, spelled exactly, and
//     jsonrpc is "2.0";
//   - a request's id is a string or an integer within 64 bits: MCP
//     forbids null, and readers round fractions and large numbers
//     differently, which would tie an answer to another request;
//   - a method is compared byte for byte with the condition's, as MCP
//     servers dispatch on it;
//   - a tools/call's params hold name, arguments, _meta and task only,
//     name a string the condition lists and arguments an object, held to
//     the tool's argument condition as CheckBody holds a body;
//   - a resources/read's params hold uri (a string under one of the
//     condition's prefixes) and _meta only;
//   - a message holding result or error is a response, allowed only
//     where m.Responses says so.
func CheckMCP(m config.MCP, b Body) error {
	msgs, err := readMCP(b)
	if err != nil {
		return err
	}
	for i, msg := range msgs {
		if err := checkMCPMessage(m, msg); err != nil {
			if len(msgs) > 1 {
				return fmt.Errorf("%w (message %d of the batch)", err, i+1)
			}
			return err
		}
	}
	return nil
}

// readMCP reads the JSON-RPC messages of an MCP POST body.
func readMCP(b Body) ([]mcpMessage, error) {
	if err := checkJSONBody(b); err != nil {
		return nil, err
	}
	if firstByte(b.Data) != '[' {
		msg, err := readMCPMessage(b.Data)
		if err != nil {
			return nil, err
		}
		return []mcpMessage{msg}, nil
	}
	elems, err := jsonArray(b.Data, "JSON-RPC messages")
	if err != nil {
		return nil, err
	}
	msgs := make([]mcpMessage, 0, len(elems))
	for i, raw := range elems {
		if firstByte(raw) == '[' {
			return nil, fmt.Errorf("%w: message %d of the batch is itself a batch", ErrBody, i+1)
		}
		msg, err := readMCPMessage(raw)
		if err != nil {
			return nil, fmt.Errorf("%w (message %d of the batch)", err, i+1)
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// readMCPMessage reads one JSON-RPC message, refusing what readers could
// take differently (CheckMCP).
func readMCPMessage(data []byte) (mcpMessage, error) {
	var msg mcpMessage
	fields, err := topLevelFields(data)
	if err != nil {
		if err == errNotObject {
			return msg, fmt.Errorf("%w: the body is not a JSON-RPC message (one JSON object)", ErrBody)
		}
		return msg, err
	}
	if err := exactFields(fields, mcpFields, "a JSON-RPC message's"); err != nil {
		return msg, err
	}
	if v, ok := fields["jsonrpc"]; !ok || !v.isString || v.value != "2.0" {
		return msg, fmt.Errorf("%w: the message's jsonrpc is not \"2.0\"", ErrBody)
	}
	if f, ok := fields["id"]; ok {
		if err := checkMCPID(f.raw); err != nil {
			return msg, err
		}
		msg.id = f.raw
	}
	_, hasResult := fields["result"]
	_, hasError := fields["error"]
	f, isCall := fields["method"]
	switch {
	case isCall && (hasResult || hasError):
		return msg, fmt.Errorf("%w: the message has a method and a result or error", ErrBody)
	case !isCall && hasResult == hasError:
		return msg, fmt.Errorf("%w: the message has no method, and not exactly one of result and error", ErrBody)
	case !isCall && msg.id == nil:
		return msg, fmt.Errorf("%w: the message is a response without an id", ErrBody)
	case !isCall:
		if _, ok := fields["params"]; ok {
			return msg, fmt.Errorf("%w: the message is a response with params", ErrBody)
		}
		return msg, nil
	case !f.isString || f.value == "":
		return msg, fmt.Errorf("%w: the message's method is not a non-empty string", ErrBody)
	}
	msg.method = f.value
	params, hasParams := fields["params"]
	if hasParams && !jsonObjectOrNull(params.raw) || hasParams && isJSONNull(params.raw) {
		return msg, fmt.Errorf("%w: the %s message's params are not an object", ErrBody, Clip(msg.method))
	}
	switch msg.method {
	case config.MCPToolsCall:
		p, err := mcpParams(params.raw, hasParams, msg.method, []string{"name", "arguments"})
		if err != nil {
			return msg, err
		}
		name, ok := p["name"]
		if !ok || !name.isString {
			return msg, fmt.Errorf("%w: the tools/call message's params.name is not a string", ErrBody)
		}
		msg.tool = name.value
		if a, ok := p["arguments"]; ok {
			if a.raw[0] != '{' {
				return msg, fmt.Errorf("%w: the tools/call message's params.arguments is not an object", ErrBody)
			}
			msg.args = a.raw
		}
	case config.MCPResourcesRead:
		p, err := mcpParams(params.raw, hasParams, msg.method, []string{"uri"})
		if err != nil {
			return msg, err
		}
		uri, ok := p["uri"]
		if !ok || !uri.isString {
			return msg, fmt.Errorf("%w: the resources/read message's params.uri is not a string", ErrBody)
		}
		msg.uri = uri.value
	}
	return msg, nil
}

// mcpParams reads the params object of a message whose params the
// condition decides on: the names it decides on (known) spelled exactly,
// and no other name a reader could take as one of them. Other names
// (_meta, task, inputResponses) are left to the server.
func mcpParams(raw json.RawMessage, present bool, method string, known []string) (map[string]field, error) {
	if !present {
		return nil, fmt.Errorf("%w: the %s message has no params", ErrBody, method)
	}
	p, err := topLevelFields(raw)
	if err != nil {
		if err == errNotObject {
			return nil, fmt.Errorf("%w: the %s message's params are not one JSON object", ErrBody, method)
		}
		return nil, fmt.Errorf("%w (in the %s message's params)", err, method)
	}
	for _, k := range known {
		if f, ok := p[fieldKey(k)]; ok && f.name != k {
			return nil, fmt.Errorf("%w: the %s message's params spell the field %q as %q; send it exactly as %q", ErrBody, method, k, Clip(f.name), k)
		}
	}
	out := make(map[string]field, len(known))
	for _, k := range known {
		if f, ok := p[fieldKey(k)]; ok {
			out[k] = f
		}
	}
	return out, nil
}

// exactFields refuses a field (from topLevelFields) whose name is not
// one of known spelled exactly; fields are then keyed by their name.
func exactFields(fields map[string]field, known []string, whose string) error {
	// In key order, so the refusal is the same every time.
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		f := fields[key]
		if slices.Contains(known, f.name) {
			continue
		}
		want := ""
		if i := slices.IndexFunc(known, func(n string) bool { return fieldKey(n) == key }); i >= 0 {
			want = fmt.Sprintf("; send it exactly as %q", known[i])
		}
		return fmt.Errorf("%w: the body has a field %q, which is not one of %s (%s)%s", ErrBody, Clip(f.name), whose, strings.Join(known, ", "), want)
	}
	// Every name is one of known, spelled exactly, and fieldKey keeps
	// these apart: re-key by name.
	for key, f := range fields {
		if key != f.name {
			delete(fields, key)
			fields[f.name] = f
		}
	}
	return nil
}

// checkMCPID refuses an id that is neither a string nor an integer that
// fits in 64 bits, written plainly (no fraction, no exponent).
func checkMCPID(raw json.RawMessage) error {
	switch {
	case len(raw) > 0 && raw[0] == '"':
		return nil // topLevelFields decoded it: a valid string
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		if _, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: the message's id is neither a string nor an integer of at most 64 bits", ErrBody)
}

// checkMCPMessage holds one message to m.
func checkMCPMessage(m config.MCP, msg mcpMessage) error {
	if msg.method == "" {
		if !m.Responses {
			return fmt.Errorf("%w: the message is a JSON-RPC response, which the rule does not allow (responses: true allows the client's answers to the server's requests)", ErrBody)
		}
		return nil
	}
	if !slices.Contains(m.Methods, msg.method) {
		return fmt.Errorf("%w: the MCP method %q is not one the rule allows (%s)", ErrBody, Clip(msg.method), strings.Join(m.Methods, ", "))
	}
	switch msg.method {
	case config.MCPToolsCall:
		if m.Tools != nil && !slices.Contains(m.Tools, msg.tool) {
			return fmt.Errorf("%w: the tool %q is not one the rule allows", ErrBody, Clip(msg.tool))
		}
		if want := m.Arguments[msg.tool]; len(want) > 0 {
			if msg.args == nil {
				return fmt.Errorf("%w: the tool %q is called without arguments, and the rule holds its arguments to a condition", ErrBody, Clip(msg.tool))
			}
			if err := matchFields(want, msg.args); err != nil {
				return fmt.Errorf("%w (in the arguments of the tool %q)", err, Clip(msg.tool))
			}
		}
	case config.MCPResourcesRead:
		if m.Resources != nil && !slices.ContainsFunc(m.Resources, func(p string) bool { return strings.HasPrefix(msg.uri, p) }) {
			return fmt.Errorf("%w: the resource %q is under no prefix the rule allows", ErrBody, Clip(msg.uri))
		}
	}
	return nil
}

// MCPRequestID returns the id of the one JSON-RPC request b holds, as
// sent, for a refusal to answer it as JSON-RPC; ok is false for a batch,
// a notification or a body it cannot read.
func MCPRequestID(b Body) (json.RawMessage, bool) {
	if firstByte(b.Data) == '[' {
		return nil, false
	}
	b.ContentType = []string{"application/json"} // a refusal for a bad type still answers the request
	b.ContentEncoding = nil
	msgs, err := readMCP(b)
	if err != nil || len(msgs) != 1 || msgs[0].id == nil || msgs[0].method == "" {
		return nil, false
	}
	return msgs[0].id, true
}

// checkMCPRule holds a request to a rule's MCP condition: a POST's body
// to m; any other method (GET opening the server's event stream, DELETE
// ending a session) carries no body.
func checkMCPRule(m config.MCP, method string, b Body) error {
	if method == "POST" {
		return CheckMCP(m, b)
	}
	if len(b.Data) > 0 || !b.Complete {
		return fmt.Errorf("%w: a %s to an MCP endpoint has a body, which no MCP client sends and the rule's MCP condition cannot read", ErrBody, Clip(method))
	}
	return nil
}

// MCPExchange is what the proxy applies to a request to an MCP endpoint,
// decided with it.
type MCPExchange struct {
	// ID is the id of the one JSON-RPC request a refused POST held, as
	// sent, nil for anything else: the refusal answers it as a JSON-RPC
	// error, which MCP clients report as the call's error.
	ID json.RawMessage
	// Filter is set when answers to tools/list must list only Tools
	// (sorted): every rule that lets the request through has an MCP
	// condition listing tools.
	Filter bool
	Tools  []string
	// Calls are the tools the POST's tools/call messages name, sorted,
	// for the request's log line; nil where it names none or the body
	// cannot be read.
	Calls []string
}

// withMCP adds to d, the decision on req read in a tunnel, what the
// proxy applies where a rule with an MCP condition covers the request's
// method and path.
func (p *Policy) withMCP(d Decision, req RequestInfo) Decision {
	h := p.hosts[d.Host]
	if h == nil || !h.mcp {
		return d
	}
	path, err := targetPath(req.Target, true)
	if err != nil {
		return d
	}
	covering := false
	filter, tools := true, map[string]bool{}
	for _, r := range h.Rules {
		if !slices.Contains(r.Methods, req.Method) || !pathCovered(r, decodeSlashes(path)) && !pathCovered(r, path) {
			continue
		}
		covering = covering || r.MCP != nil
		if r.MCP == nil || r.MCP.Tools == nil {
			filter = false
			continue
		}
		for _, t := range r.MCP.Tools {
			tools[t] = true
		}
	}
	if !covering {
		return d
	}
	x := &MCPExchange{}
	if req.Method == "POST" {
		x.Calls, _ = MCPToolsCalled(Body{Data: req.Body, Complete: req.BodyComplete, ContentType: req.ContentType, ContentEncoding: req.ContentEncoding})
	}
	if !d.Allowed() {
		if req.Method == "POST" {
			x.ID, _ = MCPRequestID(Body{Data: req.Body, Complete: req.BodyComplete})
		}
	} else if filter {
		x.Filter, x.Tools = true, slices.Sorted(maps.Keys(tools))
	}
	d.MCP = x
	return d
}

// MCPToolsCalled returns the tools the tools/call messages of b, an MCP
// POST body, call, read as CheckMCP reads them (sorted, each once); it
// returns an error wrapping ErrBody where CheckMCP would refuse the body
// whatever the condition.
func MCPToolsCalled(b Body) ([]string, error) {
	msgs, err := readMCP(b)
	if err != nil {
		return nil, err
	}
	var tools []string
	for _, m := range msgs {
		if m.method == config.MCPToolsCall && !slices.Contains(tools, m.tool) {
			tools = append(tools, m.tool)
		}
	}
	slices.Sort(tools)
	return tools, nil
}
