package suggest

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy"
)

// TestExampleLogIsTheProxys holds examples/github-acme/egress.log, which
// the docs and keyhole suggest -h read, to the proxy's own line writer:
// each line is what proxy.AppendRequestLine writes for its fields.
func TestExampleLogIsTheProxys(t *testing.T) {
	f, err := os.Open("../examples/github-acme/egress.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var w struct {
			Time                                                      time.Time
			Sandbox, Host, Method, Path, Decision, Reason, Connection string
			Status                                                    int
			DurationMS                                                float64 `json:"duration_ms"`
		}
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		got := string(proxy.AppendRequestLine(nil, w.Time, proxy.RequestLine{
			Sandbox: w.Sandbox, Host: w.Host, Method: w.Method, Path: w.Path, Decision: w.Decision,
			Reason: w.Reason, Connection: w.Connection, Status: w.Status, DurationMS: w.DurationMS,
		}))
		if got != sc.Text()+"\n" {
			t.Fatalf("line %d:\n%s\nthe proxy writes:\n%s", n+1, sc.Text(), got)
		}
		n++
	}
	if err := sc.Err(); err != nil || n == 0 {
		t.Fatalf("read %d lines: %v", n, err)
	}
}
