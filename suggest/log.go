// Package suggest turns the egress proxy's refusals into the smallest
// edits of a repository's Connection rules that would allow them: it
// reads the proxy's request log, groups the refusals, places each edit at
// the rule's position in the Connection's YAML, and weighs it with the
// access engine diff uses and with the ceiling. It prints nothing: the
// CLI prints what it returns.
package suggest

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// MaxLine is the longest log line read; a longer one is skipped and
// counted, never buffered whole.
const MaxLine = 64 << 10

// Refusal is one refused request of the log: the fields suggest reads.
// The log carries no header, query or body; Path is cut at "?" or "#"
// all the same, so a hand-made line cannot make suggest print a query.
type Refusal struct {
	Sandbox, Host, Method, Path, Reason, Connection string
	// MCPTools are the MCP tools the request called, as its line names
	// them (mcpTools), on a request to an MCP endpoint.
	MCPTools []string
}

// Log is what ReadLog found.
type Log struct {
	// Refusals are the refused requests, in log order.
	Refusals []Refusal
	// Requests counts the proxy's request lines, refused or not.
	Requests int
	// Skipped counts the lines that are not request lines (other events,
	// other programs' output, malformed or over-long lines).
	Skipped int
}

// requestWire is a request line's JSON.
type requestWire struct {
	Msg        string `json:"msg"`
	Sandbox    string `json:"sandbox"`
	Host       string `json:"host"`
	Method     string `json:"method"`
	Path       string `json:"path"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason"`
	Connection string `json:"connection"`
	MCPTools   string `json:"mcpTools"`
	Status     *int   `json:"status"`
}

// ErrRead marks a log that could not be read (not one that holds bad
// lines: those are skipped and counted).
var ErrRead = errors.New("cannot read the log")

// ReadLog reads the proxy's JSON request log: lines as keyhole-proxy
// writes them, also with a prefix before the JSON (kubectl logs
// --prefix, --timestamps). Lines that are not request lines are skipped
// and counted; only a failing reader is an error.
func ReadLog(r io.Reader) (*Log, error) {
	br := bufio.NewReaderSize(r, MaxLine)
	l := &Log{}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			l.Skipped++
			for errors.Is(err, bufio.ErrBufferFull) { // the rest of the long line
				_, err = br.ReadSlice('\n')
			}
			if err == io.EOF {
				return l, nil
			}
			if err != nil {
				return l, fmt.Errorf("%w: %v", ErrRead, err)
			}
			continue
		}
		if len(bytes.TrimSpace(line)) > 0 {
			l.add(line)
		}
		if err == io.EOF {
			return l, nil
		}
		if err != nil {
			return l, fmt.Errorf("%w: %v", ErrRead, err)
		}
	}
}

func (l *Log) add(line []byte) {
	i := bytes.Index(line, []byte(`{"time":`))
	var w requestWire
	if i < 0 || json.Unmarshal(bytes.TrimSpace(line[i:]), &w) != nil ||
		w.Msg != "request" || w.Decision == "" || w.Method == "" || w.Status == nil {
		l.Skipped++
		return
	}
	l.Requests++
	// An audited request (audit mode forwarded it without the
	// credential) is one the rules refuse: it wants the same edit.
	if w.Decision != "refuse" && w.Decision != "audit" {
		return
	}
	p := w.Path
	if j := strings.IndexAny(p, "?#"); j >= 0 {
		p = p[:j]
	}
	r := Refusal{Sandbox: w.Sandbox, Host: w.Host, Method: w.Method, Path: p, Reason: w.Reason, Connection: w.Connection}
	if w.MCPTools != "" {
		r.MCPTools = strings.Split(w.MCPTools, ",")
	}
	l.Refusals = append(l.Refusals, r)
}

// Group is the refusals of one sandbox, host, reason and method.
type Group struct {
	Sandbox, Host, Reason, Method string
	// Connection is the Connection the log names, when it names one.
	Connection string
	// Paths are the distinct refused paths, sorted.
	Paths []string
	// Count is how many requests were refused.
	Count int
	// MCPTools are the distinct MCP tools the refused requests called,
	// sorted.
	MCPTools []string
}

// Groups gathers the refusals, sorted by sandbox, host, reason, method.
func (l *Log) Groups() []Group {
	type key struct{ sandbox, host, reason, method string }
	m := map[key]*Group{}
	seen := map[key]map[string]bool{}
	for _, r := range l.Refusals {
		k := key{r.Sandbox, r.Host, r.Reason, r.Method}
		g := m[k]
		if g == nil {
			g = &Group{Sandbox: r.Sandbox, Host: r.Host, Reason: r.Reason, Method: r.Method}
			m[k] = g
			seen[k] = map[string]bool{}
		}
		g.Count++
		if g.Connection == "" {
			g.Connection = r.Connection
		}
		if !seen[k][r.Path] {
			seen[k][r.Path] = true
			g.Paths = append(g.Paths, r.Path)
		}
		for _, t := range r.MCPTools {
			if !slices.Contains(g.MCPTools, t) {
				g.MCPTools = append(g.MCPTools, t)
			}
		}
	}
	var gs []Group
	for _, g := range m {
		slices.Sort(g.Paths)
		slices.Sort(g.MCPTools)
		gs = append(gs, *g)
	}
	slices.SortFunc(gs, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Sandbox, b.Sandbox), cmp.Compare(a.Host, b.Host),
			cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Method, b.Method))
	})
	return gs
}
