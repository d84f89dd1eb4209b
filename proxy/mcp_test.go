package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"keyhole.dev/keyhole/proxy/policy"
)

var readOnly = map[string]bool{"get_issue": true, "list_issues": true}

// toolsAnswer is a tools/list answer listing names, with a cursor.
func toolsAnswer(id string, names ...string) string {
	var tools []string
	for _, n := range names {
		tools = append(tools, `{"name":"`+n+`","inputSchema":{"type":"object"}}`)
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[` + strings.Join(tools, ",") + `],"nextCursor":"c2"}}`
}

func TestFilterToolsJSON(t *testing.T) {
	tests := map[string]struct {
		in   string
		want string // "" when unchanged
	}{
		"tools list": {in: toolsAnswer("1", "get_issue", "delete_repo", "list_issues"),
			want: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"get_issue","inputSchema":{"type":"object"}},{"name":"list_issues","inputSchema":{"type":"object"}}],"nextCursor":"c2"}}`},
		"call result":      {in: `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"tools"}]}}`},
		"notification":     {in: `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`},
		"error":            {in: `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}`},
		"not JSON":         {in: `tools`},
		"two results":      {in: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":{"tools":[{"name":"delete_repo"}]}}`, want: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":{"tools":[]}}`},
		"folded tools":     {in: `{"jsonrpc":"2.0","id":1,"result":{"Tools":[{"name":"delete_repo"}],"tool\u017f":[{"name":"delete_repo"}]}}`, want: `{"jsonrpc":"2.0","id":1,"result":{"Tools":[],"toolſ":[]}}`},
		"folded name":      {in: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"get_issue","NAME":"delete_repo"},{"Name":"list_issues"}]}}`, want: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"Name":"list_issues"}]}}`},
		"tools not a list": {in: `{"jsonrpc":"2.0","id":1,"result":{"tools":{"name":"delete_repo"}}}`, want: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`},
		"nameless tool":    {in: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"title":"x"},7]}}`, want: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`},
		"batch": {in: `[{"jsonrpc":"2.0","id":2,"result":{}},` + toolsAnswer(`"a"`, "delete_repo") + `]`,
			want: `[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":"a","result":{"tools":[],"nextCursor":"c2"}}]`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, changed := filterToolsJSON([]byte(tc.in), readOnly)
			if tc.want == "" {
				if changed || string(out) != tc.in {
					t.Fatalf("rewrote %s as %s", tc.in, out)
				}
				return
			}
			if !changed || string(out) != tc.want {
				t.Fatalf("got %s (changed %v), want %s", out, changed, tc.want)
			}
		})
	}
}

// filterSSE runs the event stream filter over in, read through wrap.
func filterSSE(t testing.TB, in string, wrap func(io.Reader) io.Reader) (string, error) {
	t.Helper()
	out, err := io.ReadAll(newSSEFilter(wrap(strings.NewReader(in)), readOnly))
	return string(out), err
}

func TestSSEFilter(t *testing.T) {
	list := toolsAnswer("1", "get_issue", "delete_repo")
	filtered, _ := filterToolsJSON([]byte(list), readOnly)
	tests := map[string]struct {
		in, want string
	}{
		"tools list": {in: "id: 1\nevent: message\ndata: " + list + "\n\n", want: "id: 1\nevent: message\ndata: " + string(filtered) + "\n\n"},
		"other events kept": {in: ": ping\r\n\r\nid: 2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\r\n\r\nretry: 10\rdata:x\r\r",
			want: ": ping\r\n\r\nid: 2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\r\n\r\nretry: 10\rdata:x\r\r"},
		"split data lines": {in: "data: " + list[:strings.Index(list, `{"tools"`)] + "\ndata: " + list[strings.Index(list, `{"tools"`):] + "\n\n",
			want: "data: " + string(filtered) + "\n\n"},
		"split inside a string":    {in: "data: " + list[:40] + "\ndata: " + list[40:] + "\n\n", want: "data: " + list[:40] + "\ndata: " + list[40:] + "\n\n"},
		"CR line ends":             {in: "data: " + list + "\r\r", want: "data: " + string(filtered) + "\n\r"},
		"no blank line at the end": {in: "data: " + list, want: "data: " + string(filtered) + "\n"},
		"byte order mark":          {in: "\xef\xbb\xbfdata: " + list + "\n\n", want: "\xef\xbb\xbfdata: " + string(filtered) + "\n\n"},
		"id after data":            {in: "data: " + list + "\nid: 9\n\n", want: "id: 9\ndata: " + string(filtered) + "\n\n"},
		"id after data, no tools":  {in: "data: {}\nid: 9\n\ndata\n00", want: "data: {}\nid: 9\n\ndata\n00"},
		"Data is no field":         {in: "Data: " + list + "\n\n", want: "Data: " + list + "\n\n"},
		"data without space":       {in: "data:" + list + "\n\n", want: "data: " + string(filtered) + "\n\n"},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	}
	for name, tc := range tests {
		for rname, wrap := range readers {
			t.Run(name+"/"+rname, func(t *testing.T) {
				got, err := filterSSE(t, tc.in, wrap)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Fatalf("got\n%q\nwant\n%q", got, tc.want)
				}
			})
		}
	}
}

