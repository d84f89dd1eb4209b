package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/proxy/policy"
)

// An MCP server's answers to tools/list are cut to the tools a rule's MCP
// condition lists, so an agent is never offered a tool the proxy would
// refuse to call. The answer comes as one JSON body or as a server-sent
// event stream; either way each JSON-RPC response whose result holds a
// tools list is rewritten and everything else passes as it came.

// maxMCPAnswer bounds a JSON answer, or one event of a stream, that the
// proxy reads whole to filter; a longer one ends the exchange with an
// error rather than passing unfiltered.
const maxMCPAnswer = 16 << 20

// errMCPAnswer is wrapped when an answer cannot be filtered.
var errMCPAnswer = errors.New("the MCP server's answer cannot be filtered")

// mcpRefusalCode is the JSON-RPC error code of a refusal answered as
// JSON-RPC: in the range JSON-RPC 2.0 leaves to implementations.
const mcpRefusalCode = -32001

// writeMCPRefusal answers a refused request to an MCP endpoint: the
// reason's status and the refusal header, as every refusal, with a
// JSON-RPC error as the body, carrying the refused request's id where it
// held one request. MCP clients report such an answer as the request's
// error and keep the session; a plain-text answer ends it for some
// (the Go SDK's).
func writeMCPRefusal(w http.ResponseWriter, d policy.Decision, closeConn bool) {
	setRefusalHeader(w.Header(), d.Reason, "application/json", closeConn)
	id := json.RawMessage("null")
	if d.MCP.ID != nil {
		id = d.MCP.ID
	}
	msg, _ := json.Marshal("keyhole: " + string(d.Reason) + ": " + d.Message)
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"error":{"code":` + strconv.Itoa(mcpRefusalCode) + `,"message":`)
	b.Write(msg)
	b.WriteString(`,"data":{"reason":"` + string(d.Reason) + `"}}}` + "\n")
	w.WriteHeader(d.Reason.Status())
	w.Write(b.Bytes())
}

// filterMCPAnswer returns the body of res, read through body, with its
// tools lists cut to tools. A JSON answer is read whole and its header's
// length set to the result; an event stream is rewritten event by event.
// The request asked for no content coding, so none is to be undone.
func filterMCPAnswer(res *http.Response, body io.Reader, tools []string) (io.Reader, error) {
	if ce, ok := encoded(res.Header); ok {
		return nil, fmt.Errorf("%w: it came in the %q content coding", errMCPAnswer, policy.Clip(ce))
	}
	allowed := make(map[string]bool, len(tools))
	for _, t := range tools {
		allowed[t] = true
	}
	ct := res.Header.Get("Content-Type")
	if isEventStream(ct) {
		return newSSEFilter(body, allowed), nil
	}
	base, _, _ := strings.Cut(ct, ";")
	if base = strings.ToLower(strings.TrimSpace(base)); base != "application/json" && !strings.HasSuffix(base, "+json") {
		return body, nil
	}
	data, err := io.ReadAll(io.LimitReader(body, maxMCPAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("reading the upstream response body: %w", err)
	}
	if len(data) > maxMCPAnswer {
		return nil, fmt.Errorf("%w: it is longer than %d bytes", errMCPAnswer, maxMCPAnswer)
	}
	if out, changed := filterToolsJSON(data, allowed); changed {
		data = out
		res.Header.Set("Content-Length", strconv.Itoa(len(data)))
		res.ContentLength = int64(len(data))
	}
	return bytes.NewReader(data), nil
}

// filterToolsJSON cuts the tools lists in data, a JSON-RPC message or a
// batch of them, to allowed. It rewrites every response whose result
// (under any name a case-folding reader takes as result) holds a tools
// list (likewise): a tool stays when it has a name, every copy of which
// allowed holds. changed is false, and data untouched, when no message
// holds a tools list.
func filterToolsJSON(data []byte, allowed map[string]bool) ([]byte, bool) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return data, false
	}
	if trimmed[0] != '[' {
		return filterMessage(trimmed, allowed)
	}
	var elems []json.RawMessage
	if json.Unmarshal(trimmed, &elems) != nil {
		return data, false
	}
	changed := false
	for i, e := range elems {
		if out, ok := filterMessage(e, allowed); ok {
			elems[i], changed = out, true
		}
	}
	if !changed {
		return data, false
	}
	out, err := json.Marshal(elems)
	if err != nil {
		return data, false
	}
	return out, true
}

// filterMessage rewrites one message's results' tools lists.
func filterMessage(msg json.RawMessage, allowed map[string]bool) ([]byte, bool) {
	return rewriteFields(msg, "result", func(result json.RawMessage) (json.RawMessage, bool) {
		return rewriteFields(result, "tools", func(tools json.RawMessage) (json.RawMessage, bool) {
			return filterTools(tools, allowed), true
		})
	})
}

// member is one name and value of a JSON object, in order.
type member struct {
	name  string
	value json.RawMessage
}

// rewriteFields rewrites, with f, every member of the object obj whose
// name a case-folding reader could take as name, and reports whether f
// changed one. The object is written again with its members in order,
// duplicates kept, each rewritten: whichever copy a reader picks, it
// reads a rewritten one.
func rewriteFields(obj json.RawMessage, name string, f func(json.RawMessage) (json.RawMessage, bool)) ([]byte, bool) {
	members, ok := objectMembers(obj)
	if !ok {
		return obj, false
	}
	changed := false
	for i, m := range members {
		if !sameField(m.name, name) {
			continue
		}
		if out, ok := f(m.value); ok {
			members[i].value, changed = out, true
		}
	}
	if !changed {
		return obj, false
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes(), true
}

// objectMembers reads a JSON object's members in order, duplicates
// included; ok is false when obj is not one JSON object.
func objectMembers(obj json.RawMessage) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, member{name: name, value: v})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return out, true
}

// sameField reports whether a reader could take the member name got as
// want: equal once '_' and '-' are dropped and case is folded, as
// Unicode folds it (Go's encoding/json reads "toolſ" as tools).
func sameField(got, want string) bool {
	if got == want {
		return true
	}
	return strings.EqualFold(strings.NewReplacer("_", "", "-", "").Replace(got), want)
}

// filterTools keeps the tools of a tools list whose names allowed holds;
// what is not a list of tools becomes an empty list.
func filterTools(tools json.RawMessage, allowed map[string]bool) json.RawMessage {
	var list []json.RawMessage
	if json.Unmarshal(tools, &list) != nil {
		return json.RawMessage("[]")
	}
	kept := make([]json.RawMessage, 0, len(list))
	for _, t := range list {
		members, ok := objectMembers(t)
		if !ok {
			continue
		}
		named, keep := false, true
		for _, m := range members {
			if !sameField(m.name, "name") {
				continue
			}
			var name string
			if json.Unmarshal(m.value, &name) != nil || !allowed[name] {
				keep = false
			}
			named = true
		}
		if named && keep {
			kept = append(kept, t)
		}
	}
	out, err := json.Marshal(kept)
	if err != nil {
		return json.RawMessage("[]")
	}
	return out
}

// sseFilter rewrites an event stream's events whose data is a JSON-RPC
// message holding a tools list (filterToolsJSON), passing every other
// byte as it came. Lines other than data lines (event, id, retry,
// comments) go on as soon as they end; an event's lines from its first
// data line on are held until the event ends, as a client dispatches it
// only then. A rewritten event keeps its other lines, then has its data
// on one line.
type sseFilter struct {
	src     io.Reader
	allowed map[string]bool
	buf     []byte
	in      []byte // read, not yet a whole line
	scanned int    // how much of in holds no line end
	out     []byte // ready for the reader
	held    []byte // the current event's lines from its first data line, as sent
	other   []byte // those of them that are not data lines
	data    []byte // their values, joined by '\n'
	hasData bool
	// skipLF is set after a line ended in '\r' at the end of what was
	// read: a '\n' next ends the same line.
	skipLF   bool
	lastHeld bool
	started  bool
	err      error
}

func newSSEFilter(src io.Reader, allowed map[string]bool) *sseFilter {
	return &sseFilter{src: src, allowed: allowed, buf: make([]byte, 32<<10)}
}

func (f *sseFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		n, err := f.src.Read(f.buf)
		f.in = append(f.in, f.buf[:n]...)
		if perr := f.lines(); perr != nil {
			f.err = perr
			continue
		}
		if err == io.EOF {
			f.end()
		}
		if err != nil {
			f.err = err
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	if len(f.out) == 0 {
		f.out = f.out[:0:0]
	}
	return n, nil
}

// lines handles each whole line of f.in.
func (f *sseFilter) lines() error {
	if !f.started {
		// A byte order mark opens the stream, and clients drop it.
		bom := []byte("\xef\xbb\xbf")
		if len(f.in) < len(bom) && bytes.HasPrefix(bom, f.in) {
			return nil
		}
		f.started = true
		if bytes.HasPrefix(f.in, bom) {
			f.out = append(f.out, bom...)
			f.in = f.in[len(bom):]
		}
	}
	in := f.in
	for len(f.in) > 0 {
		if f.skipLF {
			f.skipLF = false
			if f.in[0] == '\n' {
				if f.lastHeld {
					f.held = append(f.held, '\n')
				} else {
					f.out = append(f.out, '\n')
				}
				f.in = f.in[1:]
				continue
			}
		}
		i := bytes.IndexAny(f.in[f.scanned:], "\r\n")
		if i < 0 {
			if len(f.in) > maxMCPAnswer {
				return fmt.Errorf("%w: an event stream line is longer than %d bytes", errMCPAnswer, maxMCPAnswer)
			}
			f.scanned = len(f.in)
			break
		}
		i += f.scanned
		f.scanned = 0
		end := i + 1
		if f.in[i] == '\r' {
			if i+1 < len(f.in) {
				if f.in[i+1] == '\n' {
					end++
				}
			} else {
				f.skipLF = true
			}
		}
		if err := f.line(f.in[:i], f.in[:end]); err != nil {
			return err
		}
		f.in = f.in[end:]
	}
	if len(f.in) < len(in) {
		// Keep the partial line at the start of its buffer.
		f.in = append(in[:0], f.in...)
	}
	return nil
}

// line handles one line (without its end) and whole (with it).
func (f *sseFilter) line(line, whole []byte) error {
	if len(line) == 0 {
		f.dispatch()
		f.out = append(f.out, whole...)
		f.lastHeld = false
		return nil
	}
	name, value, colon := bytes.Cut(line, []byte(":"))
	if string(name) != "data" {
		if f.hasData {
			// After a data line of its event: held with it, so the
			// bytes keep their order.
			f.held = append(f.held, whole...)
			f.other = append(f.other, whole...)
			f.lastHeld = true
			return nil
		}
		f.out = append(f.out, whole...)
		f.lastHeld = false
		return nil
	}
	if colon {
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	if f.hasData {
		f.data = append(f.data, '\n')
	}
	f.data = append(f.data, value...)
	f.hasData = true
	f.held = append(f.held, whole...)
	f.lastHeld = true
	if len(f.held) > maxMCPAnswer {
		return fmt.Errorf("%w: an event is longer than %d bytes", errMCPAnswer, maxMCPAnswer)
	}
	return nil
}

// dispatch passes the event's data lines on, rewritten when they hold a
// tools list.
func (f *sseFilter) dispatch() {
	if f.hasData {
		if out, changed := filterToolsJSON(f.data, f.allowed); changed {
			f.out = append(f.out, f.other...)
			f.out = append(f.out, "data: "...)
			f.out = append(f.out, out...)
			f.out = append(f.out, '\n')
		} else {
			f.out = append(f.out, f.held...)
		}
	}
	f.held, f.other, f.data, f.hasData = f.held[:0], f.other[:0], f.data[:0], false
}

// end passes on what the stream ended with: a last line without its end
// and an event without the blank line that dispatches it, filtered all
// the same (a lenient client may dispatch it).
func (f *sseFilter) end() {
	if len(f.in) > 0 {
		if err := f.line(f.in, f.in); err != nil {
			f.err = err
			return
		}
		f.in = nil
	}
	f.dispatch()
}
