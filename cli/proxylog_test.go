package cli

import (
	"bufio"
	"os"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"keyhole.dev/keyhole/proxy"
)

// cmdProxylog writes a proxy request log with the proxy's own line
// writer, so the logs suggest's scripts read are in the format the proxy
// writes: "proxylog SPEC OUT" reads SPEC, one request a line as
// "SANDBOX HOST METHOD PATH DECISION REASON [CONNECTION]" ("-" for an
// empty field), and writes OUT. A SPEC line starting with "raw " is
// written as the rest of the line, for lines that are not the proxy's.
func cmdProxylog(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: proxylog SPEC OUT")
	}
	spec, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer spec.Close()
	var out []byte
	t := time.Date(2026, 11, 29, 23, 10, 0, 0, time.UTC)
	sc := bufio.NewScanner(spec)
	for sc.Scan() {
		line := sc.Text()
		if raw, ok := strings.CutPrefix(line, "raw "); ok {
			out = append(out, raw+"\n"...)
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 6 {
			ts.Fatalf("proxylog: %q: want SANDBOX HOST METHOD PATH DECISION REASON [CONNECTION]", line)
		}
		for i := range f {
			if f[i] == "-" {
				f[i] = ""
			}
		}
		l := proxy.RequestLine{Sandbox: f[0], Host: f[1], Method: f[2], Path: f[3], Decision: f[4], Reason: f[5], Status: 200, DurationMS: 1.5}
		if len(f) > 6 {
			l.Connection = f[6]
		}
		if l.Decision == "refuse" {
			l.Status = 403
			if l.Reason == "credential-unavailable" {
				l.Status = 502
			}
		}
		out = proxy.AppendRequestLine(out, t, l)
		t = t.Add(time.Second)
	}
	ts.Check(sc.Err())
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), out, 0o644))
}