// TestSSEFilterPassesAtOnce checks that a line other than data, and an
// event once its blank line is read, reach the reader without waiting
// for more of the stream.
func TestSSEFilterPassesAtOnce(t *testing.T) {
	pr, pw := io.Pipe()
	f := newSSEFilter(pr, readOnly)
	got := make(chan string)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- string(buf[:n])
		}
	}()
	for _, step := range []struct{ write, want string }{
		{": keep-alive\n", ": keep-alive\n"},
		{"id: 4\n", "id: 4\n"},
		{"data: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n\n", "data: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n\n"},
	} {
		pw.Write([]byte(step.write))
		if s := <-got; s != step.want {
			t.Fatalf("read %q, want %q", s, step.want)
		}
	}
	pw.Close()
	<-got
}

func TestSSEFilterBounds(t *testing.T) {
	long := "data: " + strings.Repeat("a", maxMCPAnswer+1)
	if _, err := filterSSE(t, long, func(r io.Reader) io.Reader { return r }); err == nil {
		t.Fatal("an over-long event passed")
	}
}

func TestWriteMCPRefusal(t *testing.T) {
	for name, tc := range map[string]struct {
		id   string
		want string
	}{
		"with id": {id: `"x-1"`, want: `"x-1"`},
		"no id":   {want: `null`},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			d := policy.Refusal(policy.ReasonL7NotAllowed, "mcp.example.com", `no rule allows "delete_repo"`)
			d.MCP = &policy.MCPExchange{ID: json.RawMessage(tc.id)}
			if tc.id == "" {
				d.MCP.ID = nil
			}
			writeRefusal(rec, d, false)
			if rec.Code != http.StatusForbidden || rec.Header().Get(policy.RefusedHeader) != "l7-not-allowed" || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, header %v", rec.Code, rec.Header())
			}
			var msg struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
					Data    struct {
						Reason string `json:"reason"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil {
				t.Fatal(err)
			}
			if msg.JSONRPC != "2.0" || string(msg.ID) != tc.want || msg.Error.Code != mcpRefusalCode || msg.Error.Data.Reason != "l7-not-allowed" ||
				msg.Error.Message != `keyhole: l7-not-allowed: no rule allows "delete_repo"` {
				t.Fatalf("got %s", rec.Body)
			}
		})
	}
}

// sseEvents parses an event stream as a client does (the HTML
// standard's algorithm) and returns each event's data, a last event
// without its blank line included, as a lenient client reads it.
func sseEvents(s []byte) []string {
	s = bytes.TrimPrefix(s, []byte("\xef\xbb\xbf"))
	var out []string
	var data []byte
	has := false
	for len(s) > 0 {
		var line []byte
		i := bytes.IndexAny(s, "\r\n")
		switch {
		case i < 0:
			line, s = s, nil
		case s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n':
			line, s = s[:i], s[i+2:]
		default:
			line, s = s[:i], s[i+1:]
		}
		if len(line) == 0 {
			if has {
				out = append(out, string(data))
			}
			data, has = data[:0], false
			continue
		}
		name, value, colon := bytes.Cut(line, []byte(":"))
		if colon {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		if string(name) == "data" {
			if has {
				data = append(data, '\n')
			}
			data, has = append(data, value...), true
		}
	}
	if has {
		out = append(out, string(data))
	}
	return out
}

// listedTools returns the tool names Go's encoding/json (which folds
// case) reads in the results of the JSON-RPC messages data holds.
func listedTools(data string) []string {
	type message struct {
		Result struct {
			Tools []struct {
				Name string
			}
		}
	}
	var msgs []message
	if json.Unmarshal([]byte(data), &msgs) != nil {
		var m message
		if json.Unmarshal([]byte(data), &m) != nil {
			return nil
		}
		msgs = []message{m}
	}
	var names []string
	for _, m := range msgs {
		for _, t := range m.Result.Tools {
			names = append(names, t.Name)
		}
	}
	return names
}

// FuzzSSEFilter checks the event stream filter: the same bytes out
// however the stream is cut into reads, every byte as it came where no
// event holds a tools list, and no tool listed that is not allowed, as a
// client reading the stream with Go's encoding/json sees it.
func FuzzSSEFilter(f *testing.F) {
	list := toolsAnswer("1", "get_issue", "delete_repo")
	for _, s := range []string{
		"data: " + list + "\n\n", "id: 1\r\ndata: " + list[:30] + "\r\ndata: " + list[30:] + "\r\n\r\n",
		": ping\n\ndata: {}\n\n", "\xef\xbb\xbfdata:" + list + "\r\r", "data: [" + list + "]",
		`data: {"result":{"TOOLS":[{"NAME":"delete_repo"}]}}` + "\n\n",
	} {
		f.Add([]byte(s), uint16(7))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		whole, err := filterSSE(t, string(in), func(r io.Reader) io.Reader { return r })
		if err != nil {
			t.Fatal(err)
		}
		n := int(cut)%64 + 1
		cutUp, err := filterSSE(t, string(in), func(r io.Reader) io.Reader { return &chunkReader{r: r, n: n} })
		if err != nil {
			t.Fatal(err)
		}
		if whole != cutUp {
			t.Fatalf("reads of %d bytes gave %q, one read %q", n, cutUp, whole)
		}
		if !bytes.Contains(bytes.ToLower(in), []byte("tool")) && !bytes.ContainsAny(in, "\u017f\u212a") && whole != string(in) {
			t.Fatalf("rewrote a stream holding no tools list: %q into %q", in, whole)
		}
		for _, data := range sseEvents([]byte(whole)) {
			for _, name := range listedTools(data) {
				if !readOnly[name] {
					t.Fatalf("the tool %q is listed in %q (from %q)", name, data, in)
				}
			}
		}
	})
}

// chunkReader reads at most n bytes at a time.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}
